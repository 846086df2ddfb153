// AVX-512 forms of the one-vector integer dots of q4_K and q6_K rows with a Q8_K activation
// row (the single-stream decode products). Two weight blocks share each 512-bit register, one
// per 256-bit half, so the quant unpacking, the int8 pair sums and the horizontal sums run
// at twice the width of the AVX2 dots (vec_dot_avx2.cc). Each block's integer sum is still
// formed exactly in int32 and the blocks are accumulated in order with the AVX2 dots' float
// operations (d_w·d_a · sum by FMA, minus dmin·d_a · Σ m·Σa), so the result has the AVX2
// dot's bits, and the int8 GEMM's.
// GCC 12 takes the undefined pass-through operands of _mm512_castsi256_si512 and friends for
// uninitialized variables once inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "common/quant/blocks.h"
#include "kernels/cpu/kernels_avx512.h"

namespace tessera::cpu::avx512 {
namespace {

using quant::kQKK;

constexpr int kPrefetchDistance = 2048;  // bytes ahead, as the AVX2 dots ask

void PrefetchAhead(const void* block, size_t bytes) {
  const char* p = static_cast<const char*>(block) + kPrefetchDistance;
  for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}

__m256i Load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 32 bytes of block i (low half) and 32 bytes of block i + 1 (high half).
__m512i Two32(const void* lo, const void* hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(Load32(lo)), Load32(hi), 1);
}

// A 256-bit value in the low half, zeros in the high half (a lone last block).
__m512i Low32(const void* lo) { return _mm512_zextsi256_si512(Load32(lo)); }

// The exact int32 sums of each 256-bit half's 8 lanes.
[[gnu::always_inline]] inline void HalfSums(__m512i v, int32_t* lo, int32_t* hi) {
  const __m256i a = _mm512_castsi512_si256(v), b = _mm512_extracti64x4_epi64(v, 1);
  __m256i s = _mm256_hadd_epi32(a, b);  // per 128-bit lane: a pairs, b pairs
  s = _mm256_hadd_epi32(s, s);          // per lane: [a quad, b quad, a quad, b quad]
  const __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  *lo = _mm_cvtsi128_si32(t);
  *hi = _mm_extract_epi32(t, 1);
}

float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

// Control for _mm512_shuffle_epi8 that broadcasts int16 element j of each 128-bit lane.
__m512i Int16Picker(int j) {
  return _mm512_set1_epi16(static_cast<int16_t>((2 * j) | ((2 * j + 1) << 8)));
}

// Q4_K: the 8 scales of a block as int16, in both 128-bit lanes of a 256-bit half; the mins
// each twice (against the 16 bsums).
__m256i ScalesK4(uint64_t sc) {
  return _mm256_broadcastsi128_si256(
      _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc))));
}
__m256i MinsK4(uint64_t m) {
  const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<int64_t>(m)), dup));
}

// Two Q4_K blocks against their Q8_K activation blocks, one pair per 256-bit half: (w0, a0)
// low, (w1, a1) high (blocks i and i + 1 of one row, or block i of two rows against the same
// activations); with `two` false the high half is zero. Their integer sums Σ sc·Σ(u·a) and
// Σ m·Σa.
[[gnu::always_inline]] inline void SumsQ4_K(const quant::BlockQ4_K& w0, const quant::BlockQ4_K& w1,
                                            const quant::BlockQ8_K& a0, const quant::BlockQ8_K& a1,
                                            bool two, int32_t is[2], int32_t ms[2]) {
  uint64_t sc0, m0, sc1 = 0, m1 = 0;
  quant::UnpackScalesMinsK4(w0.scales, &sc0, &m0);
  if (two) quant::UnpackScalesMinsK4(w1.scales, &sc1, &m1);
  const __m512i sc16 = _mm512_inserti64x4(_mm512_castsi256_si512(ScalesK4(sc0)), ScalesK4(sc1), 1);
  const __m512i mins16 = _mm512_inserti64x4(_mm512_castsi256_si512(MinsK4(m0)), MinsK4(m1), 1);
  const __m512i mask = _mm512_set1_epi8(0x0F);
  auto load = [&](const void* p0, const void* p1) { return two ? Two32(p0, p1) : Low32(p0); };
  __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    const __m512i raw = load(w0.qs + 32 * p, w1.qs + 32 * p);
    const __m512i lo = _mm512_and_si512(raw, mask);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), mask);
    const __m512i alo = load(a0.qs + 64 * p, a1.qs + 64 * p);
    const __m512i ahi = load(a0.qs + 64 * p + 32, a1.qs + 64 * p + 32);
    const __m512i s_lo = _mm512_shuffle_epi8(sc16, Int16Picker(2 * p));
    const __m512i s_hi = _mm512_shuffle_epi8(sc16, Int16Picker(2 * p + 1));
    isum = _mm512_add_epi32(isum, _mm512_madd_epi16(_mm512_maddubs_epi16(lo, alo), s_lo));
    isum = _mm512_add_epi32(isum, _mm512_madd_epi16(_mm512_maddubs_epi16(hi, ahi), s_hi));
  }
  HalfSums(isum, &is[0], &is[1]);
  HalfSums(_mm512_madd_epi16(load(a0.bsums, a1.bsums), mins16), &ms[0], &ms[1]);
}

