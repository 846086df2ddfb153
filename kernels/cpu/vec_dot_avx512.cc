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

#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

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

// Q4_K: the 8 mins of a block as int16, each twice (against the 16 bsums).
__m256i MinsK4(uint64_t m) {
  const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<int64_t>(m)), dup));
}

// The VNNI dots of q4_K, q5_K and q6_K. A block is unpacked once for every activation row it
// meets: its quants as four registers of 64 unsigned bytes in element order (register p
// holds elements 64p..64p+63, as the activation's qs), and its scales as four registers of
// int32 lanes, lane l of register p holding the scale of elements 64p + 4l..64p + 4l + 3 in
// its low 16 bits and zero in its high 16. Per activation row and register, one vpdpbusd
// gives 16 lanes of four products each, at most 4·63·128 = 32,256 in magnitude (q6_K;
// 4·31·128 for q5_K, 4·15·128 for q4_K), so a lane's low 16 bits are its value, and one vpdpwssd
// against the scales adds scale·lane exactly. A block's integer sums are thus formed exactly in
// int32, as the AVX2 dots and the int8 GEMM form them, and the float accumulation below is theirs:
// every (row, vector) gets their bits.
struct UnpackedK {
  __m512i q[4];
  __m512i sc[4];
  __m256i side;   // int16 against the activation's 16 bsums: the mins (each twice), q6_K's scales
  float d, dmin;  // dmin: q4_K and q5_K only
};

template <class Block>  // quant::BlockQ4_K or quant::BlockQ5_K (q6_K: the overload below)
[[gnu::always_inline]] inline void Unpack(const Block& w, UnpackedK* u) {
  constexpr bool kFifthBit = std::is_same_v<Block, quant::BlockQ5_K>;
  uint64_t sc, m;
  quant::UnpackScalesMinsK4(w.scales, &sc, &m);
  const __m512i sc32 = _mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(sc)));
  // Register p: sub-blocks 2p (lanes 0-7) and 2p + 1 (lanes 8-15).
  const __m512i upper = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i mask = _mm512_set1_epi8(0x0F);
  // q5_K: element 64p + l takes bit 2p of qh[l] as its fifth bit, element 64p + 32 + l bit
  // 2p + 1; `fifth` holds qh in the low 256 bits and qh >> 1 in the high ones.
  __m512i fifth = _mm512_setzero_si512();
  if constexpr (kFifthBit) {
    const __m512i qh = _mm512_broadcast_i64x4(Load32(w.qh));
    fifth = _mm512_mask_srli_epi16(qh, 0xFFFF0000u, qh, 1);
  }
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    // The low nibbles of qs[32p, 32p + 32) are elements 64p..64p+31, the high ones the next
    // 32: the high 256 bits take the high nibbles.
    const __m512i raw = _mm512_broadcast_i64x4(Load32(w.qs + 32 * p));
    u->q[p] = _mm512_and_si512(_mm512_mask_srli_epi16(raw, 0xFFFF0000u, raw, 4), mask);
    if constexpr (kFifthBit) {
      // Bit 2p of each byte of `fifth` to bit 4.
      const __m512i bit =
          2 * p <= 4 ? _mm512_slli_epi16(fifth, 4 - 2 * p) : _mm512_srli_epi16(fifth, 2 * p - 4);
      u->q[p] = _mm512_or_si512(u->q[p], _mm512_and_si512(bit, _mm512_set1_epi8(0x10)));
    }
    u->sc[p] = _mm512_permutexvar_epi32(_mm512_add_epi32(upper, _mm512_set1_epi32(2 * p)), sc32);
  }
  u->side = MinsK4(m);
  u->d = HalfToFloat(w.d);
  u->dmin = HalfToFloat(w.dmin);
}

[[gnu::always_inline]] inline void Unpack(const quant::BlockQ6_K& w, UnpackedK* u) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    // Elements 128h + l and 128h + 32 + l take the low nibbles of ql[64h + l] and
    // ql[64h + 32 + l] with bits 0-1 and 2-3 of qh[32h + l]; elements 128h + 64 + l and
    // 128h + 96 + l the high nibbles with bits 4-5 and 6-7.
    const __m512i lo = _mm512_loadu_si512(w.ql + 64 * h);
    const __m512i c = _mm512_broadcast_i64x4(Load32(w.qh + 32 * h));
    const __m512i c2 = _mm512_mask_srli_epi16(c, 0xFFFF0000u, c, 2);  // high half: qh >> 2
    u->q[2 * h] =
        _mm512_or_si512(_mm512_and_si512(lo, m4), _mm512_and_si512(_mm512_slli_epi16(c2, 4), top));
    u->q[2 * h + 1] =
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 4), m4), _mm512_and_si512(c2, top));
  }
  const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales));
  const __m512i sc32 = _mm512_and_si512(_mm512_cvtepi8_epi32(sc8), _mm512_set1_epi32(0xFFFF));
  // Register p: the scales of its four 16-element sub-blocks, four lanes each.
  const __m512i quad = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    u->sc[p] = _mm512_permutexvar_epi32(_mm512_add_epi32(quad, _mm512_set1_epi32(4 * p)), sc32);
  }
  u->side = _mm256_cvtepi8_epi16(sc8);
  u->d = HalfToFloat(w.d);
  u->dmin = 0.0f;
}

