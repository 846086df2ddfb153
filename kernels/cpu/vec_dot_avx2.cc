// AVX2 integer dot products of a weight row with an activation row quantized to Q8_0 or
// Q8_K. Within a block everything is exact int8×int8→int16→int32 arithmetic; for the types
// the int8 GEMM covers (q4_0, q8_0, q4_K, q5_K, q6_K) each activation block's integer sum is
// then formed exactly in int32 and accumulated block after block in one float (d_w·d_a ·
// sum by FMA, minus dmin·d_a · Σ m·Σa), which is what the GEMM computes for every (row,
// token): the two kernels give the same bits, so decode rows can take either. The result
// differs from the exact product of the dequantized operands only by float32 accumulation
// rounding.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "common/quant/blocks.h"
#include "kernels/cpu/avx2_helpers.h"
#include "kernels/cpu/kernels_avx2.h"

namespace tessera::cpu::avx2 {
namespace {

using quant::kQK;
using quant::kQKK;

// Weights stream from memory once per matvec; asking for the bytes a few KiB ahead keeps
// more cache-line fills in flight than the hardware prefetcher alone does for one stream.
constexpr int kPrefetchDistance = 2048;
void PrefetchAhead(const void* block, size_t bytes) {
  const char* p = static_cast<const char*>(block) + kPrefetchDistance;
  for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}

// 8 int32 partial sums of Σ w·a over 32 signed bytes each (|w|, |a| ≤ 127 fits maddubs).
__m256i DotI8(__m256i w, __m256i a) {
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

// The activation row of vector b of a multi-vector dot: `nb` rows `stride` bytes apart.
template <typename ActBlock, int NB>
void ActRows(const void* ap, size_t stride, const ActBlock* (&a)[NB]) {
  for (int b = 0; b < NB; ++b) {
    a[b] = reinterpret_cast<const ActBlock*>(static_cast<const uint8_t*>(ap) + b * stride);
  }
}

// Eight int32 vectors' lane sums as one vector (lane j = Σ of v[j]'s lanes), exact.
__m256i SumLanes8(const __m256i v[8]) {
  const __m256i s01 = _mm256_hadd_epi32(v[0], v[1]), s23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i s45 = _mm256_hadd_epi32(v[4], v[5]), s67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i s0123 = _mm256_hadd_epi32(s01, s23), s4567 = _mm256_hadd_epi32(s45, s67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(s0123, s4567, 0x20),
                          _mm256_permute2x128_si256(s0123, s4567, 0x31));
}

// The 32-element types with signed quants against Q8_0: Σ_blocks (d_w·d_a)·Σ q·a, where
// `quants(block)` gives the block's 32 quants as signed bytes; each block's integer sum
// exact, the blocks accumulated in order in one float. NB vectors share each weight block's
// decode; every vector's arithmetic is that of the one-vector dot (NB = 1), so a row's
// result does not depend on how many vectors share the call. Eight blocks at a time have
// their lane sums transposed into one vector.
template <typename Block, int NB, typename SignedQuants>
void DotSigned(const void* wp, const void* ap, size_t stride, int64_t n, float* out,
               SignedQuants quants) {
  const auto* w = static_cast<const Block*>(wp);
  const quant::BlockQ8_0* a[NB];
  ActRows(ap, stride, a);
  float acc[NB];
  for (int b = 0; b < NB; ++b) acc[b] = 0.0f;
  const int64_t n_blocks = n / kQK;
  int64_t i = 0;
  for (; i + 8 <= n_blocks; i += 8) {
    __m256i sums[NB][8];
    float dw[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      PrefetchAhead(w + i + j, sizeof(Block));
      dw[j] = HalfToFloat(w[i + j].d);
      const __m256i q = quants(w[i + j]);
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) sums[b][j] = DotI8(q, Load32(a[b][i + j].qs));
    }
    for (int b = 0; b < NB; ++b) {
      alignas(32) int32_t total[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(total), SumLanes8(sums[b]));
      for (int j = 0; j < 8; ++j) {
        acc[b] = std::fma(dw[j] * HalfToFloat(a[b][i + j].d), static_cast<float>(total[j]), acc[b]);
      }
    }
  }
  for (; i < n_blocks; ++i) {
    const float dw = HalfToFloat(w[i].d);
    const __m256i q = quants(w[i]);
    for (int b = 0; b < NB; ++b) {
      const int total = HorizontalSumI32(DotI8(q, Load32(a[b][i].qs)));
      acc[b] = std::fma(dw * HalfToFloat(a[b][i].d), static_cast<float>(total), acc[b]);
    }
  }
  for (int b = 0; b < NB; ++b) out[b] = acc[b];
}

template <int NB>
void DotQ8_0(const void* w, const void* a, size_t stride, int64_t n, float* out) {
  DotSigned<quant::BlockQ8_0, NB>(w, a, stride, n, out,
                                  [](const quant::BlockQ8_0& b) { return Load32(b.qs); });
}

template <int NB>
void DotQ4_0(const void* w, const void* a, size_t stride, int64_t n, float* out) {
  DotSigned<quant::BlockQ4_0, NB>(w, a, stride, n, out, [](const quant::BlockQ4_0& b) {
    return _mm256_sub_epi8(Nibbles32(b.qs), _mm256_set1_epi8(8));
  });
}

template <int NB>
void DotQ5_0(const void* w, const void* a, size_t stride, int64_t n, float* out) {
  DotSigned<quant::BlockQ5_0, NB>(w, a, stride, n, out, [](const quant::BlockQ5_0& b) {
    return _mm256_sub_epi8(_mm256_or_si256(Nibbles32(b.qs), FifthBits32(LoadU32(b.qh))),
                           _mm256_set1_epi8(16));
  });
}

template <int NB>
void DotIQ4_NL(const void* w, const void* a, size_t stride, int64_t n, float* out) {
  const __m256i table = Iq4Table(quant::kIq4nlValues);
  DotSigned<quant::BlockIQ4_NL, NB>(w, a, stride, n, out, [&](const quant::BlockIQ4_NL& b) {
    return _mm256_shuffle_epi8(table, Nibbles32(b.qs));
  });
}

// Σ over 32 bytes of u·a, u unsigned ≤ 63, as 16 int16 pair sums (no overflow: 2·63·127).
__m256i PairsU8(__m256i u, __m256i a) { return _mm256_maddubs_epi16(u, a); }

// Q4_K / Q5_K: Σ_s d·sc_s·Σ(u·a) − dmin·m_s·Σa, the Σa from the activation's bsums.
// Control for _mm256_shuffle_epi8 that broadcasts int16 element j of each 128-bit lane.
__m128i Int16Picker(int j) {
  return _mm_set1_epi16(static_cast<int16_t>((2 * j) | ((2 * j + 1) << 8)));
}

template <typename Block, int NB>
void DotK4(const void* wp, const void* ap, size_t stride, int64_t n, float* out) {
  const auto* w = static_cast<const Block*>(wp);
  const quant::BlockQ8_K* a[NB];
  ActRows(ap, stride, a);
  constexpr bool kFifthBit = sizeof(Block) == sizeof(quant::BlockQ5_K);
  const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  float acc[NB];
  for (int b = 0; b < NB; ++b) acc[b] = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    PrefetchAhead(w + i, sizeof(Block));
    uint64_t sc, m;
    quant::UnpackScalesMinsK4(w[i].scales, &sc, &m);
    // Σ_j m_j·(bsums[2j] + bsums[2j+1]): the minimums, each twice, against the 16 bsums.
    const __m256i mins16 =
        _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<int64_t>(m)), dup));
    // The 8 scales as int16 in both lanes, broadcast per sub-block by a shuffle.
    const __m256i sc16 =
        _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc))));
    __m256i qh;
    if constexpr (kFifthBit) qh = Load32(w[i].qh);
    __m256i isum[NB];
    for (int b = 0; b < NB; ++b) isum[b] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int p = 0; p < 4; ++p) {
      __m256i lo, hi;
      K4Quants(w[i].qs, kFifthBit ? &qh : nullptr, p, &lo, &hi);
      const __m256i s_lo =
          _mm256_shuffle_epi8(sc16, _mm256_broadcastsi128_si256(Int16Picker(2 * p)));
      const __m256i s_hi =
          _mm256_shuffle_epi8(sc16, _mm256_broadcastsi128_si256(Int16Picker(2 * p + 1)));
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) {
        const __m256i plo = PairsU8(lo, Load32(a[b][i].qs + 64 * p));
        const __m256i phi = PairsU8(hi, Load32(a[b][i].qs + 64 * p + 32));
        isum[b] = _mm256_add_epi32(isum[b], _mm256_madd_epi16(plo, s_lo));
        isum[b] = _mm256_add_epi32(isum[b], _mm256_madd_epi16(phi, s_hi));
      }
    }
    const float dw = HalfToFloat(w[i].d), dmin = HalfToFloat(w[i].dmin);
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      const __m256i min_sums = _mm256_madd_epi16(Load32(a[b][i].bsums), mins16);
      const float da = a[b][i].d;
      acc[b] = std::fma(dw * da, static_cast<float>(HorizontalSumI32(isum[b])), acc[b]);
      acc[b] = std::fma(-(dmin * da), static_cast<float>(HorizontalSumI32(min_sums)), acc[b]);
    }
  }
  for (int b = 0; b < NB; ++b) out[b] = acc[b];
}

