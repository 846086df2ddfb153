#include "kernels/cuda/memory_planner.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::cuda {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST(GpuMemoryPlanner, KvGetsWhatIsLeftOfTheBudget) {
  // 80 GiB card, 0.5 GiB used by the driver/others, 0.9 utilization: budget 72 GiB;
  // 40 GiB weights, 2 GiB workspace: 72 - 0.5 - 40 - 2 = 29.5 GiB for KV.
  GpuMemoryRequest r;
  r.total_bytes = 80 * kGiB;
  r.free_bytes = 80 * kGiB - kGiB / 2;
  r.gpu_memory_utilization = 0.9;
  r.weight_bytes = 40 * kGiB;
  r.workspace_bytes = 2 * kGiB;
  r.kv_bytes_per_token = 128 * 1024;  // e.g. 32 layers x 8 KV heads x 128 x 2 (K, V) x f16
  r.block_tokens = 16;
  absl::StatusOr<GpuMemoryPlan> p = PlanGpuMemory(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->budget_bytes, 72 * kGiB);
  EXPECT_EQ(p->other_bytes, kGiB / 2);
  EXPECT_EQ(p->block_bytes, 2 * kMiB);
  // 29.5 GiB / 2 MiB = 15104 blocks exactly.
  EXPECT_EQ(p->kv_blocks, 15104);
  EXPECT_EQ(p->kv_tokens, 15104 * 16);
  EXPECT_EQ(p->kv_bytes, 15104 * 2 * kMiB);
  EXPECT_EQ(p->unused_bytes, 0u);
}

TEST(GpuMemoryPlanner, PartialBlockIsLeftUnused) {
  GpuMemoryRequest r;
  r.total_bytes = 1000;
  r.free_bytes = 1000;
  r.gpu_memory_utilization = 1.0;
  r.weight_bytes = 100;
  r.kv_bytes_per_token = 10;
  r.block_tokens = 4;  // 40-byte blocks: 900 / 40 = 22 blocks, 20 bytes over
  absl::StatusOr<GpuMemoryPlan> p = PlanGpuMemory(r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kv_blocks, 22);
  EXPECT_EQ(p->unused_bytes, 20u);
}

TEST(GpuMemoryPlanner, WeightsThatDoNotFitNameTheShortfall) {
  GpuMemoryRequest r;
  r.total_bytes = 80 * kGiB;
  r.free_bytes = 80 * kGiB;
  r.gpu_memory_utilization = 0.5;  // 40 GiB
  r.weight_bytes = 42 * kGiB;
  r.kv_bytes_per_token = kMiB;
  r.block_tokens = 1;
  absl::StatusOr<GpuMemoryPlan> p = PlanGpuMemory(r);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string m(p.status().message());
  EXPECT_THAT(m, HasSubstr("weights 42.00 GiB"));
  EXPECT_THAT(m, HasSubstr("allows 40.00 GiB"));
  // Missing: 42 GiB + 1 MiB block - 40 GiB = 2 GiB + 1 MiB.
  EXPECT_THAT(m, HasSubstr("needs 2.00 GiB more"));
  EXPECT_THAT(m, HasSubstr("raise --gpu-memory-utilization to at least 0.525"));
}

TEST(GpuMemoryPlanner, MinTokensAndMoreGpus) {
  GpuMemoryRequest r;
  r.total_bytes = 10 * kGiB;
  r.free_bytes = 10 * kGiB;
  r.gpu_memory_utilization = 0.9;
  r.weight_bytes = 8 * kGiB;
  r.kv_bytes_per_token = kMiB;
  r.block_tokens = 16;
  r.min_tokens = 4096;  // 4 GiB of KV: 12 GiB in all on a 10 GiB card
  absl::StatusOr<GpuMemoryPlan> p = PlanGpuMemory(r);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string m(p.status().message());
  EXPECT_THAT(m, HasSubstr("KV cache for 4096 tokens 4.00 GiB"));
  EXPECT_THAT(m, HasSubstr("needs 3.00 GiB more"));
  EXPECT_THAT(m, HasSubstr("use more GPUs"));
  r.min_tokens = 1000;  // 63 blocks = 1008 tokens, 0.98 GiB: fits in the 1 GiB left
  ASSERT_TRUE(PlanGpuMemory(r).ok());
  EXPECT_EQ(PlanGpuMemory(r)->kv_blocks, 64);  // floor(1.0 GiB / 16 MiB)
}

TEST(GpuMemoryPlanner, OthersCountAgainstTheBudget) {
  GpuMemoryRequest r;
  r.total_bytes = 100 * kMiB;
  r.free_bytes = 60 * kMiB;  // another process holds 40 MiB
  r.gpu_memory_utilization = 0.8;
  r.weight_bytes = 30 * kMiB;
  r.kv_bytes_per_token = kMiB;
  r.block_tokens = 1;
  absl::StatusOr<GpuMemoryPlan> p = PlanGpuMemory(r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kv_blocks, 10);  // 80 - 40 - 30
}

TEST(GpuMemoryPlanner, RejectsBadInput) {
  GpuMemoryRequest r;
  r.total_bytes = 100;
  r.free_bytes = 100;
  r.kv_bytes_per_token = 1;
  r.gpu_memory_utilization = 1.5;
  EXPECT_THAT(std::string(PlanGpuMemory(r).status().message()),
              HasSubstr("--gpu-memory-utilization 1.5: expected a value in (0, 1]"));
  r.gpu_memory_utilization = 0;
  EXPECT_EQ(PlanGpuMemory(r).status().code(), absl::StatusCode::kInvalidArgument);
  r.gpu_memory_utilization = 0.9;
  r.free_bytes = 200;
  EXPECT_THAT(std::string(PlanGpuMemory(r).status().message()),
              HasSubstr("free cannot exceed total"));
  r.free_bytes = 100;
  r.block_tokens = 0;
  EXPECT_EQ(PlanGpuMemory(r).status().code(), absl::StatusCode::kInvalidArgument);
  r.block_tokens = 16;
  r.kv_bytes_per_token = 0;
  EXPECT_THAT(std::string(PlanGpuMemory(r).status().message()), HasSubstr("no KV cache"));
}

TEST(GpuMemoryPlanner, FormatBytes) {
  EXPECT_EQ(FormatBytes(100), "100 B");
  EXPECT_EQ(FormatBytes(3 * kMiB / 2), "1.5 MiB");
  EXPECT_EQ(FormatBytes(5 * kGiB / 4), "1.25 GiB");
}

}  // namespace
}  // namespace tessera::cuda
