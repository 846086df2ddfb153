#include <random>

#include "gtest/gtest.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/reference/nn_ref.h"

namespace tessera {
namespace {

std::vector<float> Random(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<double> D(const std::vector<float>& v) { return {v.begin(), v.end()}; }

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
  }
}

TEST(NnOps, RmsNormAndLayerNorm) {
  std::mt19937 rng(1);
  for (int n : {1, 7, 256, 4097}) {
    auto x = Random(n, rng, 3.0f), w = Random(n, rng), b = Random(n, rng);
    std::vector<float> y(n);
    cpu::RmsNorm(x.data(), w.data(), n, 1e-5f, y.data());
    ExpectNear(y, reference::RmsNormRef(D(x), D(w), 1e-5), 1e-5);
    cpu::LayerNorm(x.data(), w.data(), b.data(), n, 1e-6f, y.data());
    ExpectNear(y, reference::LayerNormRef(D(x), D(w), D(b), 1e-6), 2e-5);
  }
}

TEST(NnOps, RopeBothLayoutsWithYarnAndFactors) {
  std::mt19937 rng(2);
  for (bool neox : {false, true}) {
    for (bool yarn : {false, true}) {
      for (int64_t pos : {0, 1, 17, 1000, 70000}) {
        SCOPED_TRACE(testing::Message() << "neox " << neox << " yarn " << yarn << " pos " << pos);
        const int head_dim = 96, n_rot = 64;  // partial rotary: 32 dims pass through
        auto head = Random(head_dim, rng);
        auto factors = Random(n_rot / 2, rng, 0.1f);
        for (float& f : factors) f = 1.0f + std::fabs(f);
        cpu::RopeParams p;
        p.n_rot = n_rot;
        p.freq_base = 10000.0f;
        p.freq_scale = yarn ? 0.25f : 1.0f;
        p.yarn = yarn;
        p.yarn_orig_ctx = 1024;
        p.magnitude = yarn ? cpu::YarnMagnitude(4.0f, 1.0f) : 1.0f;
        p.freq_factors = factors.data();
        std::vector<float> c(n_rot / 2), s(n_rot / 2);
        cpu::RopeAngles(p, pos, c.data(), s.data());
        std::vector<float> got = head;
        cpu::ApplyRope(got.data(), n_rot, neox ? cpu::RopeLayout::kNeox : cpu::RopeLayout::kNorm,
                       c.data(), s.data());
        reference::RopeRefParams r;
        r.n_rot = n_rot;
        r.freq_base = 10000;
        r.freq_scale = p.freq_scale;
        r.yarn = yarn;
        r.yarn_orig_ctx = 1024;
        r.magnitude = yarn ? 1 + 0.1 * std::log(4.0) : 1;
        r.freq_factors = D(factors);
        r.neox = neox;
        ExpectNear(got, reference::RopeRef(D(head), pos, r), 1e-5);
      }
    }
  }
}

TEST(NnOps, SoftmaxAndSiluMul) {
  std::mt19937 rng(3);
  auto x = Random(1000, rng, 10.0f);
  std::vector<float> y = x;
  cpu::Softmax(y.data(), 1000);
  ExpectNear(y, reference::SoftmaxRef(D(x)), 1e-5);
  auto g = Random(300, rng, 4.0f), u = Random(300, rng);
  std::vector<float> out(300);
  cpu::SiluMul(g.data(), u.data(), 300, out.data());
  std::vector<double> want(300);
  for (int i = 0; i < 300; ++i) want[i] = reference::SiluRef(g[i]) * u[i];
  ExpectNear(out, want, 1e-6);
}

}  // namespace
}  // namespace tessera
