// Activation quantization: llama.cpp's rounding on hand-worked blocks, and the documented
// error bound on random data.
#include "kernels/cpu/activation_quant.h"

#include <cmath>
#include <random>
#include <vector>

#include "common/quant/blocks.h"
#include "common/util/half.h"
#include "gtest/gtest.h"

namespace tessera::cpu {
namespace {

TEST(ActivationQuantTest, Q8_0RoundsHalfToEvenAgainstAmaxOver127) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // amax 127: id = 1, so quants are x rounded half to even
  x[1] = 0.5f;
  x[2] = 1.5f;
  x[3] = 2.5f;
  x[4] = -3.5f;
  x[5] = -127.0f;
  quant::BlockQ8_0 b;
  QuantizeActivationsQ8_0(x.data(), &b, 32);
  EXPECT_EQ(Fp16ToFloat(b.d), 1.0f);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 0);
  EXPECT_EQ(b.qs[2], 2);
  EXPECT_EQ(b.qs[3], 2);
  EXPECT_EQ(b.qs[4], -4);
  EXPECT_EQ(b.qs[5], -127);
}

TEST(ActivationQuantTest, Q8_KMapsTheSignedExtremeToMinus127) {
  std::vector<float> x(256, 0.0f);
  x[0] = -2.0f;  // iscale = 63.5
  x[1] = 1.0f;   // 63.5 → 64 (even)
  x[2] = 0.5f;   // 31.75 → 32
  x[17] = 2.0f;  // 127 exactly, in the second group of 16
  quant::BlockQ8_K b;
  QuantizeActivationsQ8_K(x.data(), &b, 256);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 64);
  EXPECT_EQ(b.qs[2], 32);
  EXPECT_EQ(b.qs[17], 127);
  EXPECT_FLOAT_EQ(b.d, 1.0f / 63.5f);
  EXPECT_EQ(b.bsums[0], -127 + 64 + 32);
  EXPECT_EQ(b.bsums[1], 127);
  std::vector<float> zeros(256, 0.0f);
  QuantizeActivationsQ8_K(zeros.data(), &b, 256);
  EXPECT_EQ(b.d, 0.0f);
  EXPECT_EQ(b.bsums[3], 0);
}

TEST(ActivationQuantTest, ErrorWithinDocumentedBound) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(1024);
  for (float& v : x) v = normal(rng) * (rng() % 2 ? 1.0f : 30.0f);
  std::vector<quant::BlockQ8_0> a0(1024 / 32);
  std::vector<quant::BlockQ8_K> ak(1024 / 256);
  QuantizeActivationsQ8_0(x.data(), a0.data(), 1024);
  QuantizeActivationsQ8_K(x.data(), ak.data(), 1024);
  for (int i = 0; i < 1024; ++i) {
    double amax32 = 0, amax256 = 0;
    for (int j = i / 32 * 32; j < i / 32 * 32 + 32; ++j)
      amax32 = std::max(amax32, std::fabs(double{x[j]}));
    for (int j = i / 256 * 256; j < i / 256 * 256 + 256; ++j) {
      amax256 = std::max(amax256, std::fabs(double{x[j]}));
    }
    const double y0 = double{Fp16ToFloat(a0[i / 32].d)} * a0[i / 32].qs[i % 32];
    const double yk = double{ak[i / 256].d} * ak[i / 256].qs[i % 256];
    EXPECT_LE(std::fabs(y0 - x[i]), amax32 / 254 * 1.125) << i;
    EXPECT_LE(std::fabs(yk - x[i]), amax256 / 254 * (1 + 1e-6)) << i;
  }
}

}  // namespace
}  // namespace tessera::cpu
