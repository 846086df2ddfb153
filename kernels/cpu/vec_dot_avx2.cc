// AVX2 integer dot products of a weight row with an activation row quantized to Q8_0 or
// Q8_K. Within a block everything is exact int8×int8→int16→int32 arithmetic; each block's
// integer sum is then scaled in float and accumulated with FMA. So the result differs from
// the exact product of the dequantized operands only by float32 accumulation rounding.
#include <immintrin.h>

#include <cstdint>

#include "common/quant/blocks.h"
#include "kernels/cpu/kernels_avx2.h"

namespace tessera::cpu::avx2 {
namespace {

using quant::kQK;
using quant::kQKK;

float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

int HorizontalSumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// 8 int32 partial sums of Σ w·a over 32 signed bytes each (|w|, |a| ≤ 127 fits maddubs).
__m256i DotI8(__m256i w, __m256i a) {
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

__m256i Load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 16 packed bytes -> 32 nibbles in element order (low nibbles first, then high).
__m256i Nibbles32(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), mask), _mm_and_si128(raw, mask));
}

float DotQ8_0(const void* wp, const void* ap, int64_t n) {
  const auto* w = static_cast<const quant::BlockQ8_0*>(wp);
  const auto* a = static_cast<const quant::BlockQ8_0*>(ap);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256 d = _mm256_set1_ps(HalfToFloat(w[i].d) * HalfToFloat(a[i].d));
    const __m256i s = DotI8(Load32(w[i].qs), Load32(a[i].qs));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
  }
  return HorizontalSum(acc);
}

float DotQ4_0(const void* wp, const void* ap, int64_t n) {
  const auto* w = static_cast<const quant::BlockQ4_0*>(wp);
  const auto* a = static_cast<const quant::BlockQ8_0*>(ap);
  const __m256i eight = _mm256_set1_epi8(8);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256 d = _mm256_set1_ps(HalfToFloat(w[i].d) * HalfToFloat(a[i].d));
    const __m256i q = _mm256_sub_epi8(Nibbles32(w[i].qs), eight);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(DotI8(q, Load32(a[i].qs))), acc);
  }
  return HorizontalSum(acc);
}

// Σ over 32 bytes of u·a, u unsigned ≤ 63, as 16 int16 pair sums (no overflow: 2·63·127).
__m256i PairsU8(__m256i u, __m256i a) { return _mm256_maddubs_epi16(u, a); }

float DotQ4_K(const void* wp, const void* ap, int64_t n) {
  const auto* w = static_cast<const quant::BlockQ4_K*>(wp);
  const auto* a = static_cast<const quant::BlockQ8_K*>(ap);
  const __m256i mask = _mm256_set1_epi8(0x0F);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) quant::UnpackScaleMinK4(j, w[i].scales, &sc[j], &m[j]);
    int min_sum = 0;
    for (int j = 0; j < 8; ++j) min_sum += m[j] * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
    __m256i isum = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      const __m256i raw = Load32(w[i].qs + 32 * p);
      const __m256i lo = _mm256_and_si256(raw, mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
      const __m256i plo = PairsU8(lo, Load32(a[i].qs + 64 * p));
      const __m256i phi = PairsU8(hi, Load32(a[i].qs + 64 * p + 32));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(plo, _mm256_set1_epi16(sc[2 * p])));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(phi, _mm256_set1_epi16(sc[2 * p + 1])));
    }
    const float d = HalfToFloat(w[i].d) * a[i].d;
    const float dmin = HalfToFloat(w[i].dmin) * a[i].d;
    sum += d * static_cast<float>(HorizontalSumI32(isum)) - dmin * static_cast<float>(min_sum);
  }
  return sum;
}

float DotQ6_K(const void* wp, const void* ap, int64_t n) {
  const auto* w = static_cast<const quant::BlockQ6_K*>(wp);
  const auto* a = static_cast<const quant::BlockQ8_K*>(ap);
  const __m256i mask4 = _mm256_set1_epi8(0x0F);
  const __m256i mask2 = _mm256_set1_epi8(0x03);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    // Quants are stored as u = q + 32; the 32·Σa part comes from the activation's bsums.
    int offset_sum = 0;
    for (int s = 0; s < 16; ++s) offset_sum += w[i].scales[s] * a[i].bsums[s];
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[i].ql + 64 * h;
      const int8_t* sc = w[i].scales + 8 * h;
      const int8_t* aq = a[i].qs + 128 * h;
      const __m256i qa = Load32(ql);
      const __m256i qb = Load32(ql + 32);
      const __m256i c = Load32(w[i].qh + 32 * h);
      const __m256i low[4] = {_mm256_and_si256(qa, mask4), _mm256_and_si256(qb, mask4),
                              _mm256_and_si256(_mm256_srli_epi16(qa, 4), mask4),
                              _mm256_and_si256(_mm256_srli_epi16(qb, 4), mask4)};
      for (int r = 0; r < 4; ++r) {
        const __m256i top = _mm256_and_si256(_mm256_srl_epi16(c, _mm_cvtsi32_si128(2 * r)), mask2);
        const __m256i u = _mm256_or_si256(low[r], _mm256_slli_epi16(top, 4));
        const __m256i pairs = PairsU8(u, Load32(aq + 32 * r));
        const __m256i scales =
            _mm256_set_m128i(_mm_set1_epi16(sc[2 * r + 1]), _mm_set1_epi16(sc[2 * r]));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pairs, scales));
      }
    }
    const float d = HalfToFloat(w[i].d) * a[i].d;
    sum += d * static_cast<float>(HorizontalSumI32(isum) - 32 * offset_sum);
  }
  return sum;
}

}  // namespace

VecDotFn IntegerDot(gguf::GgmlType type) {
  using gguf::GgmlType;
  switch (type) {
    case GgmlType::kQ4_0:
      return DotQ4_0;
    case GgmlType::kQ8_0:
      return DotQ8_0;
    case GgmlType::kQ4_K:
      return DotQ4_K;
    case GgmlType::kQ6_K:
      return DotQ6_K;
    default:
      return nullptr;
  }
}

}  // namespace tessera::cpu::avx2
