// AVX-512 forms of the nn_ops.h operations whose scalar loops showed in prefill profiles:
// softmax over every query's visible keys, the FFN's SiLU, RMS norms.
// GCC 12 takes the undefined pass-through operands inside _mm512_reduce_* for
// uninitialized variables.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/kernels_avx512.h"

namespace tessera::cpu::avx512 {
namespace {

// e^x: Cephes expf's range reduction (ln 2 in two parts) and degree-6 polynomial, within
// 2 ulp of the exact value; scalef applies 2^n, underflowing to denormals and 0 as expf
// does (−inf gives 0). Arguments above 88.7 give 3.3e38 rather than infinity.
__m512 Exp(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));  // e^-104 rounds to 0 in float
  x = _mm512_min_ps(x, _mm512_set1_ps(88.7f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

__mmask16 TailMask(int64_t left) {
  return left >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << left) - 1);
}

}  // namespace

void Softmax(float* x, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 m = neg_inf;
  for (int64_t i = 0; i < n; i += 16) {
    m = _mm512_max_ps(m, _mm512_mask_loadu_ps(neg_inf, TailMask(n - i), x + i));
  }
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(m));
  // Sum in double, as the scalar form does: n reaches thousands of keys.
  __m512d sum_lo = _mm512_setzero_pd(), sum_hi = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask(n - i);
    const __m512 e =
        _mm512_maskz_mov_ps(mask, Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + i), max)));
    _mm512_mask_storeu_ps(x + i, mask, e);
    sum_lo = _mm512_add_pd(sum_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    sum_hi = _mm512_add_pd(
        sum_hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  const __m512 inv =
      _mm512_set1_ps(static_cast<float>(1.0 / _mm512_reduce_add_pd(_mm512_add_pd(sum_lo, sum_hi))));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask(n - i);
    _mm512_mask_storeu_ps(x + i, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, x + i), inv));
  }
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(mask, gate + i);
    const __m512 e = Exp(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, mask, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(mask, up + i)));
  }
}

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y) {
  __m512d sum_lo = _mm512_setzero_pd(), sum_hi = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(TailMask(n - i), x + i);
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d hi =
        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    sum_lo = _mm512_fmadd_pd(lo, lo, sum_lo);
    sum_hi = _mm512_fmadd_pd(hi, hi, sum_hi);
  }
  const double sum = _mm512_reduce_add_pd(_mm512_add_pd(sum_lo, sum_hi));
  const __m512 scale =
      _mm512_set1_ps(static_cast<float>(1.0 / __builtin_sqrt(sum / static_cast<double>(n) + eps)));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask(n - i);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, x + i), scale);
    if (w != nullptr) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(mask, w + i));
    _mm512_mask_storeu_ps(y + i, mask, v);
  }
}

int64_t FloatsToFp16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // Round to nearest even, as FloatToFp16 (also for halves' subnormals; NaNs keep their
    // top payload bits and become quiet).
    const __m256i h =
        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), h);
  }
  return i;
}

int64_t FloatsToBf16(const float* x, int64_t n, uint16_t* out) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i b = _mm512_loadu_si512(x + i);
    // FloatToBf16: NaN → top half | 0x40; else (b + 0x7fff + lsb of the top half) >> 16.
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, abs_mask), inf);
    const __m512i top = _mm512_srli_epi32(b, 16);
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(b, _mm512_add_epi32(bias, _mm512_and_si512(top, one))), 16);
    const __m512i r = _mm512_mask_or_epi32(rounded, nan, top, quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(r));
  }
  return i;
}

int64_t Fp16sToFloats(const uint16_t* h, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i,
                     _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
  }
  return i;
}

int64_t Bf16sToFloats(const uint16_t* h, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i w =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)));
    _mm512_storeu_si512(out + i, _mm512_slli_epi32(w, 16));
  }
  return i;
}

}  // namespace tessera::cpu::avx512
