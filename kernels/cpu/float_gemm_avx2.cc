// AVX2 float32 GEMM in dot-product form: y[b][r] = Σ_k w[r][k]·x[b][k]. Register blocks of
// 2 rows × 4 vectors (8 accumulators) reuse each load twice or four times.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/kernels_avx2.h"

namespace tessera::cpu::avx2 {
namespace {

float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <int R, int B>
void Block(const float* w, int64_t ldw, const float* x, int64_t ldx, int64_t n, float* y,
           int64_t ldy) {
  __m256 acc[R][B];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < B; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256 xv[B];
#pragma GCC unroll 8
    for (int j = 0; j < B; ++j) xv[j] = _mm256_loadu_ps(x + j * ldx + k);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m256 wv = _mm256_loadu_ps(w + i * ldw + k);
#pragma GCC unroll 8
      for (int j = 0; j < B; ++j) acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < B; ++j) {
      float s = HorizontalSum(acc[i][j]);
      for (int64_t t = k; t < n; ++t) s += w[i * ldw + t] * x[j * ldx + t];
      y[j * ldy + i] = s;
    }
  }
}

// Outer-product tile for prefill: R weight rows × 8·NB vectors, x transposed.
template <int R, int NB>
void TransposedTile(const float* w, int64_t ldw, const float* xt, int64_t ldxt, int64_t batch,
                    int64_t n, float* y, int64_t ldy) {
  __m256 acc[R][NB];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < n; ++k) {
    __m256 xv[NB];
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) xv[j] = _mm256_loadu_ps(xt + k * ldxt + 8 * j);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m256 wv = _mm256_broadcast_ss(w + i * ldw + k);
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
    }
  }
  alignas(32) float lanes[8 * NB];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) _mm256_store_ps(lanes + 8 * j, acc[i][j]);
    for (int64_t b = 0; b < batch; ++b) y[b * ldy + i] = lanes[b];
  }
}

template <int NB>
void TransposedRows(const float* w, int64_t ldw, int64_t rows, const float* xt, int64_t ldxt,
                    int64_t batch, int64_t n, float* y, int64_t ldy) {
  int64_t r = 0;
  for (; r + 6 <= rows; r += 6) {
    TransposedTile<6, NB>(w + r * ldw, ldw, xt, ldxt, batch, n, y + r, ldy);
  }
  for (; r < rows; ++r) TransposedTile<1, NB>(w + r * ldw, ldw, xt, ldxt, batch, n, y + r, ldy);
}

}  // namespace

void FloatGemmTransposedX(const float* w, int64_t ldw, int64_t rows, const float* xt, int64_t ldxt,
                          int64_t batch, int64_t n, float* y, int64_t ldy) {
  for (int64_t b = 0; b < batch; b += 16) {
    const int64_t nb = batch - b < 16 ? batch - b : 16;
    if (nb > 8) {
      TransposedRows<2>(w, ldw, rows, xt + b, ldxt, nb, n, y + b * ldy, ldy);
    } else {
      TransposedRows<1>(w, ldw, rows, xt + b, ldxt, nb, n, y + b * ldy, ldy);
    }
  }
}

void FloatGemm(const float* w, int64_t ldw, int64_t rows, const float* x, int64_t ldx,
               int64_t batch, int64_t n, float* y, int64_t ldy) {
  int64_t b = 0;
  for (; b + 4 <= batch; b += 4) {
    int64_t r = 0;
    for (; r + 2 <= rows; r += 2) {
      Block<2, 4>(w + r * ldw, ldw, x + b * ldx, ldx, n, y + b * ldy + r, ldy);
    }
    for (; r < rows; ++r) Block<1, 4>(w + r * ldw, ldw, x + b * ldx, ldx, n, y + b * ldy + r, ldy);
  }
  for (; b < batch; ++b) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      Block<4, 1>(w + r * ldw, ldw, x + b * ldx, ldx, n, y + b * ldy + r, ldy);
    }
    for (; r < rows; ++r) Block<1, 1>(w + r * ldw, ldw, x + b * ldx, ldx, n, y + b * ldy + r, ldy);
  }
}

}  // namespace tessera::cpu::avx2
