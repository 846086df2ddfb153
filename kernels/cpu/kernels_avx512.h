// Kernels compiled with AVX-512 F/BW/VL/VNNI (files *_avx512.cc). Call them only when
// IsaSupported(Isa::kAvx512). Same file rules as kernels_avx2.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/int8_gemm_format.h"
#include "kernels/cpu/paged_attention_args.h"

namespace tessera::cpu::avx512 {

// y[b * ldy + r] = dot(w[r], x[b]) for float rows in dot-product form (w: rows × n, row
// stride ldw; x: batch × n, stride ldx): each (row, vector) accumulates 16 lanes (lane =
// k mod 16) over k in order, with a masked last step, then sums the lanes in a fixed tree,
// so its bits depend on the row and the vector alone, never on the batch or the blocking
// (register blocks of up to 4 rows × 6 vectors). The per-vector float kernel of AVX-512
// hosts: decode rows, and every product of float weights under batch invariance but a
// prompt's.
void FloatGemmDots(const float* w, int64_t ldw, int64_t rows, const float* x, int64_t ldx,
                   int64_t batch, int64_t n, float* y, int64_t ldy);

// y[b * ldy + r] = Σ_k w[r * ldw + k] · xt[k * ldxt + b] for r < rows, b < batch. `xt` is x
// transposed with ldxt ≥ batch rounded up to 16; lanes past `batch` must be readable (their
// results are discarded).
void FloatGemmTransposedX(const float* w, int64_t ldw, int64_t rows, const float* xt, int64_t ldxt,
                          int64_t batch, int64_t n, float* y, int64_t ldy);

// y[b * ldy + r] = Σ_k w[r * ldw + k] · x[b * ldx + k] for r < rows (1..32), b < batch, with
// x as it is (not transposed): the rows are packed into 16-row panels in `scratch` (32·n
// floats), one row per lane, and each x element is broadcast against a panel.
void FloatGemmPanels(const float* w, int64_t ldw, int rows, const float* x, int64_t ldx,
                     int64_t batch, int64_t n, float* y, int64_t ldy, float* scratch);

// y[b·ldy + r] = Σ_k W[r][k]·x[b][k] for r < rows (1..32) and b < a.batch, W given as the
// (rows + 15)/16 panels of `panels` (int8_gemm.h). False when `layout` is not one the kernel
// was built for (y untouched).
bool Int8Gemm(const Int8GemmLayout& layout, const Int8Panel* panels, int rows,
              const Int8Activations& a, float* y, int64_t ldy);

// The integer dots of a weight row of `type` with Q8_K activation rows, `n` elements, with
// the bits of avx2::IntegerDot for every (row, vector): each block's integer sums are formed
// exactly in int32 and accumulated with the same float operations in the same order. Two
// forms: VNNI dots (q4_K, q5_K and q6_K; vpdpbusd on the unpacked quants, vpdpwssd for the
// sub-block scales), each block unpacked once for every vector; and q6_K's one-vector dot
// with two blocks per register, one per 256-bit half.
//
// One weight row, one activation row; nullptr for types without one (q4_K: VNNI, q6_K: two
// blocks per register, as fast as its VNNI form for one vector on Zen 4).
using OneDotFn = float (*)(const void* w, const void* a, int64_t n);
OneDotFn IntegerDot(gguf::GgmlType type);
// Two weight rows against one activation row: out[0], out[1]. q4_K only (the two rows'
// block sums share one reduction; rows of an odd number of blocks).
using TwoRowDotFn = void (*)(const void* w0, const void* w1, const void* a, int64_t n,
                             float out[2]);
TwoRowDotFn IntegerDot2(gguf::GgmlType type);
// One weight row against `nb` activation rows (1 ≤ nb ≤ kMaxDotVectors, row b at
// a + b·stride bytes): out[b]. q4_K, q5_K and q6_K (VNNI): decode steps of several rows
// (concurrent decodes, or one with speculative drafts to verify), and q5_K's single rows.
inline constexpr int kMaxDotVectors = 8;
using ManyDotFn = void (*)(const void* w, const void* a, size_t stride, int nb, int64_t n,
                           float* out);
ManyDotFn IntegerDots(gguf::GgmlType type);

// The 16 rows of a decode panel (decode_panels.h), `n` elements each, against `nb` Q8_K
// activation rows (1 ≤ nb ≤ kMaxDotVectors, row b at a + b·stride bytes): out[b·ldo + r]
// for r < 16, each with the bits avx2::IntegerDot gives the row and the vector alone.
// nullptr for types without panels.
using PanelDotsFn = void (*)(const uint8_t* panel, int64_t n, const void* a, size_t stride, int nb,
                             float* out, int64_t ldo);
PanelDotsFn DecodePanelDots(gguf::GgmlType type);

// Writes the unsigned quants of one weight row (`cols` elements of a row of `type` blocks)
// as plain bytes to dst[0, cols). nullptr for types without one.
using RowQuantsFn = void (*)(const uint8_t* row, int64_t cols, uint8_t* dst);
RowQuantsFn RowQuants(gguf::GgmlType type);

// Interleaves 16 rows of quants (rows[r·cols + k], cols a multiple of 32) into an int8
// panel's quant chunks (int8_gemm_format.h) by 16×16 word transposes.
void InterleavePanel(const uint8_t* rows, int64_t cols, uint8_t* panel_q);

// Quantizes x[0, n) exactly as QuantizeActivationsQ8_K (act_block 256) or
// QuantizeActivationsQ8_0 (act_block 32) round it, into plain quants q[n], one scale per
// block d[n / act_block], and the sum of each `group` (16 or 32) quants gsum[n / group].
void QuantizeInt8Activations(const float* x, int64_t n, int act_block, int group, int8_t* q,
                             float* d, int32_t* gsum);

// nn_ops.h's Softmax (n ≥ 1) and SiluMul, with a vector e^x within 2 ulp of expf's, and
// RmsNorm (sum of squares in double, as the scalar form).
void Softmax(float* x, int64_t n);
void SiluMul(const float* gate, const float* up, int64_t n, float* out);
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y);
// nn_ops.h's 16-bit row conversions for the first n / 16 · 16 elements; return how many
// they did (the caller converts the rest).
int64_t FloatsToFp16(const float* x, int64_t n, uint16_t* out);
int64_t FloatsToBf16(const float* x, int64_t n, uint16_t* out);
int64_t Fp16sToFloats(const uint16_t* h, int64_t n, float* out);
int64_t Bf16sToFloats(const uint16_t* h, int64_t n, float* out);

// cpu::PagedAttention (paged_attention.h) for dk and dv multiples of 16; `scores` holds
// nq × n_keys floats.
void PagedAttention(const PagedAttentionArgs& a, float* scores);

}  // namespace tessera::cpu::avx512