template <int NB>
void DotQ4_K(const void* w, const void* a, size_t stride, int64_t n, float* out) {
  DotK4<quant::BlockQ4_K, NB>(w, a, stride, n, out);
}
template <int NB>
void DotQ5_K(const void* w, const void* a, size_t stride, int64_t n, float* out) {
  DotK4<quant::BlockQ5_K, NB>(w, a, stride, n, out);
}

template <int NB>
void DotQ6_K(const void* wp, const void* ap, size_t stride, int64_t n, float* out) {
  const auto* w = static_cast<const quant::BlockQ6_K*>(wp);
  const quant::BlockQ8_K* a[NB];
  ActRows(ap, stride, a);
  float acc[NB];
  for (int b = 0; b < NB; ++b) acc[b] = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    PrefetchAhead(w + i, sizeof(quant::BlockQ6_K));
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    // Scales 0-7 and 8-15 as int16, each set in both lanes.
    const __m256i sc_half[2] = {
        _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(sc8)),
        _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(sc8, 8)))};
    __m256i isum[NB];
    for (int b = 0; b < NB; ++b) isum[b] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      __m256i u[4];
      Q6KQuants(w[i].ql + 64 * h, w[i].qh + 32 * h, u);
#pragma GCC unroll 8
      for (int r = 0; r < 4; ++r) {
        // Low lane (elements 0-15): scale 2r of this half; high lane: 2r + 1.
        const __m256i scales = _mm256_shuffle_epi8(
            sc_half[h], _mm256_set_m128i(Int16Picker(2 * r + 1), Int16Picker(2 * r)));
#pragma GCC unroll 4
        for (int b = 0; b < NB; ++b) {
          const __m256i pairs = PairsU8(u[r], Load32(a[b][i].qs + 128 * h + 32 * r));
          isum[b] = _mm256_add_epi32(isum[b], _mm256_madd_epi16(pairs, scales));
        }
      }
    }
    const float dw = HalfToFloat(w[i].d);
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      // Quants are stored as u = q + 32; the 32·Σa part comes from the activation's bsums.
      const __m256i offsets = _mm256_madd_epi16(Load32(a[b][i].bsums), sc16);
      isum[b] = _mm256_sub_epi32(isum[b], _mm256_slli_epi32(offsets, 5));
      acc[b] = std::fma(dw * a[b][i].d, static_cast<float>(HorizontalSumI32(isum[b])), acc[b]);
    }
  }
  for (int b = 0; b < NB; ++b) out[b] = acc[b];
}