// acc += block b's part of the dot, the AVX2 dots' float operations.
[[gnu::always_inline]] inline float AccumulateQ4_K(float acc, const quant::BlockQ4_K& w,
                                                   const quant::BlockQ8_K& a, int32_t is,
                                                   int32_t ms) {
  const float dw = HalfToFloat(w.d), dmin = HalfToFloat(w.dmin);
  acc = std::fma(dw * a.d, static_cast<float>(is), acc);
  return std::fma(-(dmin * a.d), static_cast<float>(ms), acc);
}

float DotQ4_K(const void* wp, const void* ap, int64_t n) {
  const auto* w = static_cast<const quant::BlockQ4_K*>(wp);
  const auto* a = static_cast<const quant::BlockQ8_K*>(ap);
  const int64_t blocks = n / kQKK;
  float acc = 0.0f;
  int64_t i = 0;
  for (; i + 1 < blocks; i += 2) {
    PrefetchAhead(w + i, 2 * sizeof(quant::BlockQ4_K));
    int32_t is[2], ms[2];
    SumsQ4_K(w[i], w[i + 1], a[i], a[i + 1], true, is, ms);
    acc = AccumulateQ4_K(acc, w[i], a[i], is[0], ms[0]);
    acc = AccumulateQ4_K(acc, w[i + 1], a[i + 1], is[1], ms[1]);
  }
  if (i < blocks) {
    int32_t is[2], ms[2];
    SumsQ4_K(w[i], w[i], a[i], a[i], false, is, ms);
    acc = AccumulateQ4_K(acc, w[i], a[i], is[0], ms[0]);
  }
  return acc;
}

// Block i of (w0, a0) and of (w1, a1) per register: two rows against one activation row
// (a0 = a1; no half idle when a row has an odd number of blocks), or one row against two
// activation rows (w0 = w1). out[k] has the bits of the one-vector dot of (wk, ak).
void PairQ4_K(const void* w0p, const void* w1p, const void* a0p, const void* a1p, int64_t n,
              float out[2]) {
  const auto* w0 = static_cast<const quant::BlockQ4_K*>(w0p);
  const auto* w1 = static_cast<const quant::BlockQ4_K*>(w1p);
  const auto* a0 = static_cast<const quant::BlockQ8_K*>(a0p);
  const auto* a1 = static_cast<const quant::BlockQ8_K*>(a1p);
  float acc0 = 0.0f, acc1 = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    PrefetchAhead(w0 + i, sizeof(quant::BlockQ4_K));
    if (w1 != w0) PrefetchAhead(w1 + i, sizeof(quant::BlockQ4_K));
    int32_t is[2], ms[2];
    SumsQ4_K(w0[i], w1[i], a0[i], a1[i], true, is, ms);
    acc0 = AccumulateQ4_K(acc0, w0[i], a0[i], is[0], ms[0]);
    acc1 = AccumulateQ4_K(acc1, w1[i], a1[i], is[1], ms[1]);
  }
  out[0] = acc0;
  out[1] = acc1;
}

void DotQ4_K2(const void* w0, const void* w1, const void* a, int64_t n, float out[2]) {
  PairQ4_K(w0, w1, a, a, n, out);
}

void DotQ4_K_TwoVectors(const void* w, const void* a0, const void* a1, int64_t n, float out[2]) {
  PairQ4_K(w, w, a0, a1, n, out);
}

// Q6_K: scales 8h..8h+7 of a block as int16 in both 128-bit lanes of a 256-bit half.
__m256i ScalesQ6(const quant::BlockQ6_K& b, int h) {
  const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
  return _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h == 0 ? sc8 : _mm_srli_si128(sc8, 8)));
}

