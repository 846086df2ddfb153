#include "kernels/reference/nn_ref.h"

#include <algorithm>
#include <cmath>

namespace tessera::reference {

std::vector<double> RmsNormRef(const std::vector<double>& x, const std::vector<double>& w,
                               double eps) {
  double ms = 0;
  for (double v : x) ms += v * v;
  ms /= static_cast<double>(x.size());
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] / std::sqrt(ms + eps) * (w.empty() ? 1 : w[i]);
  return y;
}

std::vector<double> LayerNormRef(const std::vector<double>& x, const std::vector<double>& w,
                                 const std::vector<double>& b, double eps) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  var /= static_cast<double>(x.size());
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    y[i] = (x[i] - mean) / std::sqrt(var + eps) * (w.empty() ? 1 : w[i]) + (b.empty() ? 0 : b[i]);
  }
  return y;
}

std::vector<double> RopeRef(const std::vector<double>& head, int64_t pos, const RopeRefParams& p) {
  std::vector<double> out = head;
  const int half = p.n_rot / 2;
  double low = 0, high = 0;
  if (p.yarn) {
    auto corr = [&](double beta) {
      return p.n_rot * std::log(p.yarn_orig_ctx / (2 * M_PI * beta)) / (2 * std::log(p.freq_base));
    };
    low = std::max(0.0, std::floor(corr(32)));
    high = std::min(static_cast<double>(p.n_rot - 1), std::ceil(corr(1)));
  }
  for (int i = 0; i < half; ++i) {
    double theta = static_cast<double>(pos) * std::pow(p.freq_base, -2.0 * i / p.n_rot);
    if (!p.freq_factors.empty()) theta /= p.freq_factors[i];
    if (p.yarn) {
      double ramp = 1 - std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
      theta = theta * ramp + p.freq_scale * theta * (1 - ramp);
    } else {
      theta *= p.freq_scale;
    }
    int a = p.neox ? i : 2 * i;
    int b = p.neox ? i + half : 2 * i + 1;
    out[a] = p.magnitude * (head[a] * std::cos(theta) - head[b] * std::sin(theta));
    out[b] = p.magnitude * (head[a] * std::sin(theta) + head[b] * std::cos(theta));
  }
  return out;
}

std::vector<double> SoftmaxRef(const std::vector<double>& x) {
  double m = *std::max_element(x.begin(), x.end()), sum = 0;
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum += (y[i] = std::exp(x[i] - m));
  for (double& v : y) v /= sum;
  return y;
}

double SiluRef(double x) { return x / (1 + std::exp(-x)); }

}  // namespace tessera::reference
