// GPU RMSNorm, RoPE, softmax and SiLU·mul against the float64 references of
// kernels/reference/nn_ref.h, in every activation dtype. Label `gpu`.
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/nn_kernels.h"
#include "kernels/cuda/rope_factors.h"
#include "kernels/reference/nn_ref.h"
#include "tests/unit/cuda_test_util.h"

namespace tessera::cuda {
namespace {

using testing::Decode;
using testing::DeviceBuffer;
using testing::Encode;
using testing::Epsilon;
using testing::RandomVector;
using testing::Round;

constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

std::vector<double> Widen(const float* p, size_t n) { return std::vector<double>(p, p + n); }

// |got − want| ≤ (rounding of the output + float32 work) · scale.
void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, DType dtype,
                 double scale_floor = 1.0) {
  ASSERT_EQ(got.size(), want.size());
  testing::ExpectCloseToFloat64(got.data(), want, dtype, scale_floor);
}

class CudaNn : public testing::GpuTest {};

TEST_F(CudaNn, RmsNorm) {
  std::mt19937_64 rng(10);
  const int64_t rows = 5, n = 4096 + 7;
  const std::vector<float> w = RandomVector(n, rng);
  for (DType dt : kDTypes) {
    SCOPED_TRACE(DTypeName(dt));
    const std::vector<float> x = Round(RandomVector(rows * n, rng, 3.0f), dt);
    DeviceBuffer dx(Encode(x, dt)), dw(w), dy(rows * n * DTypeBytes(dt));
    ASSERT_TRUE(RmsNorm(dx.get(), dw.as<float>(), rows, n, 1e-6f, dt, dy.get(), nullptr).ok());
    Sync();
    const std::vector<float> got = Decode(dy.Download<uint8_t>(rows * n * DTypeBytes(dt)), dt);
    std::vector<double> want;
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<double> one =
          reference::RmsNormRef(Widen(&x[r * n], n), Widen(w.data(), n), 1e-6);
      want.insert(want.end(), one.begin(), one.end());
    }
    ExpectClose(got, want, dt, 4.0);
  }
}

TEST_F(CudaNn, RopeNormNeoxAndYarn) {
  std::mt19937_64 rng(11);
  const int tokens = 3, heads = 4, head_dim = 128;
  const std::vector<int32_t> positions = {0, 77, 65000};
  struct Case {
    bool neox, yarn;
    int n_rot;
  };
  for (const Case& c : {Case{false, false, 128}, Case{true, false, 64}, Case{false, true, 64},
                        Case{true, true, 128}}) {
    cpu::RopeParams p;
    p.n_rot = c.n_rot;
    p.freq_base = 10000;
    p.freq_scale = c.yarn ? 1.0f / 40 : 1.0f;
    p.yarn = c.yarn;
    p.yarn_orig_ctx = 4096;
    p.magnitude = c.yarn ? cpu::YarnMagnitude(40, 1.0f) : 1.0f;
    const std::vector<double> scales = RopeThetaScales(p);
    DeviceBuffer dscales(scales), dpos(positions);
    for (DType dt : kDTypes) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " neox " << c.neox << " yarn " << c.yarn
                                        << " n_rot " << c.n_rot);
      const std::vector<float> x = Round(RandomVector(tokens * heads * head_dim, rng), dt);
      DeviceBuffer dx(Encode(x, dt));
      RopeArgs a;
      a.tokens = tokens;
      a.heads = heads;
      a.head_dim = head_dim;
      a.token_stride = heads * head_dim;
      a.n_rot = c.n_rot;
      a.neox = c.neox;
      a.magnitude = p.magnitude;
      a.positions = dpos.as<int32_t>();
      a.theta_scales = dscales.as<double>();
      ASSERT_TRUE(Rope(a, dt, dx.get(), nullptr).ok());
      Sync();
      const std::vector<float> got = Decode(dx.Download<uint8_t>(x.size() * DTypeBytes(dt)), dt);
      reference::RopeRefParams rp;
      rp.n_rot = c.n_rot;
      rp.freq_base = p.freq_base;
      rp.freq_scale = p.freq_scale;
      rp.yarn = c.yarn;
      rp.yarn_orig_ctx = p.yarn_orig_ctx;
      rp.magnitude = p.magnitude;
      rp.neox = c.neox;
      std::vector<double> want;
      for (int t = 0; t < tokens; ++t) {
        for (int h = 0; h < heads; ++h) {
          const std::vector<double> head =
              reference::RopeRef(Widen(&x[(t * heads + h) * head_dim], head_dim), positions[t], rp);
          want.insert(want.end(), head.begin(), head.end());
        }
      }
      ExpectClose(got, want, dt, 4.0);
    }
  }
}

