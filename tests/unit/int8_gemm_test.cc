// The int8 GEMM's vector operand preparation against the portable forms: the activation
// quantizer against activation_quant.h's (whose rounding is llama.cpp's) and the AVX-512
// weight unpackers against the scalar decoders, bit for bit. (The GEMM itself is checked
// against float64 in matmul_test.cc.)
#include "kernels/cpu/int8_gemm.h"

#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/quant_test_util.h"

namespace tessera::cpu {
namespace {

using gguf::GgmlType;

std::vector<float> Activations(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  // Awkward blocks: all zero, a tie between +max and −max, values on rounding midpoints.
  for (int i = 0; i < 32; ++i) x[i] = 0.0f;
  x[40] = 5.0f;
  x[41] = -5.0f;
  for (int i = 64; i < 96; ++i) x[i] = 0.5f * static_cast<float>(i - 80);
  return x;
}

TEST(Int8ActivationsTest, VectorQuantizerMatchesPortable) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "host has no AVX-512 VNNI";
  constexpr int64_t kBatch = 3;
  // 800 columns: 25 Q8_0 blocks, one past the vector quantizer's groups of 8.
  for (auto [type, kCols] : {std::pair{GgmlType::kQ4_K, int64_t{768}},
                             {GgmlType::kQ6_K, int64_t{768}},
                             {GgmlType::kQ8_0, int64_t{768}},
                             {GgmlType::kQ8_0, int64_t{800}}}) {
    const std::vector<float> x = Activations(kBatch * kCols, 1);
    const Int8GemmLayout* layout = FindInt8GemmLayout(type);
    ASSERT_NE(layout, nullptr);
    Int8ActivationBuffer vec, portable;
    vec.Reset(*layout, kBatch, kCols);
    portable.Reset(*layout, kBatch, kCols);
    vec.QuantizeRows(x.data(), 0, kBatch, Isa::kAvx512);
    portable.QuantizeRows(x.data(), 0, kBatch, Isa::kScalar);
    const Int8Activations a = vec.view(), b = portable.view();
    EXPECT_EQ(std::memcmp(a.q, b.q, kBatch * kCols), 0) << static_cast<int>(type);
    for (int64_t i = 0; i < kBatch * kCols / layout->act_block; ++i) {
      EXPECT_EQ(a.d[i], b.d[i]) << "block " << i;
    }
    for (int64_t g = 0; g < kBatch * kCols / layout->group; ++g) {
      EXPECT_EQ(a.gsum[g], b.gsum[g]) << "group " << g;
    }
    for (int64_t p = 0; layout->mins && p < kBatch * kCols / layout->group / 2; ++p) {
      EXPECT_EQ(a.gpair[p], b.gpair[p]) << "pair " << p;
    }
  }
}

// The AVX-512 panel unpackers (vector decode + word transposes) place the same quants as
// the portable decoders, and both give the same scales; a partial panel's padding lanes are
// zero either way. 800 columns end in half a 64-column transpose block.
TEST(Int8PanelTest, VectorUnpackMatchesPortable) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "host has no AVX-512 VNNI";
  constexpr int kRows = 13;
  std::mt19937_64 rng(5);
  for (auto [type, kCols] : {std::pair{GgmlType::kQ4_K, int64_t{512}},
                             {GgmlType::kQ5_K, int64_t{512}},
                             {GgmlType::kQ6_K, int64_t{512}},
                             {GgmlType::kQ8_0, int64_t{512}},
                             {GgmlType::kQ8_0, int64_t{800}},
                             {GgmlType::kQ4_0, int64_t{800}}}) {
    const Int8GemmLayout* layout = FindInt8GemmLayout(type);
    ASSERT_NE(layout, nullptr);
    const std::vector<uint8_t> w = quant::testing::RandomBlocks(type, kRows * kCols, rng);
    const size_t row_bytes = w.size() / kRows;
    Int8PanelBuffer vec, portable;
    vec.Unpack(*layout, w.data(), row_bytes, kRows, kCols, Isa::kAvx512);
    portable.Unpack(*layout, w.data(), row_bytes, kRows, kCols, Isa::kScalar);
    const Int8Panel a = vec.view(), b = portable.view();
    EXPECT_EQ(std::memcmp(a.q, b.q, kCols * kInt8PanelRows), 0) << static_cast<int>(type);
    const int64_t n_groups = kCols / layout->group, n_blocks = kCols / layout->act_block;
    for (int64_t i = 0; i < n_groups * kInt8PanelRows; ++i) EXPECT_EQ(a.scale[i], b.scale[i]);
    for (int64_t i = 0; i < n_blocks * kInt8PanelRows; ++i) EXPECT_EQ(a.d[i], b.d[i]);
    // Lane 13 (padding) of chunk 0 is zero.
    EXPECT_EQ(a.q[4 * kRows], 0);
  }
}

}  // namespace
}  // namespace tessera::cpu
