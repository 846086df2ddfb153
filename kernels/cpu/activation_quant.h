// Quantization of activations (x of y = W·x) for the integer matmul path, following
// llama.cpp's CPU backend rounding for rounding: Q8_0 as its AVX2 quantize_row_q8_0
// (id = 127/amax, round half to even, fp16 scale of amax/127) and Q8_K as
// quantize_row_q8_K_ref (signed extreme → −127, round half to even, float scale). Matching
// these means Tessera's quantized products round activations exactly where llama.cpp does,
// which is what brings quantized logits close to llama.cpp's own (conformance "Tier 2").
//
// Error per element, amax = max |x| over its block: Q8_0 ≤ amax/254·1.125 (the scale is
// stored in fp16 after the quants were rounded against the exact one); Q8_K ≤ amax/254
// plus float rounding.
#pragma once

#include <cstdint>

namespace tessera::cpu {

// `n` a multiple of 32; dst holds n/32 BlockQ8_0.
void QuantizeActivationsQ8_0(const float* x, void* dst, int64_t n);
// `n` a multiple of 256; dst holds n/256 BlockQ8_K (4-byte aligned).
void QuantizeActivationsQ8_K(const float* x, void* dst, int64_t n);

}  // namespace tessera::cpu
