#include "kernels/cuda/rope_factors.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/reference/nn_ref.h"

namespace tessera::cuda {
namespace {

// Rotating a unit vector e0 of each pair by θ_i = p · s_i must give what the float64
// reference (spec 5.2/5.3) gives, for plain, linear, frequency-factor and YaRN settings.
void ExpectMatchesReference(const cpu::RopeParams& p, const std::vector<double>& factors) {
  const std::vector<double> s = RopeThetaScales(p);
  ASSERT_EQ(s.size(), static_cast<size_t>(p.n_rot / 2));
  reference::RopeRefParams rp;
  rp.n_rot = p.n_rot;
  rp.freq_base = p.freq_base;
  rp.freq_scale = p.freq_scale;
  rp.yarn = p.yarn;
  rp.yarn_orig_ctx = p.yarn_orig_ctx;
  rp.freq_factors = factors;
  rp.neox = true;
  for (int64_t pos : {0, 1, 17, 4095, 131071}) {
    std::vector<double> head(p.n_rot, 0.0);
    for (int i = 0; i < p.n_rot / 2; ++i) head[i] = 1.0;  // x0 = 1, x1 = 0 per NEOX pair
    const std::vector<double> out = reference::RopeRef(head, pos, rp);
    for (int i = 0; i < p.n_rot / 2; ++i) {
      const double theta = static_cast<double>(pos) * s[i];
      EXPECT_NEAR(std::cos(theta), out[i], 1e-9) << "pos " << pos << " pair " << i;
      EXPECT_NEAR(std::sin(theta), out[i + p.n_rot / 2], 1e-9) << "pos " << pos << " pair " << i;
    }
  }
}

TEST(RopeThetaScales, Plain) {
  cpu::RopeParams p;
  p.n_rot = 128;
  p.freq_base = 500000;
  ExpectMatchesReference(p, {});
}

TEST(RopeThetaScales, LinearScalingAndFrequencyFactors) {
  cpu::RopeParams p;
  p.n_rot = 64;
  p.freq_base = 10000;
  p.freq_scale = 0.25f;
  std::vector<float> f(32);
  std::vector<double> fd(32);
  for (int i = 0; i < 32; ++i) fd[i] = f[i] = 1.0f + 0.125f * static_cast<float>(i % 7);
  p.freq_factors = f.data();
  ExpectMatchesReference(p, fd);
}

TEST(RopeThetaScales, Yarn) {
  cpu::RopeParams p;
  p.n_rot = 64;
  p.freq_base = 10000;
  p.freq_scale = 1.0f / 40;
  p.yarn = true;
  p.yarn_orig_ctx = 4096;
  ExpectMatchesReference(p, {});
}

TEST(RopeThetaScales, RejectsOddRotation) {
  cpu::RopeParams p;
  p.n_rot = 7;
  EXPECT_TRUE(RopeThetaScales(p).empty());
}

}  // namespace
}  // namespace tessera::cuda
