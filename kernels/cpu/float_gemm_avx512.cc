// AVX-512 float32 GEMMs. For prefill, outer-product form: x is given transposed (xt[k][b],
// batch contiguous), and a register tile of 6 weight rows × up to 64 vectors (24 zmm
// accumulators) is updated per k by broadcasting one weight and loading 16 batch lanes.
// Each loaded x vector feeds 6 FMAs, so the loop is FMA-bound rather than load-bound. The
// panel form does the same with x as it is. For decode rows, dot-product form (per-vector
// bits, any batch).
// GCC 12 takes the undefined pass-through operands of the extracts inside
// _mm512_reduce_add_ps for uninitialized variables once inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
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

// ---- Dot-product form: the per-vector kernel ----------------------------------------------

namespace tessera::cpu::avx512 {
namespace {

template <int R, int B>
void DotBlock(const float* w, int64_t ldw, const float* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy) {
  __m512 acc[R][B];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < B; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    __m512 xv[B];
#pragma GCC unroll 8
    for (int j = 0; j < B; ++j) xv[j] = _mm512_loadu_ps(x + j * ldx + k);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m512 wv = _mm512_loadu_ps(w + i * ldw + k);
#pragma GCC unroll 8
      for (int j = 0; j < B; ++j) acc[i][j] = _mm512_fmadd_ps(wv, xv[j], acc[i][j]);
    }
  }
  if (k < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - k)) - 1);
    __m512 xv[B];
#pragma GCC unroll 8
    for (int j = 0; j < B; ++j) xv[j] = _mm512_maskz_loadu_ps(m, x + j * ldx + k);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m512 wv = _mm512_maskz_loadu_ps(m, w + i * ldw + k);
#pragma GCC unroll 8
      for (int j = 0; j < B; ++j) acc[i][j] = _mm512_fmadd_ps(wv, xv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < B; ++j) y[j * ldy + i] = _mm512_reduce_add_ps(acc[i][j]);
  }
}

template <int B>
void DotRows(const float* w, int64_t ldw, int64_t rows, const float* x, int64_t ldx, int64_t n,
             float* y, int64_t ldy) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) DotBlock<4, B>(w + r * ldw, ldw, x, ldx, n, y + r, ldy);
  for (; r < rows; ++r) DotBlock<1, B>(w + r * ldw, ldw, x, ldx, n, y + r, ldy);
}

}  // namespace

void FloatGemmDots(const float* w, int64_t ldw, int64_t rows, const float* x, int64_t ldx,
                   int64_t batch, int64_t n, float* y, int64_t ldy) {
  using RowsFn =
      void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t);
  // By vectors in the block: 6 while they last, then the rest in one block.
  constexpr RowsFn kRows[] = {nullptr,    DotRows<1>, DotRows<2>, DotRows<3>,
                              DotRows<4>, DotRows<5>, DotRows<6>};
  for (int64_t b = 0; b < batch; b += 6) {
    const int64_t nb = std::min<int64_t>(6, batch - b);
    kRows[nb](w, ldw, rows, x + b * ldx, ldx, n, y + b * ldy, ldy);
  }
}

}  // namespace tessera::cpu::avx512

// ---- Panel form: weight rows in lanes, tokens broadcast (no transpose of x) ----------------

namespace tessera::cpu::avx512 {
namespace {

// panels: RT panels of 16 rows, k-major (element [16·k + lane]); y rows in lane order.
template <int RT, int CT>
void PanelTile(const float* panels, int64_t n, const __mmask16* mask, const float* x, int64_t ldx,
               float* y, int64_t ldy) {
  __m512 acc[RT][CT];
#pragma GCC unroll 16
  for (int r = 0; r < RT; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < CT; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < n; ++k) {
    __m512 w[RT];
#pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) w[r] = _mm512_loadu_ps(panels + (r * n + k) * 16);
#pragma GCC unroll 16
    for (int c = 0; c < CT; ++c) {
      const __m512 xv = _mm512_set1_ps(x[c * ldx + k]);
#pragma GCC unroll 16
      for (int r = 0; r < RT; ++r) acc[r][c] = _mm512_fmadd_ps(w[r], xv, acc[r][c]);
    }
  }
#pragma GCC unroll 16
  for (int c = 0; c < CT; ++c) {
#pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) _mm512_mask_storeu_ps(y + c * ldy + 16 * r, mask[r], acc[r][c]);
  }
}

template <int RT>
void PanelTokens(const float* panels, int64_t n, int rows, const float* x, int64_t ldx,
                 int64_t batch, float* y, int64_t ldy) {
  constexpr int kCt = RT == 1 ? 24 : 12;
  __mmask16 mask[RT];
  for (int r = 0; r < RT; ++r) {
    const int valid = rows - 16 * r;
    mask[r] = valid >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << valid) - 1);
  }
  int64_t b = 0;
  for (; b + kCt <= batch; b += kCt) {
    PanelTile<RT, kCt>(panels, n, mask, x + b * ldx, ldx, y + b * ldy, ldy);
  }
  for (; b + 4 <= batch; b += 4) {
    PanelTile<RT, 4>(panels, n, mask, x + b * ldx, ldx, y + b * ldy, ldy);
  }
  for (; b < batch; ++b) PanelTile<RT, 1>(panels, n, mask, x + b * ldx, ldx, y + b * ldy, ldy);
}

}  // namespace

void FloatGemmPanels(const float* w, int64_t ldw, int rows, const float* x, int64_t ldx,
                     int64_t batch, int64_t n, float* y, int64_t ldy, float* scratch) {
  const int n_panels = (rows + 15) / 16;
  for (int p = 0; p < n_panels; ++p) {
    float* panel = scratch + p * n * 16;
    for (int lane = 0; lane < 16; ++lane) {
      const int r = 16 * p + lane;
      if (r < rows) {
        for (int64_t k = 0; k < n; ++k) panel[16 * k + lane] = w[r * ldw + k];
      } else {
        for (int64_t k = 0; k < n; ++k) panel[16 * k + lane] = 0.0f;
      }
    }
  }
  if (n_panels == 2) {
    PanelTokens<2>(scratch, n, rows, x, ldx, batch, y, ldy);
  } else {
    PanelTokens<1>(scratch, n, rows, x, ldx, batch, y, ldy);
  }
}

}  // namespace tessera::cpu::avx512
