// AVX-512 float32 GEMM for prefill, outer-product form: x is given transposed (xt[k][b],
// batch contiguous), and a register tile of 6 weight rows × up to 64 vectors (24 zmm
// accumulators) is updated per k by broadcasting one weight and loading 16 batch lanes.
// Each loaded x vector feeds 6 FMAs, so the loop is FMA-bound rather than load-bound.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/kernels_avx512.h"

namespace tessera::cpu::avx512 {
namespace {

template <int R, int NB>
void Tile(const float* w, int64_t ldw, const float* xt, int64_t ldxt, int64_t batch, int64_t n,
          float* y, int64_t ldy) {
  __m512 acc[R][NB];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < n; ++k) {
    __m512 xv[NB];
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) xv[j] = _mm512_loadu_ps(xt + k * ldxt + 16 * j);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m512 wv = _mm512_set1_ps(w[i * ldw + k]);
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_fmadd_ps(wv, xv[j], acc[i][j]);
    }
  }
  alignas(64) float lanes[16 * NB];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) _mm512_store_ps(lanes + 16 * j, acc[i][j]);
    for (int64_t b = 0; b < batch; ++b) y[b * ldy + i] = lanes[b];
  }
}

template <int NB>
void Rows(const float* w, int64_t ldw, int64_t rows, const float* xt, int64_t ldxt, int64_t batch,
          int64_t n, float* y, int64_t ldy) {
  int64_t r = 0;
  for (; r + 6 <= rows; r += 6) Tile<6, NB>(w + r * ldw, ldw, xt, ldxt, batch, n, y + r, ldy);
  switch (rows - r) {
    case 5:
      Tile<5, NB>(w + r * ldw, ldw, xt, ldxt, batch, n, y + r, ldy);
      break;
    case 4:
      Tile<4, NB>(w + r * ldw, ldw, xt, ldxt, batch, n, y + r, ldy);
      break;
    case 3:
      Tile<3, NB>(w + r * ldw, ldw, xt, ldxt, batch, n, y + r, ldy);
      break;
    case 2:
      Tile<2, NB>(w + r * ldw, ldw, xt, ldxt, batch, n, y + r, ldy);
      break;
    case 1:
      Tile<1, NB>(w + r * ldw, ldw, xt, ldxt, batch, n, y + r, ldy);
      break;
    default:
      break;
  }
}

}  // namespace

void FloatGemmTransposedX(const float* w, int64_t ldw, int64_t rows, const float* xt, int64_t ldxt,
                          int64_t batch, int64_t n, float* y, int64_t ldy) {
  for (int64_t b = 0; b < batch; b += 64) {
    const int64_t nb = batch - b < 64 ? batch - b : 64;
    const float* xtb = xt + b;
    float* yb = y + b * ldy;
    switch ((nb + 15) / 16) {
      case 1:
        Rows<1>(w, ldw, rows, xtb, ldxt, nb, n, yb, ldy);
        break;
      case 2:
        Rows<2>(w, ldw, rows, xtb, ldxt, nb, n, yb, ldy);
        break;
      case 3:
        Rows<3>(w, ldw, rows, xtb, ldxt, nb, n, yb, ldy);
        break;
      default:
        Rows<4>(w, ldw, rows, xtb, ldxt, nb, n, yb, ldy);
        break;
    }
  }
}

}  // namespace tessera::cpu::avx512