// Σ scale·Σ(q·a) of an unpacked block against an activation block, as 16 int32 lanes.
[[gnu::always_inline]] inline __m512i IntSum(const UnpackedK& u, const quant::BlockQ8_K& a) {
  __m512i even = _mm512_setzero_si512(), odd = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    const __m512i dot =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), u.q[p], _mm512_loadu_si512(a.qs + 64 * p));
    if (p % 2 == 0) {
      even = _mm512_dpwssd_epi32(even, dot, u.sc[p]);
    } else {
      odd = _mm512_dpwssd_epi32(odd, dot, u.sc[p]);
    }
  }
  return _mm512_add_epi32(even, odd);
}

// Two (block, activation) pairs at once, (u0, a0) and (u1, a1): [x0, x1, y0, y1] with
// x = Σ scale·Σ(q·a) and y = Σ side·bsums, each summed exactly in int32. With `two` false the
// second pair reads as zeros.
[[gnu::always_inline]] inline __m128i PairSums(const UnpackedK& u0, const UnpackedK& u1,
                                               const quant::BlockQ8_K& a0,
                                               const quant::BlockQ8_K& a1, bool two) {
  const __m512i s0 = IntSum(u0, a0);
  const __m512i s1 = two ? IntSum(u1, a1) : _mm512_setzero_si512();
  const __m512i bsums = two ? Two32(a0.bsums, a1.bsums) : Low32(a0.bsums);
  const __m512i y =
      _mm512_madd_epi16(bsums, _mm512_inserti64x4(_mm512_castsi256_si512(u0.side), u1.side, 1));
  // [s0 folded to 8 lanes | s1 folded], then with y: 4 lanes each of s0, s1, y0, y1.
  const __m512i x = _mm512_add_epi32(_mm512_shuffle_i64x2(s0, s1, _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm512_shuffle_i64x2(s0, s1, _MM_SHUFFLE(3, 2, 3, 2)));
  __m512i z = _mm512_add_epi32(_mm512_shuffle_i32x4(x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_i32x4(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
  z = _mm512_add_epi32(z, _mm512_shuffle_epi32(z, _MM_PERM_BADC));
  z = _mm512_add_epi32(z, _mm512_shuffle_epi32(z, _MM_PERM_CDAB));
  const __m512i lanes = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
  return _mm512_castsi512_si128(_mm512_permutexvar_epi32(lanes, z));
}

// *acc0 += block (u0, a0)'s part of the dot, then (with acc1) *acc1 += (u1, a1)'s, from
// PairSums: the AVX2 dots' float operations. q4_K, q5_K: d·d_a·x − dmin·d_a·y; q6_K: its quants
// are stored + 32, so x − 32·y (exact in int32) times d·d_a. acc0 and acc1 may be the same.
template <class Block>
[[gnu::always_inline]] inline void AccumulatePair(__m128i sums, const UnpackedK& u0,
                                                  const quant::BlockQ8_K& a0, float* acc0,
                                                  const UnpackedK& u1, const quant::BlockQ8_K& a1,
                                                  float* acc1) {
  alignas(16) float f[4];
  if constexpr (!std::is_same_v<Block, quant::BlockQ6_K>) {  // q4_K, q5_K
    _mm_store_ps(f, _mm_cvtepi32_ps(sums));
    *acc0 = std::fma(u0.d * a0.d, f[0], *acc0);
    *acc0 = std::fma(-(u0.dmin * a0.d), f[2], *acc0);
    if (acc1 != nullptr) {
      *acc1 = std::fma(u1.d * a1.d, f[1], *acc1);
      *acc1 = std::fma(-(u1.dmin * a1.d), f[3], *acc1);
    }
  } else {
    const __m128i is = _mm_sub_epi32(sums, _mm_slli_epi32(_mm_unpackhi_epi64(sums, sums), 5));
    _mm_store_ps(f, _mm_cvtepi32_ps(is));
    *acc0 = std::fma(u0.d * a0.d, f[0], *acc0);
    if (acc1 != nullptr) *acc1 = std::fma(u1.d * a1.d, f[1], *acc1);
  }
}

// Two q4_K rows against one activation row, block i of both per step: out[k] has the bits
// of the one-vector dot of row k.
void DotQ4_K2(const void* w0p, const void* w1p, const void* ap, int64_t n, float out[2]) {
  const auto* w0 = static_cast<const quant::BlockQ4_K*>(w0p);
  const auto* w1 = static_cast<const quant::BlockQ4_K*>(w1p);
  const auto* a = static_cast<const quant::BlockQ8_K*>(ap);
  float acc0 = 0.0f, acc1 = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    PrefetchAhead(w0 + i, sizeof(quant::BlockQ4_K));
    PrefetchAhead(w1 + i, sizeof(quant::BlockQ4_K));
    UnpackedK u0, u1;
    Unpack(w0[i], &u0);
    Unpack(w1[i], &u1);
    AccumulatePair<quant::BlockQ4_K>(PairSums(u0, u1, a[i], a[i], true), u0, a[i], &acc0, u1, a[i],
                                     &acc1);
  }
  out[0] = acc0;
  out[1] = acc1;
}

// One row against V activation rows, two blocks per step, each unpacked once for all of
// them; the sums are reduced two (block, vector) pairs at a time: vectors v and v + 1 of one
// block, and for an odd V the last vector's two blocks. Each vector still accumulates block
// i before block i + 1.
template <class Block, int V>
void DotsK(const void* wp, const quant::BlockQ8_K* const* a, int64_t n, float* out) {
  const auto* w = static_cast<const Block*>(wp);
  const int64_t blocks = n / kQKK;
  float acc[V] = {};
  for (int64_t i = 0; i < blocks; i += 2) {
    PrefetchAhead(w + i, 2 * sizeof(Block));
    UnpackedK u0, u1;
    Unpack(w[i], &u0);
    if (i + 1 == blocks) {  // the last of an odd number of blocks
#pragma GCC unroll 8
      for (int v = 0; v < V; v += 2) {
        const bool two = v + 1 < V;
        const quant::BlockQ8_K& a1 = a[two ? v + 1 : v][i];
        AccumulatePair<Block>(PairSums(u0, u0, a[v][i], a1, two), u0, a[v][i], &acc[v], u0, a1,
                              two ? &acc[v + 1] : nullptr);
      }
      break;
    }
    Unpack(w[i + 1], &u1);
#pragma GCC unroll 8
    for (int v = 0; v + 1 < V; v += 2) {
      const __m128i s = PairSums(u0, u0, a[v][i], a[v + 1][i], true);
      const __m128i t = PairSums(u1, u1, a[v][i + 1], a[v + 1][i + 1], true);
      AccumulatePair<Block>(s, u0, a[v][i], &acc[v], u0, a[v + 1][i], &acc[v + 1]);
      AccumulatePair<Block>(t, u1, a[v][i + 1], &acc[v], u1, a[v + 1][i + 1], &acc[v + 1]);
    }
    if constexpr (V % 2 == 1) {
      AccumulatePair<Block>(PairSums(u0, u1, a[V - 1][i], a[V - 1][i + 1], true), u0, a[V - 1][i],
                            &acc[V - 1], u1, a[V - 1][i + 1], &acc[V - 1]);
    }
  }
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) out[v] = acc[v];
}

template <class Block>
float DotK(const void* w, const void* a, int64_t n) {
  const quant::BlockQ8_K* const rows[1] = {static_cast<const quant::BlockQ8_K*>(a)};
  float out;
  DotsK<Block, 1>(w, rows, n, &out);
  return out;
}

// DotsK<Block, 1..kMaxDotVectors>, indexed by the vector count less one.
template <class Block, size_t... I>
constexpr auto DotsForEachCount(std::index_sequence<I...>) {
  return std::array{&DotsK<Block, static_cast<int>(I) + 1>...};
}

template <class Block>
void DotsKMany(const void* w, const void* ap, size_t stride, int nb, int64_t n, float* out) {
  const quant::BlockQ8_K* a[kMaxDotVectors];
  for (int v = 0; v < nb; ++v) {
    a[v] = reinterpret_cast<const quant::BlockQ8_K*>(static_cast<const char*>(ap) + v * stride);
  }
  static constexpr auto kDots = DotsForEachCount<Block>(std::make_index_sequence<kMaxDotVectors>());
  kDots[nb - 1](w, a, n, out);
}

// Q6_K: scales 8h..8h+7 of a block as int16 in both 128-bit lanes of a 256-bit half.
__m256i ScalesQ6(const quant::BlockQ6_K& b, int h) {
  const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
  return _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h == 0 ? sc8 : _mm_srli_si128(sc8, 8)));
}

// Two Q6_K blocks against their activation blocks, (w0, a0) in the low half and (w1, a1) in
// the high one: Σ sc·Σ(q·a), the stored q + 32 corrected by 32·Σ sc·Σa from
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

}  // namespace

OneDotFn IntegerDot(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_K:
      return DotK<quant::BlockQ4_K>;
    case gguf::GgmlType::kQ6_K:
      return DotQ6_K;  // as fast as DotK<quant::BlockQ6_K> for one vector on Zen 4
    default:
      return nullptr;
  }
}

ManyDotFn IntegerDots(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_K:
      return DotsKMany<quant::BlockQ4_K>;
    case gguf::GgmlType::kQ5_K:
      return DotsKMany<quant::BlockQ5_K>;
    case gguf::GgmlType::kQ6_K:
      return DotsKMany<quant::BlockQ6_K>;
    default:
      return nullptr;
  }
}

TwoRowDotFn IntegerDot2(gguf::GgmlType type) {
  // q6_K's two-row form measured slower than its one-row form (memory-bound decode, Zen 5).
  return type == gguf::GgmlType::kQ4_K ? DotQ4_K2 : nullptr;
}

}  // namespace tessera::cpu::avx512
