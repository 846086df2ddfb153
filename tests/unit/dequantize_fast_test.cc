// The optimised decoders of every instruction-set level the host has return the reference
// decoder's bits on random blocks (random quants, finite scales).
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/quant/type_traits.h"
#include "gtest/gtest.h"
#include "kernels/cpu/dequantize_fast.h"
#include "tests/unit/quant_test_util.h"

namespace tessera::cpu {
namespace {

class DequantizeFastTest : public ::testing::TestWithParam<gguf::GgmlType> {};

TEST_P(DequantizeFastTest, BitExactWithReference) {
  const quant::QuantTraits* t = quant::FindQuantTraits(GetParam());
  std::mt19937_64 rng(99 + static_cast<int>(GetParam()));
  // 3 × 256 elements; plain types also at an odd length to exercise the scalar tails.
  for (int64_t n : {int64_t{768}, t->block_elems == 1 ? int64_t{37} : int64_t{768}}) {
    const std::vector<uint8_t> bytes = quant::testing::RandomBlocks(GetParam(), n, rng);
    std::vector<float> want(n), got(n);
    t->dequantize(bytes.data(), want.data(), n);
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
      if (!IsaSupported(isa)) continue;
      DequantizeRowFn fast = FastDequantizer(GetParam(), isa);
      ASSERT_NE(fast, nullptr);
      std::fill(got.begin(), got.end(), -1.0f);
      fast(bytes.data(), got.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
            << t->name << " " << FastDequantizerName(GetParam(), isa) << " element " << i << ": "
            << got[i] << " vs reference " << want[i];
      }
    }
  }
}

std::vector<gguf::GgmlType> AllTypes() {
  std::vector<gguf::GgmlType> out;
  for (const quant::QuantTraits& t : quant::SupportedQuantTypes()) out.push_back(t.type);
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantizeFastTest, ::testing::ValuesIn(AllTypes()),
                         [](const auto& info) {
                           return std::string(quant::FindQuantTraits(info.param)->name);
                         });

TEST(DequantizeFastTest, HotTypesHaveAnAvx2Decoder) {
  if (!IsaSupported(Isa::kAvx2)) GTEST_SKIP() << "host has no AVX2";
  for (auto type : {gguf::GgmlType::kQ4_K, gguf::GgmlType::kQ6_K, gguf::GgmlType::kQ8_0,
                    gguf::GgmlType::kQ4_0, gguf::GgmlType::kQ5_K, gguf::GgmlType::kF16}) {
    EXPECT_STREQ(FastDequantizerName(type, Isa::kAvx2), "avx2");
  }
  EXPECT_STREQ(FastDequantizerName(gguf::GgmlType::kQ4_K, Isa::kScalar), "scalar");
}

}  // namespace
}  // namespace tessera::cpu
