// The support table, type and shape errors, and hand-derived decodings of single blocks.
#include <cstring>
#include <string>
#include <vector>

#include "common/gguf/ggml_type.h"
#include "common/quant/blocks.h"
#include "common/quant/dequantize.h"
#include "common/quant/type_traits.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::quant {
namespace {

using gguf::GgmlType;
using ::testing::HasSubstr;

TEST(QuantTraitsTest, GeometryMatchesTheFormatTable) {
  for (const QuantTraits& t : SupportedQuantTypes()) {
    const gguf::GgmlTypeInfo* info = gguf::LookupGgmlType(t.type);
    ASSERT_NE(info, nullptr) << t.name;
    EXPECT_EQ(info->name, t.name);
    EXPECT_EQ(info->block_elems, static_cast<uint32_t>(t.block_elems)) << t.name;
    EXPECT_EQ(info->block_bytes, static_cast<uint32_t>(t.block_bytes)) << t.name;
    EXPECT_NE(t.dequantize, nullptr) << t.name;
  }
}

TEST(QuantTraitsTest, EveryRequiredTypeIsSupported) {
  for (const char* name : {"f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K",
                           "q3_K", "q4_K", "q5_K", "q6_K", "q8_K", "iq4_nl", "iq4_xs"}) {
    auto type = gguf::GgmlTypeFromName(name);
    ASSERT_TRUE(type.has_value()) << name;
    EXPECT_TRUE(CanDequantize(*type)) << name;
    EXPECT_TRUE(CheckTypeSupported(static_cast<uint32_t>(*type), "t").ok()) << name;
  }
}

TEST(QuantTraitsTest, UnsupportedTypesAreNamedWithTheTensor) {
  for (GgmlType type : {GgmlType::kIQ2_XXS, GgmlType::kIQ2_XS, GgmlType::kIQ2_S, GgmlType::kIQ3_XXS,
                        GgmlType::kIQ3_S, GgmlType::kIQ1_S, GgmlType::kIQ1_M, GgmlType::kTQ1_0,
                        GgmlType::kTQ2_0, GgmlType::kMXFP4, GgmlType::kQ8_1}) {
    const uint32_t id = static_cast<uint32_t>(type);
    absl::Status s = CheckTypeSupported(id, "blk.3.ffn_down.weight");
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("blk.3.ffn_down.weight"));
    EXPECT_THAT(std::string(s.message()), HasSubstr(gguf::GgmlTypeName(id)));
    EXPECT_THAT(std::string(s.message()), HasSubstr("not supported yet"));
    EXPECT_FALSE(CanDequantize(type));
  }
  absl::Status s = CheckTypeSupported(4, "x");  // a retired id
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST(QuantTraitsTest, RowLengthMustBeWholeBlocks) {
  absl::Status s = CheckRowLength(GgmlType::kQ4_K, 100, "blk.0.attn_q.weight");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("blk.0.attn_q.weight"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("256"));
  EXPECT_TRUE(CheckRowLength(GgmlType::kQ4_K, 512, "t").ok());
  EXPECT_TRUE(CheckRowLength(GgmlType::kF32, 7, "t").ok());
  EXPECT_FALSE(CheckRowLength(GgmlType::kQ8_0, 0, "t").ok());
}

TEST(DequantizeTest, ShapeErrors) {
  std::vector<uint8_t> bytes(2 * sizeof(BlockQ4_0));
  std::vector<float> out(64);
  absl::Status s = DequantizeToFloat(GgmlType::kQ4_0, bytes, 48, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  s = DequantizeToFloat(GgmlType::kQ4_0, absl::MakeSpan(bytes).subspan(0, 35), 64, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("36 bytes"));
  s = DequantizeToFloat(GgmlType::kIQ2_XXS, bytes, 256, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("iq2_xxs"));
}

// Decodes one block of `type` given as a struct.
template <typename Block>
std::vector<float> Decode(GgmlType type, const Block& block) {
  const int n = FindQuantTraits(type)->block_elems;
  std::vector<float> out(n);
  absl::Span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(&block), sizeof block);
  EXPECT_TRUE(DequantizeToFloat(type, bytes, n, out.data()).ok());
  return out;
}

constexpr uint16_t kHalfOne = 0x3C00;   // 1.0
constexpr uint16_t kHalfHalf = 0x3800;  // 0.5

// Expected values below are worked out by hand from spec section 15.
TEST(DequantizeTest, HandDecodedLegacyBlocks) {
  BlockQ4_0 q4{};
  q4.d = kHalfHalf;
  q4.qs[0] = 0x1F;  // element 0: 15 - 8 = 7; element 16: 1 - 8 = -7
  auto y = Decode(GgmlType::kQ4_0, q4);
  EXPECT_EQ(y[0], 3.5f);
  EXPECT_EQ(y[16], -3.5f);
  EXPECT_EQ(y[1], -4.0f);  // nibble 0

  BlockQ4_1 q41{};
  q41.d = kHalfHalf;
  q41.m = kHalfOne;
  q41.qs[3] = 0x42;  // element 3: 2·0.5 + 1; element 19: 4·0.5 + 1
  y = Decode(GgmlType::kQ4_1, q41);
  EXPECT_EQ(y[3], 2.0f);
  EXPECT_EQ(y[19], 3.0f);

  BlockQ5_0 q5{};
  q5.d = kHalfOne;
  q5.qh[0] = 0x01;  // bit 0 → element 0 gets +16
  q5.qh[2] = 0x02;  // bit 17 → element 17
  q5.qs[0] = 0x03;
  q5.qs[1] = 0x50;  // element 17: high nibble 5
  y = Decode(GgmlType::kQ5_0, q5);
  EXPECT_EQ(y[0], 3.0f);   // (3 | 16) - 16
  EXPECT_EQ(y[17], 5.0f);  // (5 | 16) - 16
  EXPECT_EQ(y[16], -16.0f);

  BlockQ8_0 q8{};
  q8.d = 0x3400;  // 0.25
  q8.qs[5] = -8;
  y = Decode(GgmlType::kQ8_0, q8);
  EXPECT_EQ(y[5], -2.0f);

  BlockIQ4_NL nl{};
  nl.d = kHalfOne;
  nl.qs[0] = 0x0F;
  y = Decode(GgmlType::kIQ4_NL, nl);
  EXPECT_EQ(y[0], 113.0f);
  EXPECT_EQ(y[16], -127.0f);
}

TEST(DequantizeTest, HandDecodedKQuantBlocks) {
  BlockQ4_K q4{};
  q4.d = kHalfOne;
  q4.dmin = kHalfHalf;
  q4.scales[0] = 2;  // sub-block 0: scale 2, min 3
  q4.scales[4] = 3;
  q4.scales[1] = 4;  // sub-block 1: scale 4, min 0
  q4.qs[0] = 0x75;   // element 0: 5; element 32 (sub-block 1): 7
  auto y = Decode(GgmlType::kQ4_K, q4);
  EXPECT_EQ(y[0], 1.0f * 2 * 5 - 0.5f * 3);
  EXPECT_EQ(y[32], 28.0f);

  BlockQ6_K q6{};
  q6.d = kHalfOne;
  q6.scales[0] = 3;
  q6.ql[0] = 0x07;
  q6.qh[0] = 0x02;  // top bits 2 → q = (7 | 32) - 32 = 7
  y = Decode(GgmlType::kQ6_K, q6);
  EXPECT_EQ(y[0], 21.0f);
  EXPECT_EQ(y[1], 3.0f * -32);

  BlockQ2_K q2{};
  q2.d = kHalfOne;
  q2.dmin = kHalfOne;
  q2.scales[2] = 0x13;  // sub-block 2 (h 0, j 1, k 0): scale 3, min 1
  q2.qs[0] = 0x0C;      // element 32 = bits 2..3 of qs[0] = 3
  y = Decode(GgmlType::kQ2_K, q2);
  EXPECT_EQ(y[32], 3.0f * 3 - 1.0f);

  BlockQ3_K q3{};
  q3.d = kHalfOne;
  // S_0 = (low 4 bits of scales[0] | high 2 bits of scales[8]) - 32: 5 | (2 << 4) = 37 → 5.
  q3.scales[0] = 0x05;
  q3.scales[8] = 0x02;
  q3.qs[0] = 0x02;     // element 0: q2 = 2
  q3.hmask[0] = 0x01;  // high bit set → no -4
  y = Decode(GgmlType::kQ3_K, q3);
  EXPECT_EQ(y[0], 10.0f);
  EXPECT_EQ(y[1], 5.0f * -4);  // q2 0, high bit clear

  BlockIQ4_XS xs{};
  xs.d = kHalfOne;
  xs.scales_l[0] = 0x03;  // sub-block 0: low 4 bits 3, high 2 bits from scales_h = 2 → 35
  xs.scales_h = 0x0002;
  xs.qs[0] = 0x08;  // K[8] = 1
  y = Decode(GgmlType::kIQ4_XS, xs);
  EXPECT_EQ(y[0], 3.0f);
}

}  // namespace
}  // namespace tessera::quant

namespace tessera::quant {
namespace {

// The word-wise scale unpackers used by the kernels agree with the spec-form ones.
TEST(BlockScalesTest, WordUnpackersMatchSpecForm) {
  uint64_t state = 0x12345678;
  for (int trial = 0; trial < 2000; ++trial) {
    uint8_t q[12];
    for (uint8_t& b : q) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      b = static_cast<uint8_t>(state >> 56);
    }
    uint64_t scales, mins;
    UnpackScalesMinsK4(q, &scales, &mins);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      UnpackScaleMinK4(j, q, &sc, &m);
      ASSERT_EQ((scales >> (8 * j)) & 0xFF, sc) << j;
      ASSERT_EQ((mins >> (8 * j)) & 0xFF, m) << j;
    }
    int s3[16];
    UnpackQ3KScales(q, s3);
    uint64_t lo, hi;
    UnpackBiasedScalesQ3K(q, &lo, &hi);
    for (int i = 0; i < 16; ++i) {
      const uint64_t biased = ((i < 8 ? lo : hi) >> (8 * (i % 8))) & 0xFF;
      ASSERT_EQ(static_cast<int>(biased) - 32, s3[i]) << i;
    }
  }
}

}  // namespace
}  // namespace tessera::quant
