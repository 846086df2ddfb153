// The CUDA decoders (kernels/cuda/quant_decode.cuh) compiled for the host: every element of
// every supported type must equal common/quant's reference decoder bit for bit, and the
// quant dispatch must reach every type. No GPU needed; the device build of the same source
// is checked by cuda_matmul_test on a GPU.
#include <cstring>
#include <random>
#include <vector>

#include "common/quant/dequantize.h"
#include "common/quant/type_traits.h"
#include "gtest/gtest.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/quant_decode.cuh"
#include "tests/unit/quant_test_util.h"

namespace tessera::cuda {
namespace {

using gguf::GgmlType;

// Decodes n elements with the CUDA decoder of `type`, through the kernels' dispatch macro.
bool DecodeOnHost(GgmlType type, const uint8_t* src, int64_t n, float* out, int* elems,
                  int* bytes) {
  bool found = true;
  TESSERA_DISPATCH_QUANT(type, kT, found = false, {
    for (int64_t i = 0; i < n; ++i) out[i] = device::RowElem<kT>(src, i);
    *elems = device::Decoder<kT>::kElems;
    *bytes = device::Decoder<kT>::kBytes;
  });
  return found;
}

TEST(CudaDecoders, BitExactWithTheReferenceForEveryType) {
  std::mt19937_64 rng(50);
  const int64_t n = 256 * 64;
  const GgmlType types[] = {GgmlType::kF32,  GgmlType::kF16,    GgmlType::kBF16,  GgmlType::kQ4_0,
                            GgmlType::kQ4_1, GgmlType::kQ5_0,   GgmlType::kQ5_1,  GgmlType::kQ8_0,
                            GgmlType::kQ2_K, GgmlType::kQ3_K,   GgmlType::kQ4_K,  GgmlType::kQ5_K,
                            GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS};
  for (GgmlType type : types) {
    SCOPED_TRACE(quant::FindQuantTraits(type)->name);
    const std::vector<uint8_t> bytes = quant::testing::RandomBlocks(type, n, rng);
    std::vector<float> want(n), got(n);
    ASSERT_TRUE(quant::DequantizeToFloat(type, bytes, n, want.data()).ok());
    int elems = 0, block_bytes = 0;
    ASSERT_TRUE(DecodeOnHost(type, bytes.data(), n, got.data(), &elems, &block_bytes));
    // The decoder's geometry is the launch helpers' (and the spec table's).
    absl::StatusOr<QuantGeometry> g = CudaQuantGeometry(type);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(elems, g->block_elems);
    EXPECT_EQ(block_bytes, g->block_bytes);
    int mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (std::memcmp(&got[i], &want[i], 4) != 0 && mismatches++ < 5) {
        ADD_FAILURE() << "element " << i << " (block " << i / elems << ", position " << i % elems
                      << "): cuda decoder " << got[i] << ", reference " << want[i];
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(CudaDecoders, DispatchRejectsOtherTypes) {
  float out = 0;
  int elems = 0, bytes = 0;
  const uint8_t block[64] = {};
  EXPECT_FALSE(DecodeOnHost(GgmlType::kIQ2_XXS, block, 1, &out, &elems, &bytes));
  EXPECT_FALSE(DecodeOnHost(GgmlType::kQ8_K, block, 1, &out, &elems, &bytes));
}

}  // namespace
}  // namespace tessera::cuda
