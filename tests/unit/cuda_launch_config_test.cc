#include "kernels/cuda/launch_config.h"

#include "kernels/cuda/kernel_checks.h"

#include <algorithm>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::cuda {
namespace {

using gguf::GgmlType;
using ::testing::HasSubstr;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(CudaQuantGeometry, MatchesTheSpecTable) {
  // Spec section 15's table: elements and bytes per block.
  struct Row {
    GgmlType type;
    int elems, bytes;
  };
  const Row rows[] = {
      {GgmlType::kF32, 1, 4},      {GgmlType::kF16, 1, 2},      {GgmlType::kBF16, 1, 2},
      {GgmlType::kQ4_0, 32, 18},   {GgmlType::kQ4_1, 32, 20},   {GgmlType::kQ5_0, 32, 22},
      {GgmlType::kQ5_1, 32, 24},   {GgmlType::kQ8_0, 32, 34},   {GgmlType::kQ2_K, 256, 84},
      {GgmlType::kQ3_K, 256, 110}, {GgmlType::kQ4_K, 256, 144}, {GgmlType::kQ5_K, 256, 176},
      {GgmlType::kQ6_K, 256, 210}, {GgmlType::kIQ4_NL, 32, 18}, {GgmlType::kIQ4_XS, 256, 136}};
  for (const Row& r : rows) {
    absl::StatusOr<QuantGeometry> g = CudaQuantGeometry(r.type);
    ASSERT_TRUE(g.ok()) << static_cast<int>(r.type);
    EXPECT_EQ(g->block_elems, r.elems);
    EXPECT_EQ(g->block_bytes, r.bytes);
  }
  absl::StatusOr<QuantGeometry> iq2 = CudaQuantGeometry(GgmlType::kIQ2_XXS);
  EXPECT_EQ(iq2.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(iq2.status()), HasSubstr("type id 16"));
}

TEST(CudaLaunch, RowBytesMustMatchTheType) {
  EXPECT_TRUE(CheckRowBytes(GgmlType::kQ4_K, 512, 288, "w").ok());
  EXPECT_TRUE(CheckRowBytes(GgmlType::kF16, 3, 6, "w").ok());
  EXPECT_THAT(Message(CheckRowBytes(GgmlType::kQ4_K, 512, 300, "gemv")),
              HasSubstr("gemv: rows of 512 q4_K values take 288 bytes, the matrix says 300"));
  EXPECT_THAT(Message(CheckRowBytes(GgmlType::kQ8_0, 40, 42, "gemm")),
              HasSubstr("row of 40 q8_0 values is not a whole number of 32-element blocks"));
}

TEST(CudaLaunch, AlignmentNamesThePointer) {
  alignas(16) char buffer[32] = {};
  EXPECT_TRUE(CheckAlignment(buffer, 16, "x").ok());
  absl::Status s = CheckAlignment(buffer + 2, 16, "gemv activations");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), HasSubstr("gemv activations"));
  EXPECT_THAT(Message(s), HasSubstr("16-byte aligned"));
}

// A misaligned weight address would fault on the device (the decoders read floats and 16-bit
// words), so the products refuse it before launching: float32 needs 4-byte alignment, every
// other type (all block sizes are even) 2, and so does a grouped product's member stride.
TEST(CudaLaunch, MisalignedWeightsAreRefused) {
  alignas(16) static uint8_t bytes[4096];
  DeviceMatrix w;
  w.type = gguf::GgmlType::kF32;
  w.rows = 4;
  w.cols = 32;
  w.row_bytes = 128;
  w.data = bytes + 2;
  absl::StatusOr<LaunchConfig> c = CheckGemv(w, 1);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), ::testing::HasSubstr("expected multiples of 4"));
  w.data = bytes + 4;
  EXPECT_TRUE(CheckGemv(w, 1).ok());
  w.type = gguf::GgmlType::kQ8_0;
  w.row_bytes = 34;
  w.data = bytes + 1;
  EXPECT_FALSE(CheckGemv(w, 1).ok());
  EXPECT_FALSE(CheckGatherRows(w, reinterpret_cast<const int32_t*>(bytes), 1, bytes).ok());
  w.data = bytes + 2;
  EXPECT_TRUE(CheckGemv(w, 1).ok());
  GroupedGemvCheck g;
  g.members = 2;
  g.tokens = 1;
  g.used = 1;
  g.x_stride = 32;
  g.y_stride = 4;
  g.has_ids = g.has_x = g.has_y = true;
  g.member_bytes = 4 * 34;
  EXPECT_TRUE(CheckGroupedGemv(w, g).ok());
  g.member_bytes = 4 * 34 + 1;
  EXPECT_FALSE(CheckGroupedGemv(w, g).ok());
}

