// The pinned, double-buffered upload (kernels/cuda/staging_upload.h) on a device: the device
// image must equal each shard's byte ranges laid end to end from its aligned offset, read
// straight from the simulated files. Label `gpu`.
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/staging_upload.h"
#include "tests/unit/cuda_test_util.h"

namespace tessera::cuda {
namespace {

using model::ByteRange;
using model::TensorShard;
using testing::DeviceBuffer;

class CudaStagingUpload : public testing::GpuTest {};

TEST_F(CudaStagingUpload, DeviceImageMatchesTheRanges) {
  std::mt19937_64 rng(40);
  std::vector<std::vector<uint8_t>> files(2, std::vector<uint8_t>(1 << 20));
  for (auto& f : files) {
    for (auto& b : f) b = static_cast<uint8_t>(rng());
  }
  std::vector<TensorShard> shards(3);
  shards[0].ranges = {ByteRange{.part = 0, .offset = 1000, .length = 300000}};
  shards[1].ranges = {
      ByteRange{.part = 1, .offset = 17, .length = 999, .stride = 4096, .count = 100}};
  shards[2].ranges = {ByteRange{.part = 0, .offset = 500000, .length = 77},
                      ByteRange{.part = 1, .offset = 900000, .length = 65536}};
  StagingOptions options;
  options.buffer_bytes = 64 << 10;
  absl::StatusOr<StagingPlan> plan = PlanStagingUpload(shards, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  DeviceBuffer device(plan->device_bytes);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  auto read = [&](uint32_t part, uint64_t offset, uint64_t length, void* dst) {
    std::memcpy(dst, files[part].data() + offset, length);
    return absl::OkStatus();
  };
  ASSERT_TRUE(RunStagingUpload(*plan, options, read, device.get(), stream).ok());
  const std::vector<uint8_t> image = device.Download<uint8_t>(plan->device_bytes);
  for (size_t s = 0; s < shards.size(); ++s) {
    uint64_t at = plan->tensor_offsets[s];
    for (const ByteRange& r : shards[s].ranges) {
      for (uint64_t c = 0; c < r.count; ++c, at += r.length) {
        ASSERT_EQ(0, std::memcmp(image.data() + at, files[r.part].data() + r.offset + c * r.stride,
                                 r.length))
            << "shard " << s << " piece " << c;
      }
    }
  }
  // A failing read aborts the upload with its own error.
  auto broken = [](uint32_t part, uint64_t offset, uint64_t, void*) {
    return absl::DataLossError(absl::StrCat("part ", part, " offset ", offset, ": short read"));
  };
  absl::Status s = RunStagingUpload(*plan, options, broken, device.get(), stream);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  cudaStreamDestroy(stream);
}

TEST_F(CudaStagingUpload, MemoryInfo) {
  absl::StatusOr<DeviceMemoryInfo> m = QueryDeviceMemory(0);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GT(m->total_bytes, 0u);
  EXPECT_LE(m->free_bytes, m->total_bytes);
}

}  // namespace
}  // namespace tessera::cuda