__m256i DotU8(__m256i u, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
}

// Q4_1 / Q5_1: Σ (d·u + m)·(da·a) = d·da·Σu·a + m·da·Σa.
template <bool kFifthBit, typename Block>
float DotOffsetType(const void* wp, const void* ap, int64_t n) {
  const auto* w = static_cast<const Block*>(wp);
  const auto* a = static_cast<const quant::BlockQ8_0*>(ap);
  const __m256i ones = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    PrefetchAhead(w + i, sizeof(Block));
    const float da = HalfToFloat(a[i].d);
    __m256i u = Nibbles32(w[i].qs);
    if constexpr (kFifthBit) u = _mm256_or_si256(u, FifthBits32(LoadU32(w[i].qh)));
    const __m256i av = Load32(a[i].qs);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(HalfToFloat(w[i].d) * da),
                          _mm256_cvtepi32_ps(DotU8(u, av)), acc);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(HalfToFloat(w[i].m) * da),
                          _mm256_cvtepi32_ps(DotU8(ones, av)), acc);
  }
  return HorizontalSum(acc);
}

float DotQ4_1(const void* w, const void* a, int64_t n) {
  return DotOffsetType<false, quant::BlockQ4_1>(w, a, n);
}
float DotQ5_1(const void* w, const void* a, int64_t n) {
  return DotOffsetType<true, quant::BlockQ5_1>(w, a, n);
}