TEST(CudaLaunch, DequantizeCoversEveryElement) {
  absl::StatusOr<LaunchConfig> c = DequantizeLaunch(GgmlType::kQ4_K, 256 * 1000);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->block, 256);
  EXPECT_EQ(c->grid_x, 1000);
  absl::StatusOr<LaunchConfig> odd = DequantizeLaunch(GgmlType::kQ4_K, 300);
  EXPECT_THAT(Message(odd.status()), HasSubstr("300 elements of q4_K"));
  EXPECT_THAT(Message(odd.status()), HasSubstr("multiple of 256"));
}

TEST(CudaLaunch, GemvOneWarpPerRow) {
  absl::StatusOr<LaunchConfig> c = GemvLaunch(GgmlType::kQ8_0, 4097, 4096, 1);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->block, kGemvWarps * 32);
  EXPECT_EQ(c->grid_x * kGemvWarps, 4100);  // ceil(4097 / 4) blocks of 4 rows
  EXPECT_THAT(Message(GemvLaunch(GgmlType::kQ6_K, 8, 4000, 1).status()),
              HasSubstr("row length 4000 of q6_K is not a multiple of its block (256)"));
  EXPECT_FALSE(GemvLaunch(GgmlType::kQ8_0, 0, 32, 1).ok());
  EXPECT_FALSE(GemvLaunch(GgmlType::kQ8_0, 8, 32, 0).ok());
  DeviceLimits tiny;
  tiny.max_grid_x = 10;
  EXPECT_THAT(Message(GemvLaunch(GgmlType::kQ8_0, 44, 32, 1, tiny).status()),
              HasSubstr("needs 11 blocks, the device allows 10"));
}

TEST(CudaLaunch, GemmScratchRows) {
  // 1 MiB of fp16 scratch holds 128 rows of 4096.
  EXPECT_EQ(*GemmScratchRows(10000, 4096, 2, 1 << 20), 128);
  EXPECT_EQ(*GemmScratchRows(100, 4096, 2, 1 << 20), 100);  // whole matrix fits
  absl::StatusOr<int64_t> small = GemmScratchRows(10, 4096, 4, 1000);
  EXPECT_EQ(small.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(small.status()), HasSubstr("one weight row of 4096 values needs 16384"));
}

TEST(CudaLaunch, GemmTilesCoverRowsAndTokens) {
  // 100 rows x 37 tokens: 2 row tiles of 64 (the second partial), 1 token tile of 128.
  absl::StatusOr<LaunchConfig> c = GemmTilesLaunch(GgmlType::kQ4_K, 100, 4096, 37);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->grid_x, 1);
  EXPECT_EQ(c->grid_y, 2);
  EXPECT_EQ(c->block, 8 * 32);  // 2 x 4 warps of 32 x 32 outputs: 64 rows x 128 tokens
  EXPECT_EQ(kGemmTileWarps * 32 * 32, kGemmTileRows * kGemmTileTokens);
  EXPECT_EQ(c->shared_bytes, 0u);  // static shared memory only
  // (64 + 128) rows of (32 + 8) 16-bit values, and a 16 x 16 float stage per warp.
  EXPECT_EQ(GemmTilesSharedBytes(), 192u * 40 * 2 + 8 * 256 * 4);
  absl::StatusOr<LaunchConfig> big = GemmTilesLaunch(GgmlType::kF16, 152064, 8192, 4097);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->grid_x, 33);    // ceil(4097 / 128)
  EXPECT_EQ(big->grid_y, 2376);  // 152064 / 64
  EXPECT_THAT(Message(GemmTilesLaunch(GgmlType::kQ6_K, 8, 4000, 1).status()),
              HasSubstr("row length 4000 of q6_K is not a multiple of its block (256)"));
  EXPECT_FALSE(GemmTilesLaunch(GgmlType::kQ8_0, 0, 32, 1).ok());
  EXPECT_FALSE(GemmTilesLaunch(GgmlType::kQ8_0, 8, 32, 0).ok());
  EXPECT_THAT(Message(GemmTilesLaunch(GgmlType::kIQ2_XXS, 8, 256, 1).status()),
              HasSubstr("type id 16"));
  // More rows than 65535 row tiles; a device without 48 KiB of shared memory.
  EXPECT_THAT(Message(GemmTilesLaunch(GgmlType::kF16, int64_t{65536} * 64, 32, 1).status()),
              HasSubstr("need 65536 row tiles of 64, the device allows 65535"));
  DeviceLimits small;
  small.max_shared_bytes = 16 * 1024;
  EXPECT_THAT(Message(GemmTilesLaunch(GgmlType::kF16, 64, 32, 1, small).status()),
              HasSubstr("exceed the device's 1024 and 16384"));
}

