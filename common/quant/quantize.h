// Reference quantization of float32 data to every non-IQ type Tessera supports (used by
// gen-model and by tests; matmul quantizes activations with the same codecs).
//
// Error bounds, for finite input and blocks whose scales are normal fp16 numbers
// (|x| well above 1e-4 per block); `amax` is the largest |x| in the block, `range` is
// max(x) − min(x) of the block, u = 2^-10 covers fp16 rounding of the scales:
//   f32: exact.  f16 / bf16: round to nearest even (relative 2^-11 / 2^-8; f16 adds 2^-25
//         absolute below its normal range).
//   q8_0: |e| ≤ amax/254·(1+u).           q8_K: |e| ≤ amax/254·(1+2^-20).
//   q4_0: |e| ≤ amax/8·(1+2^-8)   (the extreme maps to −8 steps, so the opposite side clips
//         at +7 steps; elsewhere half a step).   q5_0: |e| ≤ amax/16·(1+2^-7).
//   q4_1: |e| ≤ range/30 + u·amax.        q5_1: |e| ≤ range/62 + u·amax.
//   K-quants, per sub-block j with super-block maxima taken over its sub-blocks:
//   q6_K / q3_K (signed scales, quants in [−H, H−1], H = 32 / 4, scale levels S = 127 / 31):
//         |e| ≤ amax_j/H + amax_super/(2S)·(1+u).
//   q2_K / q4_K / q5_K (levels L = 4 / 16 / 32, scale levels S = 15 / 63 / 63):
//         |e| ≤ range_j/(2(L−1)) + (max range)/(2(L−1)S) + (max −min⁻)/(2S) + u·amax_super,
//         where min⁻ = min(0, min x) of a sub-block.
// tests/unit/quantize_test.cc checks each bound on random data.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/gguf/ggml_type.h"

namespace tessera::quant {

// True when QuantizeFromFloat supports `type`.
bool CanQuantize(gguf::GgmlType type);

// Encodes `x` (its size a multiple of the type's block) into `dst`, which must hold exactly
// the bytes that many elements take. Errors name the type and the mismatch.
absl::Status QuantizeFromFloat(gguf::GgmlType type, absl::Span<const float> x,
                               absl::Span<uint8_t> dst);

}  // namespace tessera::quant
