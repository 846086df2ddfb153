// The element-wise and per-vector operations of the forward pass (spec section 5), float32.
// kernels/reference/nn_ref.h holds their float64 twins for tests.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::cpu {

// y = x / sqrt(mean(x^2) + eps) * w  (spec 5.1); y may alias x; w may be null (no weight).
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y);

// LayerNorm with biased variance: y = (x - mean) / sqrt(var + eps) * w + b (spec 5.1).
void LayerNorm(const float* x, const float* w, const float* b, int64_t n, float eps, float* y);

enum class RopeLayout { kNorm, kNeox };

// Everything RoPE needs besides the position (spec 5.2, 5.3).
struct RopeParams {
  int n_rot = 0;  // rotated dims per head
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1 / rope.scaling.factor for linear and YaRN
  bool yarn = false;
  int yarn_orig_ctx = 0;                // rope.scaling.original_context_length
  float magnitude = 1.0f;               // M: multiplies cos and sin
  const float* freq_factors = nullptr;  // rope_freqs.weight (n_rot/2), or null
};

// cos/sin of every pair's angle at `pos`, times the magnitude: n_rot/2 values each.
void RopeAngles(const RopeParams& p, int64_t pos, float* cos_out, float* sin_out);

// Rotates the first n_rot components of one head vector in place.
void ApplyRope(float* head, int n_rot, RopeLayout layout, const float* cos_v, const float* sin_v);

// In-place softmax over n values (max-subtracted).
void Softmax(float* x, int64_t n);

// out = silu(gate) * up, element-wise; out may alias gate.
void SiluMul(const float* gate, const float* up, int64_t n, float* out);

// 16-bit storage of float rows (the KV cache): out[i] = FloatToFp16(x[i]) / FloatToBf16(x[i])
// (common/util/half.h: round to nearest even, NaN stays a quiet NaN) and back, exactly as
// those functions, with AVX-512 (F16C conversions, integer rounding for bf16) where present.
void FloatsToFp16(const float* x, int64_t n, uint16_t* out);
void FloatsToBf16(const float* x, int64_t n, uint16_t* out);
void Fp16sToFloats(const uint16_t* h, int64_t n, float* out);
void Bf16sToFloats(const uint16_t* h, int64_t n, float* out);

// YaRN's rope magnitude M for the general case (spec 5.3): 1 + 0.1 ln s, times attn_factor.
float YarnMagnitude(float scaling_factor, float attn_factor);

}  // namespace tessera::cpu