// GroupedGemmTiles: GemmTiles' rows; 450 choices over 5 members need at most ⌈450 / 128⌉ = 4
// full-or-partial tiles plus one partial tile per bucket (5 members and the others).
TEST(CudaLaunch, GroupedGemmTilesAddOnePartialTilePerBucket) {
  absl::StatusOr<LaunchConfig> c = GroupedGemmTilesLaunch(GgmlType::kQ4_K, 100, 4096, 450, 5);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->grid_x, 4 + 5 + 1);
  EXPECT_EQ(c->grid_y, 2);
  EXPECT_EQ(c->block, kGemmTileWarps * kWarpSize);
  DeviceLimits small;
  small.max_grid_x = 9;
  EXPECT_THAT(Message(GroupedGemmTilesLaunch(GgmlType::kQ4_K, 100, 4096, 450, 5, small).status()),
              HasSubstr("grouped gemm tiles: needs 10 blocks, the device allows 9"));
  EXPECT_FALSE(GroupedGemmTilesLaunch(GgmlType::kQ6_K, 8, 4000, 10, 2).ok());  // GemmTiles' checks
}

TEST(CudaLaunch, RowKernelsUseAPowerOfTwoUpToTheLimit) {
  absl::StatusOr<LaunchConfig> c = RowLaunch("rmsnorm", 7, 4096);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->grid_x, 7);
  EXPECT_EQ(c->block, 1024);
  EXPECT_EQ(c->shared_bytes, 32 * sizeof(float));
  EXPECT_EQ(RowLaunch("softmax", 1, 100)->block, 128);
  EXPECT_EQ(RowLaunch("softmax", 1, 1)->block, 32);
  EXPECT_THAT(Message(RowLaunch("rmsnorm", 3, 0).status()), HasSubstr("cuda rmsnorm: 3 rows of 0"));
}

TEST(CudaLaunch, Rope) {
  absl::StatusOr<LaunchConfig> c = RopeLaunch(5, 32, 128, 64);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->grid_x, 5);
  EXPECT_EQ(c->grid_y, 32);
  EXPECT_EQ(c->block, 32);  // 32 pairs
  EXPECT_EQ(RopeLaunch(1, 1, 576, 576)->block, 288);
  EXPECT_THAT(Message(RopeLaunch(1, 8, 64, 65).status()), HasSubstr("n_rot 65"));
  EXPECT_THAT(Message(RopeLaunch(1, 8, 64, 128).status()), HasSubstr("head dimension 64"));
}

TEST(CudaLaunch, AttentionPicksTheKernelWidth) {
  int per_lane = 0;
  AttentionShape gqa{
      .queries = 3, .heads = 32, .kv_heads = 8, .d_k = 128, .d_v = 128, .block_size = 16};
  absl::StatusOr<LaunchConfig> c = AttentionLaunch(gqa, &per_lane);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(per_lane, 4);
  EXPECT_EQ(c->grid_x, 3);
  EXPECT_EQ(c->grid_y, 32);
  EXPECT_EQ(c->shared_bytes, kAttentionWarps * (2 + 4 * 32) * sizeof(float));
  // MLA: one latent head of 576 (512 + 64), values the first 512.
  AttentionShape mla{
      .queries = 1, .heads = 128, .kv_heads = 1, .d_k = 576, .d_v = 512, .block_size = 64};
  ASSERT_TRUE(AttentionLaunch(mla, &per_lane).ok());
  EXPECT_EQ(per_lane, 18);
  AttentionShape d96 = gqa;
  d96.d_k = d96.d_v = 96;  // three per lane: the four-wide instance
  ASSERT_TRUE(AttentionLaunch(d96, &per_lane).ok());
  EXPECT_EQ(per_lane, 4);
  AttentionShape bad = gqa;
  bad.kv_heads = 5;
  EXPECT_THAT(Message(AttentionLaunch(bad, &per_lane).status()),
              HasSubstr("32 query heads are not a multiple of 5 KV heads"));
  bad = gqa;
  bad.d_k = 1024;
  EXPECT_THAT(Message(AttentionLaunch(bad, &per_lane).status()),
              HasSubstr("head dimension 1024 exceeds 576"));
}

