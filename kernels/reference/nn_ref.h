// Float64 reference versions of kernels/cpu/nn_ops.h, written straight from spec section 5
// for tests: slow and obviously correct.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::reference {

std::vector<double> RmsNormRef(const std::vector<double>& x, const std::vector<double>& w,
                               double eps);
std::vector<double> LayerNormRef(const std::vector<double>& x, const std::vector<double>& w,
                                 const std::vector<double>& b, double eps);

struct RopeRefParams {
  int n_rot = 0;
  double freq_base = 10000;
  double freq_scale = 1;
  bool yarn = false;
  int yarn_orig_ctx = 0;
  double magnitude = 1;
  std::vector<double> freq_factors;  // empty: none
  bool neox = false;
};

// Rotates the first n_rot values of `head` for position `pos` (spec 5.2, 5.3).
std::vector<double> RopeRef(const std::vector<double>& head, int64_t pos, const RopeRefParams& p);

std::vector<double> SoftmaxRef(const std::vector<double>& x);
double SiluRef(double x);

}  // namespace tessera::reference
