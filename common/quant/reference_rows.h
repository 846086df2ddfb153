// Reference (scalar, obviously correct) row codecs for every supported type.
//
// A "row" here is `n` consecutive elements, n a multiple of the type's block size (callers
// check; these functions do not). The dequantizers follow ggml's dequantize_row_* operation
// for operation, so their output is bit-identical to ggml's (the conformance vectors pin
// that). The quantizers are simple, documented and bounded (see quantize.h), not ggml's
// heuristic scale searches, so their bytes may differ from ggml's.
#pragma once

#include <cstdint>

namespace tessera::quant::ref {

void DequantizeF32(const void* src, float* y, int64_t n);
void DequantizeF16(const void* src, float* y, int64_t n);
void DequantizeBF16(const void* src, float* y, int64_t n);
void DequantizeQ4_0(const void* src, float* y, int64_t n);
void DequantizeQ4_1(const void* src, float* y, int64_t n);
void DequantizeQ5_0(const void* src, float* y, int64_t n);
void DequantizeQ5_1(const void* src, float* y, int64_t n);
void DequantizeQ8_0(const void* src, float* y, int64_t n);
void DequantizeQ2_K(const void* src, float* y, int64_t n);
void DequantizeQ3_K(const void* src, float* y, int64_t n);
void DequantizeQ4_K(const void* src, float* y, int64_t n);
void DequantizeQ5_K(const void* src, float* y, int64_t n);
void DequantizeQ6_K(const void* src, float* y, int64_t n);
void DequantizeQ8_K(const void* src, float* y, int64_t n);
void DequantizeIQ4_NL(const void* src, float* y, int64_t n);
void DequantizeIQ4_XS(const void* src, float* y, int64_t n);

void QuantizeF32(const float* x, void* dst, int64_t n);
void QuantizeF16(const float* x, void* dst, int64_t n);
void QuantizeBF16(const float* x, void* dst, int64_t n);
void QuantizeQ4_0(const float* x, void* dst, int64_t n);
void QuantizeQ4_1(const float* x, void* dst, int64_t n);
void QuantizeQ5_0(const float* x, void* dst, int64_t n);
void QuantizeQ5_1(const float* x, void* dst, int64_t n);
void QuantizeQ8_0(const float* x, void* dst, int64_t n);
void QuantizeQ2_K(const float* x, void* dst, int64_t n);
void QuantizeQ3_K(const float* x, void* dst, int64_t n);
void QuantizeQ4_K(const float* x, void* dst, int64_t n);
void QuantizeQ5_K(const float* x, void* dst, int64_t n);
void QuantizeQ6_K(const float* x, void* dst, int64_t n);
void QuantizeQ8_K(const float* x, void* dst, int64_t n);

}  // namespace tessera::quant::ref
