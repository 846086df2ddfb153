// cpu::Softmax (the AVX-512 form where the host has it) against the float64 softmax:
// lengths around the 16-lane vector, masked (−inf) keys, a wide range of scores.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/reference/nn_ref.h"

namespace tessera {
namespace {

TEST(SoftmaxTest, MatchesFloat64) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> score(-40.0f, 40.0f);
  for (int64_t n : {1, 5, 16, 17, 33, 1000, 4097}) {
    std::vector<float> x(n);
    for (float& v : x) v = score(rng);
    for (int64_t i = 3; i < n; i += 7) x[i] = -std::numeric_limits<float>::infinity();
    std::vector<double> xd(x.begin(), x.end());
    const float max = *std::max_element(x.begin(), x.end());
    const std::vector<double> want = reference::SoftmaxRef(xd);
    cpu::Softmax(x.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      // x − max rounds to float (relative error of e^(x−max) up to |x − max|·u), e^x is
      // within 2 ulp and the normalisation adds a rounding or two: 8 ulp besides. Masked
      // keys are exactly 0.
      const double u = 0x1p-24;
      if (std::isinf(xd[i])) {
        ASSERT_EQ(x[i], 0.0f);
        continue;
      }
      const double tol = want[i] * (std::fabs(xd[i] - max) * u + 8 * u) + 1e-37;
      ASSERT_NEAR(x[i], want[i], tol) << "n " << n << " i " << i;
    }
  }
}

}  // namespace
}  // namespace tessera
