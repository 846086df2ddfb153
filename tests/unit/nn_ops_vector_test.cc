// cpu::Softmax, SiluMul and RmsNorm (the AVX-512 forms where the host has them) against
// float64: lengths around the 16-lane vector, masked (−inf) keys, wide ranges.
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

constexpr double kU = 0x1p-24;

TEST(SiluMulTest, MatchesFloat64) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> dist(-30.0f, 30.0f);
  for (int64_t n : {1, 17, 64, 2051}) {
    std::vector<float> g(n), u(n), out(n);
    for (int64_t i = 0; i < n; ++i) {
      g[i] = dist(rng);
      u[i] = dist(rng) / 10;
    }
    cpu::SiluMul(g.data(), u.data(), n, out.data());
    for (int64_t i = 0; i < n; ++i) {
      const double want = reference::SiluRef(g[i]) * u[i];
      // e^-g within 2 ulp, then an add, a divide and a multiply.
      ASSERT_NEAR(out[i], want, 6 * kU * std::fabs(want) + 1e-37) << "n " << n << " i " << i;
    }
  }
}

TEST(RmsNormTest, MatchesFloat64) {
  std::mt19937 rng(13);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (int64_t n : {1, 17, 64, 2051}) {
    std::vector<float> x(n), w(n), y(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = dist(rng);
      w[i] = dist(rng);
    }
    std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end());
    const std::vector<double> want = reference::RmsNormRef(xd, wd, 1e-5);
    cpu::RmsNorm(x.data(), w.data(), n, 1e-5f, y.data());
    for (int64_t i = 0; i < n; ++i) {
      // The scale rounds once to float, then two float products.
      ASSERT_NEAR(y[i], want[i], 4 * kU * std::fabs(want[i]) + 1e-37) << "n " << n;
    }
  }
}

}  // namespace
}  // namespace tessera