float DotIQ4_XS(const void* wp, const void* ap, int64_t n) {
  const auto* w = static_cast<const quant::BlockIQ4_XS*>(wp);
  const auto* a = static_cast<const quant::BlockQ8_K*>(ap);
  const __m256i table = Iq4Table(quant::kIq4nlValues);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    PrefetchAhead(w + i, sizeof(quant::BlockIQ4_XS));
    __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int b = 0; b < 8; ++b) {
      const int ls =
          ((w[i].scales_l[b / 2] >> (4 * (b % 2))) & 0xF) | (((w[i].scales_h >> (2 * b)) & 3) << 4);
      const __m256i v = _mm256_shuffle_epi8(table, Nibbles32(w[i].qs + 16 * b));
      const __m256i av = Load32(a[i].qs + 32 * b);
      const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(av, v));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(ls - 32)));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(HalfToFloat(w[i].d) * a[i].d), _mm256_cvtepi32_ps(isum),
                          acc);
  }
  return HorizontalSum(acc);
}

// Q2_K / Q3_K share Q6_K's layout of 16-element sub-blocks: for half h and 32-byte group j,
// the low lane of the quant vector is sub-block 8h + 2j and the high lane 8h + 2j + 1.
// `sc8` holds the 16 sub-block scales (int8); this sums Σ_s sc_s·Σ(u·a) over the block.
template <typename QuantsOf>
__m256i SumScaledGroups(__m128i sc8, bool is_signed, const int8_t* aq, QuantsOf quants) {
  const __m128i lo8 = is_signed ? _mm_cvtepi8_epi16(sc8) : _mm_cvtepu8_epi16(sc8);
  const __m128i hi8 = is_signed ? _mm_cvtepi8_epi16(_mm_srli_si128(sc8, 8))
                                : _mm_cvtepu8_epi16(_mm_srli_si128(sc8, 8));
  const __m256i sc_half[2] = {_mm256_broadcastsi128_si256(lo8), _mm256_broadcastsi128_si256(hi8)};
  __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 8
    for (int j = 0; j < 4; ++j) {
      const __m256i pairs = PairsU8(quants(h, j), Load32(aq + 128 * h + 32 * j));
      const __m256i scales = _mm256_shuffle_epi8(
          sc_half[h], _mm256_set_m128i(Int16Picker(2 * j + 1), Int16Picker(2 * j)));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pairs, scales));
    }
  }
  return isum;
}

float DotQ2_K(const void* wp, const void* ap, int64_t n) {
  const auto* w = static_cast<const quant::BlockQ2_K*>(wp);
  const auto* a = static_cast<const quant::BlockQ8_K*>(ap);
  const __m128i low4 = _mm_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    PrefetchAhead(w + i, sizeof(quant::BlockQ2_K));
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales));
    const __m128i sc8 = _mm_and_si128(packed, low4);
    const __m128i m8 = _mm_and_si128(_mm_srli_epi16(packed, 4), low4);
    const __m256i min_sums = _mm256_madd_epi16(Load32(a[i].bsums), _mm256_cvtepu8_epi16(m8));
    const uint8_t* qs = w[i].qs;
    const __m256i isum = SumScaledGroups(
        sc8, false, a[i].qs, [&](int h, int j) { return TwoBits32(qs + 32 * h, 2 * j); });
    const __m256 da = _mm256_set1_ps(a[i].d);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(HalfToFloat(w[i].d)), da),
                          _mm256_cvtepi32_ps(isum), acc);
    acc = _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_set1_ps(HalfToFloat(w[i].dmin)), da),
                           _mm256_cvtepi32_ps(min_sums), acc);
  }
  return HorizontalSum(acc);
}

