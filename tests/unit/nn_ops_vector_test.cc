// cpu::Softmax, SiluMul and RmsNorm (the AVX-512 forms where the host has them) against
// float64: lengths around the 16-lane vector, masked (−inf) keys, wide ranges. The 16-bit row
// conversions of the KV cache against the nearest float16 / bfloat16 value found by search.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/reference/nn_ref.h"

namespace tessera {
namespace {

// Every finite non-negative float16 value in bit order (index = bits), from its fields.
std::vector<double> HalfValues() {
  std::vector<double> v;
  for (int bits = 0; bits < 0x7c00; ++bits) {
    const int e = bits >> 10, m = bits & 0x3ff;
    v.push_back(e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
  }
  return v;
}

// The float16 bits nearest to x, ties to the even pattern; beyond the largest half plus half
// its ulp, infinity (IEEE round to nearest even).
uint16_t NearestHalf(float x, const std::vector<double>& halves) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(double{x});
  if (a >= 65520.0) return sign | 0x7c00;
  const auto hi = std::lower_bound(halves.begin(), halves.end(), a);
  if (hi == halves.begin()) return sign;
  const auto lo = hi - 1;
  if (hi == halves.end()) return sign | static_cast<uint16_t>(lo - halves.begin());
  const double dl = a - *lo, dh = *hi - a;
  const auto pick = dl < dh ? lo : dh < dl ? hi : ((lo - halves.begin()) % 2 == 0 ? lo : hi);
  return sign | static_cast<uint16_t>(pick - halves.begin());
}

// The bfloat16 bits nearest to x (a bfloat16 is a float with 16 low zero bits), ties even.
uint16_t NearestBf16(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  const uint32_t lo = b & 0xffff0000u, hi = lo + 0x10000u;
  const double dl = std::fabs(double{x} - double{std::bit_cast<float>(lo)});
  const double dh = (hi & 0x7fffffffu) >= 0x7f800000u
                        ? std::fabs(std::ldexp(1.0, 128) - std::fabs(double{x}))
                        : std::fabs(double{std::bit_cast<float>(hi)} - double{x});
  const uint32_t pick = dl < dh ? lo : dh < dl ? hi : ((lo >> 16) % 2 == 0 ? lo : hi);
  return static_cast<uint16_t>(pick >> 16);
}

// Floats at and around every rounding boundary of float16 (midpoints between neighbouring
// halves, one float ulp either side), the subnormal and overflow edges, specials, randoms.
std::vector<float> RoundingInputs(const std::vector<double>& halves) {
  std::vector<float> x;
  for (size_t i = 0; i + 1 < halves.size(); ++i) {
    const float mid = static_cast<float>((halves[i] + halves[i + 1]) / 2);  // exact in float
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      x.push_back(v);
      x.push_back(-v);
    }
  }
  for (float v : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e30f, 1e-30f, 3e-8f, 2.9e-8f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), 3.3895314e38f, -3.3895314e38f}) {
    x.push_back(v);
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 100000; ++i) x.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  return x;
}

TEST(HalfRowsTest, FloatsRoundToTheNearestHalfAndBf16) {
  const std::vector<double> halves = HalfValues();
  std::vector<float> x = RoundingInputs(halves);
  for (int64_t n :
       {int64_t{0}, int64_t{5}, int64_t{16}, int64_t{31}, static_cast<int64_t>(x.size())}) {
    std::vector<uint16_t> h(n), b(n);
    cpu::FloatsToFp16(x.data(), n, h.data());
    cpu::FloatsToBf16(x.data(), n, b.data());
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t bits = std::bit_cast<uint32_t>(x[i]);
      if (std::isnan(x[i])) {
        // A quiet NaN with the input's sign and top payload bits.
        ASSERT_EQ(h[i], ((bits >> 16) & 0x8000) | 0x7e00 | ((bits >> 13) & 0x3ff)) << i;
        ASSERT_EQ(b[i], (bits >> 16) | 0x40) << i;
        continue;
      }
      ASSERT_EQ(h[i], NearestHalf(x[i], halves)) << "x " << x[i] << " (bits " << bits << ")";
      ASSERT_EQ(b[i], NearestBf16(x[i])) << "x " << x[i] << " (bits " << bits << ")";
    }
  }
}

TEST(HalfRowsTest, HalvesAndBf16WidenExactly) {
  const std::vector<double> halves = HalfValues();
  std::vector<uint16_t> all(65536 + 7);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> f(all.size()), g(all.size());
  cpu::Fp16sToFloats(all.data(), static_cast<int64_t>(all.size()), f.data());
  cpu::Bf16sToFloats(all.data(), static_cast<int64_t>(all.size()), g.data());
  for (size_t i = 0; i < all.size(); ++i) {
    const uint16_t h = all[i];
    const int mag = h & 0x7fff;
    if (mag > 0x7c00) {
      ASSERT_TRUE(std::isnan(f[i])) << h;
    } else {
      const double want = mag == 0x7c00 ? std::numeric_limits<double>::infinity() : halves[mag];
      ASSERT_EQ(double{f[i]}, (h & 0x8000) ? -want : want) << h;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(g[i]), uint32_t{h} << 16) << h;
  }
}

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
