#include "kernels/cpu/nn_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/util/half.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kernels_avx512.h"

namespace tessera::cpu {
namespace {

bool UseAvx512() {
  static const bool use = BestIsa() == Isa::kAvx512;
  return use;
}

// fp16 -> float through a table where the vector conversion is missing: the bit-twiddling
// conversion dominated decode profiles.
const float* Fp16Table() {
  static const std::vector<float>* table = [] {
    auto* t = new std::vector<float>(65536);
    for (uint32_t h = 0; h < 65536; ++h) (*t)[h] = Fp16ToFloat(static_cast<uint16_t>(h));
    return t;
  }();
  return table->data();
}

}  // namespace

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y) {
  if (UseAvx512()) {
    avx512::RmsNorm(x, w, n, eps, y);
    return;
  }
  double sum = 0;  // double accumulation: n can be 7168+ and the result feeds every layer
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

void LayerNorm(const float* x, const float* w, const float* b, int64_t n, float eps, float* y) {
  double mean = 0, var = 0;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<double>(n);
  const double inv = 1.0 / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<float>((x[i] - mean) * inv) * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
  }
}

float YarnMagnitude(float scaling_factor, float attn_factor) {
  if (scaling_factor <= 1.0f) return attn_factor;
  return attn_factor * (1.0f + 0.1f * std::log(scaling_factor));
}

void RopeAngles(const RopeParams& p, int64_t pos, float* cos_out, float* sin_out) {
  const int half = p.n_rot / 2;
  // YaRN's ramp between extrapolated and interpolated angles (spec 5.3), beta 32 / 1; in
  // double, since a float ramp error times a large position moves the angle visibly.
  double low = 0, high = 0;
  if (p.yarn) {
    auto corr = [&](double beta) {
      return p.n_rot * std::log(p.yarn_orig_ctx / (beta * 2 * M_PI)) /
             (2 * std::log(static_cast<double>(p.freq_base)));
    };
    low = std::max(0.0, std::floor(corr(32.0)));
    high = std::min(static_cast<double>(p.n_rot - 1), std::ceil(corr(1.0)));
  }
  for (int i = 0; i < half; ++i) {
    // Angles in double: positions reach 1e5+ and float32 angles would lose the phase.
    double theta =
        static_cast<double>(pos) * std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
    if (p.freq_factors) theta /= p.freq_factors[i];
    if (p.yarn) {
      double ramp = 1.0 - std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
      theta = theta * ramp + theta * p.freq_scale * (1.0 - ramp);
    } else {
      theta *= p.freq_scale;
    }
    cos_out[i] = static_cast<float>(std::cos(theta) * p.magnitude);
    sin_out[i] = static_cast<float>(std::sin(theta) * p.magnitude);
  }
}

void ApplyRope(float* head, int n_rot, RopeLayout layout, const float* cos_v, const float* sin_v) {
  const int half = n_rot / 2;
  for (int i = 0; i < half; ++i) {
    float* a = layout == RopeLayout::kNorm ? head + 2 * i : head + i;
    float* b = layout == RopeLayout::kNorm ? head + 2 * i + 1 : head + i + half;
    const float x0 = *a, x1 = *b;
    *a = x0 * cos_v[i] - x1 * sin_v[i];
    *b = x0 * sin_v[i] + x1 * cos_v[i];
  }
}

void Softmax(float* x, int64_t n) {
  // Attention calls this for every query row: the scalar expf loop was 15% of prefill.
  if (UseAvx512() && n > 0) {
    avx512::Softmax(x, n);
    return;
  }
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = std::max(m, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  if (UseAvx512()) {
    avx512::SiluMul(gate, up, n, out);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void FloatsToFp16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  if (UseAvx512()) i = avx512::FloatsToFp16(x, n, out);
  for (; i < n; ++i) out[i] = FloatToFp16(x[i]);
}

void FloatsToBf16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  if (UseAvx512()) i = avx512::FloatsToBf16(x, n, out);
  for (; i < n; ++i) out[i] = FloatToBf16(x[i]);
}

void Fp16sToFloats(const uint16_t* h, int64_t n, float* out) {
  int64_t i = 0;
  if (UseAvx512()) i = avx512::Fp16sToFloats(h, n, out);
  const float* table = Fp16Table();
  for (; i < n; ++i) out[i] = table[h[i]];
}

void Bf16sToFloats(const uint16_t* h, int64_t n, float* out) {
  int64_t i = 0;
  if (UseAvx512()) i = avx512::Bf16sToFloats(h, n, out);
  for (; i < n; ++i) out[i] = Bf16ToFloat(h[i]);
}

}  // namespace tessera::cpu
