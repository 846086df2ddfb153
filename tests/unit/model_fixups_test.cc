// The kv_b fixup against a float64 reconstruction, and the dequantize fixup against values
// decoded by hand.
#include <random>

#include "common/gguf/writer.h"
#include "common/model/fixups.h"
#include "common/util/half.h"
#include "gtest/gtest.h"

namespace tessera::model {
namespace {

TEST(KvBFixup, SplitMatchesTheConverterAndReassemblesExactly) {
  const KvBShape s{3, 5, 4, 7};  // H, n (nope), v, c: awkward sizes on purpose
  const int64_t H = s.heads, n = s.nope, v = s.v, c = s.latent;
  std::mt19937 rng(7);
  std::normal_distribution<double> normal;
  // HF kv_b_proj [H*(n+v)][c] in float64, and its float32 copy.
  std::vector<double> kv64(H * (n + v) * c);
  for (double& x : kv64) x = normal(rng);
  std::vector<float> kv(kv64.begin(), kv64.end());

  std::vector<float> k_b(H * n * c), v_b(H * v * c);
  ASSERT_TRUE(SplitKvB(s, kv, absl::MakeSpan(k_b), absl::MakeSpan(v_b)).ok());
  // The converter's recipe (spec 10.4), written independently: view kv_b as [H][n+v][c];
  // k_b = transpose of the first n rows per head -> [H][c][n]; v_b = the next v rows [H][v][c].
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t row = 0; row < n + v; ++row) {
      for (int64_t j = 0; j < c; ++j) {
        double want = kv64[(h * (n + v) + row) * c + j];
        float got = row < n ? k_b[(h * c + j) * n + row] : v_b[(h * v + (row - n)) * c + j];
        EXPECT_EQ(static_cast<double>(got), static_cast<double>(static_cast<float>(want)));
      }
    }
  }
  std::vector<float> back(kv.size(), -1.0f);
  ASSERT_TRUE(ReassembleKvB(s, k_b, v_b, absl::MakeSpan(back)).ok());
  EXPECT_EQ(back, kv);
}

TEST(KvBFixup, RejectsMismatchedSizes) {
  std::vector<float> a(10), b(10), c(10);
  EXPECT_FALSE(SplitKvB({1, 2, 3, 4}, a, absl::MakeSpan(b), absl::MakeSpan(c)).ok());
  EXPECT_FALSE(ReassembleKvB({0, 2, 3, 4}, a, b, absl::MakeSpan(c)).ok());
}

TEST(DequantizeFixup, DecodesQ8_0AndF16ByType) {
  // One Q8_0 block: d = 0.5 (fp16 0x3800), qs = -16..15 -> values -8.0 .. 7.5.
  std::vector<uint8_t> block(34);
  block[0] = 0x00;
  block[1] = 0x38;
  for (int i = 0; i < 32; ++i) block[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(i - 16));
  std::vector<uint16_t> halves = {FloatToFp16(1.5f), FloatToFp16(-0.25f)};
  gguf::GgufWriter w;
  ASSERT_TRUE(w.AddTensor("router", {32, 1}, gguf::GgmlType::kQ8_0, block).ok());
  ASSERT_TRUE(w.AddTensor("h", {2}, gguf::GgmlType::kF16,
                          {reinterpret_cast<const uint8_t*>(halves.data()), 4})
                  .ok());
  std::string path = ::testing::TempDir() + "/dequant_fixup.gguf";
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto m = gguf::GgufModel::Open(path);
  ASSERT_TRUE(m.ok());
  auto r = DequantizeTensor(*m, *m->FindTensor("router"));
  ASSERT_TRUE(r.ok()) << r.status();
  for (int i = 0; i < 32; ++i) EXPECT_EQ((*r)[i], 0.5f * static_cast<float>(i - 16));
  auto h = DequantizeTensor(*m, *m->FindTensor("h"));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, (std::vector<float>{1.5f, -0.25f}));
}

}  // namespace
}  // namespace tessera::model