// Two Q6_K blocks against their activation blocks, (w0, a0) in the low half and (w1, a1) in
// the high one, as SumsQ4_K: Σ sc·Σ(q·a), the stored q + 32 corrected by 32·Σ sc·Σa from
// the activation's bsums.
[[gnu::always_inline]] inline void SumsQ6_K(const quant::BlockQ6_K& w0, const quant::BlockQ6_K& w1,
                                            const quant::BlockQ8_K& a0, const quant::BlockQ8_K& a1,
                                            bool two, int32_t is[2]) {
  const __m512i mask4 = _mm512_set1_epi8(0x0F), mask2 = _mm512_set1_epi8(0x03);
  __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m512i sc =
        _mm512_inserti64x4(_mm512_castsi256_si512(ScalesQ6(w0, h)), ScalesQ6(w1, h), 1);
    auto load = [&](const void* p0, const void* p1) { return two ? Two32(p0, p1) : Low32(p0); };
    const __m512i qa = load(w0.ql + 64 * h, w1.ql + 64 * h);
    const __m512i qb = load(w0.ql + 64 * h + 32, w1.ql + 64 * h + 32);
    const __m512i qc = load(w0.qh + 32 * h, w1.qh + 32 * h);
    const __m512i low[4] = {_mm512_and_si512(qa, mask4), _mm512_and_si512(qb, mask4),
                            _mm512_and_si512(_mm512_srli_epi16(qa, 4), mask4),
                            _mm512_and_si512(_mm512_srli_epi16(qb, 4), mask4)};
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512i top = _mm512_and_si512(_mm512_srli_epi16(qc, 2 * r), mask2);
      const __m512i u = _mm512_or_si512(low[r], _mm512_slli_epi16(top, 4));
      // Per 256-bit half: elements 0-15 take scale 2r, 16-31 scale 2r + 1.
      const __m512i pick = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_set_m128i(_mm512_castsi512_si128(Int16Picker(2 * r + 1)),
                                                  _mm512_castsi512_si128(Int16Picker(2 * r)))),
          _mm256_set_m128i(_mm512_castsi512_si128(Int16Picker(2 * r + 1)),
                           _mm512_castsi512_si128(Int16Picker(2 * r))),
          1);
      const __m512i scales = _mm512_shuffle_epi8(sc, pick);
      const __m512i act = load(a0.qs + 128 * h + 32 * r, a1.qs + 128 * h + 32 * r);
      isum = _mm512_add_epi32(isum, _mm512_madd_epi16(_mm512_maddubs_epi16(u, act), scales));
    }
  }
  auto sc16 = [](const quant::BlockQ6_K& b) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  };
  const __m512i scales16 = _mm512_inserti64x4(_mm512_castsi256_si512(sc16(w0)), sc16(w1), 1);
  const __m512i bsums = two ? Two32(a0.bsums, a1.bsums) : Low32(a0.bsums);
  const __m512i offsets = _mm512_madd_epi16(bsums, scales16);
  isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(offsets, 5));
  HalfSums(isum, &is[0], &is[1]);
}

float DotQ6_K(const void* wp, const void* ap, int64_t n) {
  const auto* w = static_cast<const quant::BlockQ6_K*>(wp);
  const auto* a = static_cast<const quant::BlockQ8_K*>(ap);
  const int64_t blocks = n / kQKK;
  float acc = 0.0f;
  int64_t i = 0;
  for (; i + 1 < blocks; i += 2) {
    PrefetchAhead(w + i, 2 * sizeof(quant::BlockQ6_K));
    int32_t is[2];
    SumsQ6_K(w[i], w[i + 1], a[i], a[i + 1], true, is);
    acc = std::fma(HalfToFloat(w[i].d) * a[i].d, static_cast<float>(is[0]), acc);
    acc = std::fma(HalfToFloat(w[i + 1].d) * a[i + 1].d, static_cast<float>(is[1]), acc);
  }
  if (i < blocks) {
    int32_t is[2];
    SumsQ6_K(w[i], w[i], a[i], a[i], false, is);
    acc = std::fma(HalfToFloat(w[i].d) * a[i].d, static_cast<float>(is[0]), acc);
  }
  return acc;
}

void DotQ6_K_TwoVectors(const void* wp, const void* a0p, const void* a1p, int64_t n, float out[2]) {
  const auto* w = static_cast<const quant::BlockQ6_K*>(wp);
  const auto* a0 = static_cast<const quant::BlockQ8_K*>(a0p);
  const auto* a1 = static_cast<const quant::BlockQ8_K*>(a1p);
  float acc0 = 0.0f, acc1 = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    PrefetchAhead(w + i, sizeof(quant::BlockQ6_K));
    int32_t is[2];
    SumsQ6_K(w[i], w[i], a0[i], a1[i], true, is);
    const float dw = HalfToFloat(w[i].d);
    acc0 = std::fma(dw * a0[i].d, static_cast<float>(is[0]), acc0);
    acc1 = std::fma(dw * a1[i].d, static_cast<float>(is[1]), acc1);
  }
  out[0] = acc0;
  out[1] = acc1;
}

}  // namespace

TwoVectorDotFn IntegerDotTwoVectors(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_K:
      return DotQ4_K_TwoVectors;
    case gguf::GgmlType::kQ6_K:
      return DotQ6_K_TwoVectors;
    default:
      return nullptr;
  }
}

OneDotFn IntegerDot(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_K:
      return DotQ4_K;
    case gguf::GgmlType::kQ6_K:
      return DotQ6_K;
    default:
      return nullptr;
  }
}

TwoRowDotFn IntegerDot2(gguf::GgmlType type) {
  // q6_K's two-row form measured slower than its one-row form (memory-bound decode, Zen 5).
  return type == gguf::GgmlType::kQ4_K ? DotQ4_K2 : nullptr;
}

}  // namespace tessera::cpu::avx512
