// Quantize → reference dequantize stays within the error bound documented in quantize.h,
// on random data of several shapes; the bound is computed here from the input alone.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/quant/dequantize.h"
#include "common/quant/quantize.h"
#include "common/quant/type_traits.h"
#include "gtest/gtest.h"

namespace tessera::quant {
namespace {

using gguf::GgmlType;

constexpr double kU = 1.0 / 1024;  // fp16 rounding allowance of the documented bounds

struct Stats {
  double amax = 0, lo = 0, hi = 0, neg_min = 0;  // neg_min = −min(0, min x)
};

Stats StatsOf(const float* x, int n) {
  Stats s;
  s.lo = s.hi = x[0];
  for (int i = 0; i < n; ++i) {
    s.amax = std::max(s.amax, std::fabs(static_cast<double>(x[i])));
    s.lo = std::min(s.lo, static_cast<double>(x[i]));
    s.hi = std::max(s.hi, static_cast<double>(x[i]));
  }
  s.neg_min = -std::min(0.0, s.lo);
  return s;
}

// Per-element bound for element e of the block starting at x (quantize.h).
std::vector<double> Bounds(GgmlType type, const float* x, int n) {
  std::vector<double> bound(n);
  const Stats all = StatsOf(x, n);
  auto fill_sub = [&](int sub_len, auto per_sub) {
    for (int j = 0; j < n / sub_len; ++j) {
      const Stats s = StatsOf(x + j * sub_len, sub_len);
      for (int l = 0; l < sub_len; ++l) bound[j * sub_len + l] = per_sub(s);
    }
  };
  // Super-block maxima over sub-blocks for the asymmetric K-quants.
  auto asym = [&](int sub_len, double levels, double smax) {
    double max_range = 0, max_neg_min = 0;
    for (int j = 0; j < n / sub_len; ++j) {
      const Stats s = StatsOf(x + j * sub_len, sub_len);
      max_range = std::max(max_range, std::max(0.0, s.hi - std::min(0.0, s.lo)));
      max_neg_min = std::max(max_neg_min, s.neg_min);
    }
    fill_sub(sub_len, [&](const Stats& s) {
      const double range = std::max(0.0, s.hi - std::min(0.0, s.lo));
      return range / (2 * (levels - 1)) + max_range / (2 * (levels - 1) * smax) +
             max_neg_min / (2 * smax) + kU * all.amax;
    });
  };
  switch (type) {
    case GgmlType::kQ8_0:
      std::fill(bound.begin(), bound.end(), all.amax / 254 * (1 + kU));
      break;
    case GgmlType::kQ8_K:
      std::fill(bound.begin(), bound.end(), all.amax / 254 * (1 + 1e-6));
      break;
    case GgmlType::kQ4_0:
      std::fill(bound.begin(), bound.end(), all.amax / 8 * (1 + 0x1p-8));
      break;
    case GgmlType::kQ5_0:
      std::fill(bound.begin(), bound.end(), all.amax / 16 * (1 + 0x1p-7));
      break;
    case GgmlType::kQ4_1:
      std::fill(bound.begin(), bound.end(), (all.hi - all.lo) / 30 + kU * all.amax);
      break;
    case GgmlType::kQ5_1:
      std::fill(bound.begin(), bound.end(), (all.hi - all.lo) / 62 + kU * all.amax);
      break;
    case GgmlType::kQ6_K:
      fill_sub(16, [&](const Stats& s) { return s.amax / 32 + all.amax / 254 * (1 + kU); });
      break;
    case GgmlType::kQ3_K:
      fill_sub(16, [&](const Stats& s) { return s.amax / 4 + all.amax / 62 * (1 + kU); });
      break;
    case GgmlType::kQ2_K:
      asym(16, 4, 15);
      break;
    case GgmlType::kQ4_K:
      asym(32, 16, 63);
      break;
    case GgmlType::kQ5_K:
      asym(32, 32, 63);
      break;
    default:
      break;
  }
  return bound;
}

// Rows of 512 values in the shapes of the conformance file: N(0,1), small, large, outliers,
// zeros, offset, heavy tails.
std::vector<float> TestData(std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x;
  for (int row = 0; row < 7; ++row) {
    for (int i = 0; i < 512; ++i) {
      float v = normal(rng);
      switch (row) {
        case 1:
          v *= 0.02f;
          break;
        case 2:
          v *= 30.0f;
          break;
        case 3:
          if (i % 97 == 5) v = 25.0f;
          break;
        case 4:
          v = 0.0f;
          break;
        case 5:
          v += 3.0f;
          break;
        case 6:
          v = 0.3f * v / (std::fabs(normal(rng)) + 0.05f);
          break;
        default:
          break;
      }
      x.push_back(v);
    }
  }
  return x;
}

class QuantizeRoundTripTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(QuantizeRoundTripTest, ErrorWithinDocumentedBound) {
  const GgmlType type = GetParam();
  const QuantTraits* t = FindQuantTraits(type);
  std::mt19937_64 rng(1234 + static_cast<int>(type));
  for (int trial = 0; trial < 4; ++trial) {
    const std::vector<float> x = TestData(rng);
    std::vector<uint8_t> q(x.size() / t->block_elems * t->block_bytes);
    ASSERT_TRUE(QuantizeFromFloat(type, x, absl::MakeSpan(q)).ok());
    std::vector<float> y(x.size());
    ASSERT_TRUE(DequantizeToFloat(type, q, x.size(), y.data()).ok());
    const int be = type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16
                       ? 1
                       : t->block_elems;
    for (size_t b = 0; b < x.size() / be; ++b) {
      const float* xb = x.data() + b * be;
      std::vector<double> bound;
      if (be == 1) {
        const double rel = type == GgmlType::kF32 ? 0 : type == GgmlType::kF16 ? 0x1p-11 : 0x1p-8;
        bound = {std::fabs(xb[0]) * rel + (type == GgmlType::kF16 ? 0x1p-25 : 0.0)};
      } else {
        bound = Bounds(type, xb, be);
      }
      for (int e = 0; e < be; ++e) {
        const size_t i = b * be + e;
        ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), bound[e])
            << t->name << " element " << i << ": x " << x[i] << " decoded " << y[i];
      }
    }
  }
}

std::vector<GgmlType> QuantizableTypes() {
  std::vector<GgmlType> out;
  for (const QuantTraits& t : SupportedQuantTypes()) {
    if (t.quantize != nullptr) out.push_back(t.type);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantizeRoundTripTest, ::testing::ValuesIn(QuantizableTypes()),
                         [](const auto& info) {
                           return std::string(FindQuantTraits(info.param)->name);
                         });

TEST(QuantizeTest, ShapeAndTypeErrors) {
  std::vector<float> x(100);
  std::vector<uint8_t> out(1000);
  EXPECT_EQ(QuantizeFromFloat(GgmlType::kQ4_K, x, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
  x.resize(256);
  EXPECT_EQ(QuantizeFromFloat(GgmlType::kQ4_K, x, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);  // wrong destination size
  out.resize(144);
  EXPECT_TRUE(QuantizeFromFloat(GgmlType::kQ4_K, x, absl::MakeSpan(out)).ok());
  EXPECT_EQ(QuantizeFromFloat(GgmlType::kIQ4_XS, x, absl::MakeSpan(out)).code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(CanQuantize(GgmlType::kIQ4_NL));
  EXPECT_TRUE(CanQuantize(GgmlType::kQ6_K));
}

}  // namespace
}  // namespace tessera::quant