// The local heads of each KV head (what the decode and tensor-core kernels walk): every local
// head exactly once, in order, on the KV head the model gives it — whole groups, and ranks
// that cut groups (heads 2..4 in groups of 4: KV heads 0 and 1 of the rank).
TEST(CudaLaunch, KvHeadRunsCoverTheLocalHeadsOnce) {
  struct Case {
    int heads, kv_heads, head0, group;
  };
  for (const Case& c : {Case{32, 8, 0, 0}, Case{3, 2, 2, 4}, Case{5, 3, 2, 3}, Case{48, 1, 0, 0},
                        Case{6, 2, 8, 4}}) {
    SCOPED_TRACE(::testing::Message()
                 << c.heads << " heads from " << c.head0 << " in groups of " << c.group);
    int next = 0;
    for (int kv = 0; kv < c.kv_heads; ++kv) {
      int begin = -1, end = -1;
      KvHeadRun(c.heads, c.kv_heads, c.head0, c.group, kv, &begin, &end);
      ASSERT_EQ(begin, next);
      ASSERT_LT(begin, end);
      for (int h = begin; h < end; ++h) {
        const int want =
            c.group > 0 ? (c.head0 + h) / c.group - c.head0 / c.group : h / (c.heads / c.kv_heads);
        ASSERT_EQ(want, kv) << "head " << h;
      }
      next = end;
    }
    EXPECT_EQ(next, c.heads);
  }
}

// Tensor-core prefill: rows of (query, head) per KV head in tiles of kMmaRows, one grid row per
// KV head, 16-bit head dims of 16·n; the tile's shared memory within the device's opt-in.
TEST(CudaLaunch, MmaAttentionTilesQueryHeadRows) {
  AttentionShape gqa{
      .queries = 100, .heads = 32, .kv_heads = 8, .d_k = 128, .d_v = 128, .block_size = 16};
  absl::StatusOr<LaunchConfig> c = MmaAttentionLaunch(gqa, false, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->grid_x, (100 * 4 + kMmaRows - 1) / kMmaRows);
  EXPECT_EQ(c->grid_y, 8);
  EXPECT_EQ(c->block, kMmaWarps * kWarpSize);
  // q, k, v tiles of 32 x 128 halves, 32 x 32 scores and probabilities, 32 x 128 float
  // accumulators, 4 floats of state per row: within 48 KiB without the opt-in.
  EXPECT_EQ(c->shared_bytes, 3u * 32 * 128 * 2 + 32 * 32 * 6 + 32 * 128 * 4 + 32 * 16);
  EXPECT_EQ(c->shared_bytes, 47616u);
  AttentionShape rank{
      .queries = 10, .heads = 3, .kv_heads = 2, .d_k = 64, .d_v = 64, .block_size = 16};
  rank.head0 = 2;
  rank.group = 4;  // runs of 2 and 1 heads: the grid covers the longest possible, 3 · 10 rows
  c = MmaAttentionLaunch(rank, false, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->grid_x, 1);
  EXPECT_EQ(c->grid_y, 2);
  EXPECT_THAT(Message(MmaAttentionLaunch(gqa, false, 4).status()), HasSubstr("16-bit"));
  AttentionShape odd = gqa;
  odd.d_k = odd.d_v = 80 + 8;
  EXPECT_THAT(Message(MmaAttentionLaunch(odd, false, 2).status()),
              HasSubstr("d_k 88, d_v 88: expected multiples of 16"));
  // MLA: 16 heads over the latent (values = the keys' first 512): q and key tiles of 576, no
  // value tile, 32 x 512 float accumulators — 145,920 bytes, only with an H100's opt-in.
  AttentionShape mla{
      .queries = 40, .heads = 16, .kv_heads = 1, .d_k = 576, .d_v = 512, .block_size = 64};
  EXPECT_THAT(Message(MmaAttentionLaunch(mla, true, 2).status()),
              HasSubstr("needs 145920 bytes of shared memory, the device allows 49152"));
  DeviceLimits h100;
  h100.max_shared_optin = 227 * 1024;
  c = MmaAttentionLaunch(mla, true, 2, h100);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->shared_bytes, 2u * 32 * 576 * 2 + 32 * 32 * 6 + 32 * 512 * 4 + 32 * 16);
  EXPECT_EQ(c->grid_x, 40 * 16 / 32);
  EXPECT_EQ(c->grid_y, 1);
  DeviceLimits rtx;  // 99 KiB of opt-in: not enough
  rtx.max_shared_optin = 99 * 1024;
  EXPECT_FALSE(MmaAttentionLaunch(mla, true, 2, rtx).ok());
  AttentionShape wide = gqa;  // 64 heads per KV head: two tiles per query
  wide.heads = 64;
  wide.kv_heads = 1;
  DeviceLimits small;
  small.max_grid_x = 150;
  EXPECT_THAT(Message(MmaAttentionLaunch(wide, false, 2, small).status()),
              HasSubstr("needs 200 blocks"));
}