TEST_F(CudaNn, Softmax) {
  std::mt19937_64 rng(12);
  const int64_t rows = 3, n = 30000;
  for (DType dt : kDTypes) {
    SCOPED_TRACE(DTypeName(dt));
    const std::vector<float> x = Round(RandomVector(rows * n, rng, 4.0f), dt);
    DeviceBuffer dx(Encode(x, dt));
    ASSERT_TRUE(Softmax(dx.get(), rows, n, dt, nullptr).ok());
    Sync();
    const std::vector<float> got = Decode(dx.Download<uint8_t>(x.size() * DTypeBytes(dt)), dt);
    std::vector<double> want;
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<double> one = reference::SoftmaxRef(Widen(&x[r * n], n));
      want.insert(want.end(), one.begin(), one.end());
    }
    // Values are tiny here (~1/n): compare relative to each value, plus the sum's rounding,
    // plus float16's subnormal rounding (2^-25) for values below its normal range.
    const double floor = dt == DType::kF16 ? 0x1p-25 : 1e-12;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], Epsilon(dt) * want[i] + 1e-5 * want[i] + floor) << i;
    }
  }
}

TEST_F(CudaNn, SiluMul) {
  std::mt19937_64 rng(13);
  const int64_t n = 100003;
  for (DType dt : kDTypes) {
    SCOPED_TRACE(DTypeName(dt));
    const std::vector<float> g = Round(RandomVector(n, rng, 4.0f), dt);
    const std::vector<float> u = Round(RandomVector(n, rng), dt);
    DeviceBuffer dg(Encode(g, dt)), du(Encode(u, dt)), dout(n * DTypeBytes(dt));
    ASSERT_TRUE(SiluMul(dg.get(), du.get(), n, dt, dout.get(), nullptr).ok());
    Sync();
    const std::vector<float> got = Decode(dout.Download<uint8_t>(n * DTypeBytes(dt)), dt);
    std::vector<double> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = reference::SiluRef(g[i]) * u[i];
    ExpectClose(got, want, dt, 1e-3);
  }
}

TEST_F(CudaNn, ResidualAdd) {
  std::mt19937_64 rng(14);
  const int64_t n = 5000;
  for (DType dt : kDTypes) {
    SCOPED_TRACE(DTypeName(dt));
    const std::vector<float> y = Round(RandomVector(n, rng), dt),
                             x = Round(RandomVector(n, rng), dt);
    DeviceBuffer dy(Encode(y, dt)), dx(Encode(x, dt));
    ASSERT_TRUE(AddInPlace(dy.get(), dx.get(), n, dt, nullptr).ok());
    Sync();
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = y[i] + x[i];  // one float32 rounding, then dt's
    EXPECT_EQ(Decode(dy.Download<uint8_t>(n * DTypeBytes(dt)), dt), Round(want, dt));
  }
}

TEST_F(CudaNn, ShapeErrorsComeBeforeAnyLaunch) {
  RopeArgs a;
  a.tokens = 1;
  a.heads = 1;
  a.head_dim = 64;
  a.n_rot = 66;
  EXPECT_EQ(Rope(a, DType::kF32, nullptr, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RmsNorm(nullptr, nullptr, 0, 10, 1e-6f, DType::kF32, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::cuda