float DotQ3_K(const void* wp, const void* ap, int64_t n) {
  const auto* w = static_cast<const quant::BlockQ3_K*>(wp);
  const auto* a = static_cast<const quant::BlockQ8_K*>(ap);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    PrefetchAhead(w + i, sizeof(quant::BlockQ3_K));
    uint64_t lo, hi;
    quant::UnpackBiasedScalesQ3K(w[i].scales, &lo, &hi);
    const __m128i sc8 = _mm_sub_epi8(
        _mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo)), _mm_set1_epi8(32));
    // Quants are used as u = q + 4 in [0, 7]; the 4·Σa part comes from the bsums.
    const __m256i offsets = _mm256_madd_epi16(Load32(a[i].bsums), _mm256_cvtepi8_epi16(sc8));
    const __m256i hmask = Load32(w[i].hmask);
    const uint8_t* qs = w[i].qs;
    __m256i isum = SumScaledGroups(sc8, true, a[i].qs, [&](int h, int j) {
      return _mm256_or_si256(TwoBits32(qs + 32 * h, 2 * j),
                             _mm256_slli_epi16(BitOfBytes(hmask, 4 * h + j), 2));
    });
    isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(offsets, 2));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(HalfToFloat(w[i].d) * a[i].d), _mm256_cvtepi32_ps(isum),
                          acc);
  }
  return HorizontalSum(acc);
}

// The types without a multi-vector kernel: one vector after the other.
template <float (*kDot)(const void*, const void*, int64_t)>
void OneVector(const void* w, const void* a, size_t stride, int nb, int64_t n, float* out) {
  for (int b = 0; b < nb; ++b) out[b] = kDot(w, static_cast<const uint8_t*>(a) + b * stride, n);
}

#define TESSERA_DOT_FAMILY(NAME)                                                                \
  float NAME##One(const void* w, const void* a, int64_t n) {                                    \
    float r;                                                                                    \
    NAME<1>(w, a, 0, n, &r);                                                                    \
    return r;                                                                                   \
  }                                                                                             \
  void NAME##Many(const void* w, const void* a, size_t stride, int nb, int64_t n, float* out) { \
    switch (nb) {                                                                               \
      case 1:                                                                                   \
        return NAME<1>(w, a, stride, n, out);                                                   \
      case 2:                                                                                   \
        return NAME<2>(w, a, stride, n, out);                                                   \
      case 3:                                                                                   \
        return NAME<3>(w, a, stride, n, out);                                                   \
      default:                                                                                  \
        return NAME<4>(w, a, stride, n, out);                                                   \
    }                                                                                           \
  }

TESSERA_DOT_FAMILY(DotQ8_0)
TESSERA_DOT_FAMILY(DotQ4_0)
TESSERA_DOT_FAMILY(DotQ5_0)
TESSERA_DOT_FAMILY(DotIQ4_NL)
TESSERA_DOT_FAMILY(DotQ4_K)
TESSERA_DOT_FAMILY(DotQ5_K)
TESSERA_DOT_FAMILY(DotQ6_K)
#undef TESSERA_DOT_FAMILY

struct DotKernels {
  gguf::GgmlType type;
  VecDotFn one;
  VecDotManyFn many;
};

constexpr DotKernels kDotKernels[] = {
    {gguf::GgmlType::kQ4_0, DotQ4_0One, DotQ4_0Many},
    {gguf::GgmlType::kQ8_0, DotQ8_0One, DotQ8_0Many},
    {gguf::GgmlType::kQ4_K, DotQ4_KOne, DotQ4_KMany},
    {gguf::GgmlType::kQ6_K, DotQ6_KOne, DotQ6_KMany},
    {gguf::GgmlType::kQ4_1, DotQ4_1, OneVector<DotQ4_1>},
    {gguf::GgmlType::kQ5_0, DotQ5_0One, DotQ5_0Many},
    {gguf::GgmlType::kQ5_1, DotQ5_1, OneVector<DotQ5_1>},
    {gguf::GgmlType::kIQ4_NL, DotIQ4_NLOne, DotIQ4_NLMany},
    {gguf::GgmlType::kQ2_K, DotQ2_K, OneVector<DotQ2_K>},
    {gguf::GgmlType::kQ3_K, DotQ3_K, OneVector<DotQ3_K>},
    {gguf::GgmlType::kQ5_K, DotQ5_KOne, DotQ5_KMany},
    {gguf::GgmlType::kIQ4_XS, DotIQ4_XS, OneVector<DotIQ4_XS>},
};

const DotKernels* FindDotKernels(gguf::GgmlType type) {
  for (const DotKernels& k : kDotKernels) {
    if (k.type == type) return &k;
  }
  return nullptr;
}

}  // namespace

VecDotFn IntegerDot(gguf::GgmlType type) {
  const DotKernels* k = FindDotKernels(type);
  return k == nullptr ? nullptr : k->one;
}

VecDotManyFn IntegerDots(gguf::GgmlType type) {
  const DotKernels* k = FindDotKernels(type);
  return k == nullptr ? nullptr : k->many;
}

}  // namespace tessera::cpu::avx2