TEST(CudaLaunch, TopKAndSampling) {
  absl::StatusOr<LaunchConfig> c = TopKLaunch(4, 100000, 2048);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->grid_x, 4);
  EXPECT_EQ(c->block, kTopKThreads);
  EXPECT_FALSE(TopKLaunch(4, 100, 0).ok());
  absl::StatusOr<LaunchConfig> s = SamplingLaunch(32, 151936);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->grid_x, 32);
  EXPECT_EQ(s->block, kSamplingThreads);
  EXPECT_THAT(Message(SamplingLaunch(1, 0).status()), HasSubstr("vocabulary of 0"));
}

TEST(CudaLaunch, MoeRoutingChecksTheGroups) {
  // DeepSeek-V3: 256 experts in 8 groups, 4 groups kept, 8 used.
  MoeShape v3{.tokens = 9, .experts = 256, .used = 8, .groups = 8, .topk_groups = 4};
  absl::StatusOr<LaunchConfig> c = MoeRoutingLaunch(v3);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->grid_x, 3);  // four tokens per block
  MoeShape bad = v3;
  bad.groups = 7;
  EXPECT_THAT(Message(MoeRoutingLaunch(bad).status()),
              HasSubstr("256 experts do not split into 7 groups"));
  bad = v3;
  bad.topk_groups = 9;
  EXPECT_THAT(Message(MoeRoutingLaunch(bad).status()), HasSubstr("topk_group 9: expected 1..8"));
  bad = v3;
  bad.topk_groups = 1;
  bad.used = 40;
  EXPECT_THAT(Message(MoeRoutingLaunch(bad).status()), HasSubstr("k = 40"));
  bad = v3;
  bad.topk_groups = 1;
  bad.groups = 64;  // groups of 4 experts, one kept: only 4 candidates for k = 8
  EXPECT_THAT(Message(MoeRoutingLaunch(bad).status()), HasSubstr("cannot supply k = 8"));
  bad = v3;
  bad.experts = 1024;
  EXPECT_THAT(Message(MoeRoutingLaunch(bad).status()), HasSubstr("1024 experts exceed 512"));
}

// The decode kernel's key splits (the device and the emulator share these functions): every
// split below DecodeSplits holds at least one key, the splits tile [0, count) in order, each
// but the last is a whole number of key tiles, and they depend on the count alone.
TEST(CudaLaunch, DecodeSplitsTileEveryKeyOnce) {
  for (int count = 0; count <= 6000; ++count) {
    const int splits = DecodeSplits(count);
    ASSERT_GE(splits, 1);
    ASSERT_LE(splits, kDecodeMaxSplits);
    ASSERT_EQ(splits,
              count <= kDecodeSplitKeys ? 1 : std::min(kDecodeMaxSplits, (count + 255) / 256))
        << count;
    const int len = DecodeSplitLength(count, splits);
    ASSERT_EQ(len % kTiledKeys, 0) << count;
    int covered = 0;
    for (int s = 0; s < splits; ++s) {
      const int begin = s * len, end = std::min(count, begin + len);
      if (count > 0) {
        ASSERT_LT(begin, end) << "count " << count << " split " << s;
      }
      covered += std::max(0, end - begin);
    }
    ASSERT_EQ(covered, count);
    ASSERT_GE(splits * len, count);
  }
}

}  // namespace
}  // namespace tessera::cuda
