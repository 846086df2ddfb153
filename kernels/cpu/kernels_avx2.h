// Kernels compiled with AVX2/FMA/F16C (files *_avx2.cc). Call them only when
// IsaSupported(Isa::kAvx2); the dispatchers (dequantize_fast.cc, matmul.cc) do that.
//
// Rule for *_avx2.cc / *_avx512.cc files: they include only intrinsics, <cstdint>/<cstring>
// and plain structs, and keep every helper in an anonymous namespace, so that no inline
// function compiled with wider instructions can be picked by the linker for baseline code.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/gguf/ggml_type.h"

namespace tessera::cpu::avx2 {

using DequantizeRowFn = void (*)(const void* src, float* y, int64_t n);
// nullptr when there is no AVX2 decoder for `type`.
DequantizeRowFn Dequantizer(gguf::GgmlType type);

// Integer dot product of one weight row (packed blocks of `type`) with one activation row
// quantized to the type's activation format (Q8_0 or Q8_K), `n` elements. nullptr when
// there is no AVX2 kernel for `type`.
using VecDotFn = float (*)(const void* w, const void* a, int64_t n);
VecDotFn IntegerDot(gguf::GgmlType type);

// The same dot of one weight row with `nb` activation rows (1 ≤ nb ≤ kMaxDotVectors, row b
// at a + b·stride bytes): out[b]. Each weight block is decoded once for all of them, and
// out[b] has the bits IntegerDot gives for row b alone (the same operations in the same
// order), so batching decode vectors changes no result. nullptr where IntegerDot is.
inline constexpr int kMaxDotVectors = 4;
using VecDotManyFn = void (*)(const void* w, const void* a, size_t stride, int nb, int64_t n,
                              float* out);
VecDotManyFn IntegerDots(gguf::GgmlType type);

// y[r][b] = dot(w[r], x[b]) for float rows: w is `rows` × n (row stride ldw), x is
// `batch` × n (stride ldx), y[b * ldy + r].
void FloatGemm(const float* w, int64_t ldw, int64_t rows, const float* x, int64_t ldx,
               int64_t batch, int64_t n, float* y, int64_t ldy);

// Prefill form of the same product with x transposed: y[b * ldy + r] =
// Σ_k w[r * ldw + k] · xt[k * ldxt + b]; ldxt ≥ batch rounded up to 16, padding readable.
void FloatGemmTransposedX(const float* w, int64_t ldw, int64_t rows, const float* xt, int64_t ldxt,
                          int64_t batch, int64_t n, float* y, int64_t ldy);

}  // namespace tessera::cpu::avx2
