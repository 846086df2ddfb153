#include "kernels/cuda/rope_factors.h"

#include <algorithm>
#include <cmath>

namespace tessera::cuda {

std::vector<double> RopeThetaScales(const cpu::RopeParams& p) {
  if (p.n_rot <= 0 || p.n_rot % 2 != 0) return {};
  const int half = p.n_rot / 2;
  // YaRN's ramp (spec 5.3, β_fast 32, β_slow 1), as cpu::RopeAngles computes it.
  double low = 0, high = 0;
  if (p.yarn) {
    auto corr = [&](double beta) {
      return p.n_rot * std::log(p.yarn_orig_ctx / (beta * 2 * M_PI)) /
             (2 * std::log(static_cast<double>(p.freq_base)));
    };
    low = std::max(0.0, std::floor(corr(32.0)));
    high = std::min(static_cast<double>(p.n_rot - 1), std::ceil(corr(1.0)));
  }
  std::vector<double> scales(half);
  for (int i = 0; i < half; ++i) {
    double s = std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
    if (p.freq_factors) s /= p.freq_factors[i];
    if (p.yarn) {
      const double ramp = 1.0 - std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
      s = s * ramp + s * p.freq_scale * (1.0 - ramp);
    } else {
      s *= p.freq_scale;
    }
    scales[i] = s;
  }
  return scales;
}

}  // namespace tessera::cuda
