#include "kernels/cuda/staging_plan.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::cuda {
namespace {

using model::ByteRange;
using model::TensorShard;
using ::testing::HasSubstr;

// Byte b of part p of the simulated files.
uint8_t FileByte(uint32_t part, uint64_t offset) {
  return static_cast<uint8_t>((offset * 131 + part * 17 + (offset >> 8)) & 0xff);
}

// Runs the plan as the worker would (buffers, reads, copies in order, checking each buffer is
// not refilled before its previous copy) and returns the device image.
std::vector<int> Execute(const StagingPlan& plan, const StagingOptions& o) {
  std::vector<std::vector<uint8_t>> buffers(o.buffers, std::vector<uint8_t>(o.buffer_bytes));
  std::vector<int> device(plan.device_bytes, -1);  // -1: never written
  std::vector<int64_t> last_user(o.buffers, -1);
  for (size_t t = 0; t < plan.transfers.size(); ++t) {
    const StagingTransfer& tr = plan.transfers[t];
    EXPECT_GE(tr.buffer, 0);
    EXPECT_LT(tr.buffer, o.buffers);
    // The buffer's previous user must be exactly the transfer the plan waits for.
    EXPECT_EQ(tr.reuse_after, last_user[tr.buffer]) << "transfer " << t;
    last_user[tr.buffer] = static_cast<int64_t>(t);
    EXPECT_LE(tr.bytes, o.buffer_bytes);
    for (const StagingRead& r : tr.reads) {
      EXPECT_LE(r.buffer_offset + r.length, tr.bytes);
      for (uint64_t i = 0; i < r.length; ++i) {
        buffers[tr.buffer][r.buffer_offset + i] = FileByte(r.part, r.file_offset + i);
      }
    }
    EXPECT_LE(tr.device_offset + tr.bytes, plan.device_bytes + o.alignment);
    for (uint64_t i = 0; i < tr.bytes && tr.device_offset + i < plan.device_bytes; ++i) {
      device[tr.device_offset + i] = buffers[tr.buffer][i];
    }
  }
  return device;
}

// What the device must hold: each tensor's pieces in order, from its aligned offset.
void ExpectImage(const std::vector<TensorShard>& shards, const StagingPlan& plan,
                 const std::vector<int>& device, uint64_t alignment) {
  uint64_t cursor = 0;
  ASSERT_EQ(plan.tensor_offsets.size(), shards.size());
  for (size_t s = 0; s < shards.size(); ++s) {
    cursor = (cursor + alignment - 1) / alignment * alignment;
    EXPECT_EQ(plan.tensor_offsets[s], cursor);
    for (const ByteRange& r : shards[s].ranges) {
      for (uint64_t c = 0; c < r.count; ++c) {
        for (uint64_t i = 0; i < r.length; ++i, ++cursor) {
          ASSERT_EQ(device[cursor], FileByte(r.part, r.offset + c * r.stride + i))
              << "shard " << s << " piece " << c << " byte " << i;
        }
      }
    }
  }
  EXPECT_EQ(plan.device_bytes, cursor);
}

TEST(StagingPlan, ContiguousAndStridedShardsLandInOrder) {
  std::vector<TensorShard> shards(3);
  shards[0].ranges = {ByteRange{.part = 0, .offset = 100, .length = 1000}};
  // A column shard: 7 rows of 90 bytes out of rows of 300.
  shards[1].ranges = {
      ByteRange{.part = 1, .offset = 5000, .length = 90, .stride = 300, .count = 7}};
  shards[2].ranges = {ByteRange{.part = 0, .offset = 0, .length = 33},
                      ByteRange{.part = 2, .offset = 77, .length = 555}};
  StagingOptions o;
  o.buffer_bytes = 256;
  o.buffers = 2;
  o.alignment = 64;
  absl::StatusOr<StagingPlan> plan = PlanStagingUpload(shards, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->file_bytes, 1000u + 630u + 33u + 555u);
  std::vector<int> device = Execute(*plan, o);
  ExpectImage(shards, *plan, device, o.alignment);
  // Buffers alternate, so reading transfer t+1 overlaps copying transfer t.
  for (size_t t = 1; t < plan->transfers.size(); ++t) {
    EXPECT_NE(plan->transfers[t].buffer, plan->transfers[t - 1].buffer);
  }
}

TEST(StagingPlan, FullBuffersAndMergedReads) {
  // One 10-byte-aligned contiguous tensor of 1 MiB through 64 KiB buffers: 16 transfers,
  // each one full read.
  std::vector<TensorShard> shards(1);
  shards[0].ranges = {ByteRange{.part = 0, .offset = 4096, .length = 1 << 20}};
  StagingOptions o;
  o.buffer_bytes = 64 << 10;
  absl::StatusOr<StagingPlan> plan = PlanStagingUpload(shards, o);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->transfers.size(), 16u);
  for (size_t t = 0; t < 16; ++t) {
    const StagingTransfer& tr = plan->transfers[t];
    ASSERT_EQ(tr.reads.size(), 1u);
    EXPECT_EQ(tr.reads[0].file_offset, 4096 + t * (64 << 10));
    EXPECT_EQ(tr.bytes, 64u << 10);
    EXPECT_EQ(tr.device_offset, t * (64 << 10));
  }
  // Pieces that touch in the file (stride == length) become one read.
  shards[0].ranges = {ByteRange{.part = 3, .offset = 0, .length = 10, .stride = 10, .count = 5}};
  o.buffer_bytes = 1000;
  plan = PlanStagingUpload(shards, o);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->transfers.size(), 1u);
  ASSERT_EQ(plan->transfers[0].reads.size(), 1u);
  EXPECT_EQ(plan->transfers[0].reads[0].length, 50u);
}

TEST(StagingPlan, TripleBuffering) {
  std::vector<TensorShard> shards(1);
  shards[0].ranges = {ByteRange{.part = 0, .offset = 0, .length = 1000}};
  StagingOptions o;
  o.buffer_bytes = 100;
  o.buffers = 3;
  absl::StatusOr<StagingPlan> plan = PlanStagingUpload(shards, o);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->transfers.size(), 10u);
  EXPECT_EQ(plan->transfers[5].buffer, 2);
  EXPECT_EQ(plan->transfers[5].reuse_after, 2);
  ExpectImage(shards, *plan, Execute(*plan, o), o.alignment);
}

TEST(StagingPlan, RejectsBadRangesAndOptions) {
  std::vector<TensorShard> shards(2);
  shards[1].mapping = 42;
  shards[1].ranges = {ByteRange{.part = 0, .offset = 0, .length = 100, .stride = 50, .count = 3}};
  absl::StatusOr<StagingPlan> plan = PlanStagingUpload(shards);
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("shard 1 (tensor mapping 42) range 0"));
  shards[1].ranges[0].count = 0;
  EXPECT_FALSE(PlanStagingUpload(shards).ok());
  shards[1].ranges.clear();
  StagingOptions o;
  o.buffers = 0;
  EXPECT_FALSE(PlanStagingUpload(shards, o).ok());
  o.buffers = 2;
  o.alignment = 48;
  EXPECT_THAT(std::string(PlanStagingUpload(shards, o).status().message()),
              HasSubstr("not a power of two"));
}

TEST(StagingPlan, EmptyShardsStillGetOffsets) {
  std::vector<TensorShard> shards(2);
  absl::StatusOr<StagingPlan> plan = PlanStagingUpload(shards);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->transfers.empty());
  EXPECT_EQ(plan->tensor_offsets, (std::vector<uint64_t>{0, 0}));
}

}  // namespace
}  // namespace tessera::cuda
