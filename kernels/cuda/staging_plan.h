// The upload of a rank's shard through pinned staging buffers, planned on the host.
//
// The worker reads its byte ranges (common/model/shard_plan.h) from the mapped GGUF into a
// pinned buffer and copies the buffer to the device asynchronously, alternating between
// `buffers` buffers so that the read of one overlaps the copy of the previous one:
//
//   for each transfer t:  wait for transfer t.reuse_after's copy (its buffer is t's);
//                         memcpy t.reads into buffer t.buffer;
//                         cudaMemcpyAsync(device + t.device_offset, buffer, t.bytes);
//                         record an event for t.
//
// Tensors land contiguously on the device, each starting at a multiple of `alignment`; a
// strided range (count > 1) becomes `count` pieces packed one after another, which is
// exactly the shard's row-major layout.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model/shard_plan.h"

namespace tessera::cuda {

struct StagingOptions {
  uint64_t buffer_bytes = 64ull << 20;  // size of each pinned buffer
  int buffers = 2;                      // 2: double buffering
  uint64_t alignment = 256;             // device offset of every tensor
};

// One read from a GGUF part into a staging buffer.
struct StagingRead {
  uint32_t part = 0;
  uint64_t file_offset = 0;
  uint64_t length = 0;
  uint64_t buffer_offset = 0;
};

// One fill of a staging buffer and its copy to the device.
struct StagingTransfer {
  int buffer = 0;
  std::vector<StagingRead> reads;
  uint64_t bytes = 0;          // bytes copied from the start of the buffer
  uint64_t device_offset = 0;  // where they land
  int64_t reuse_after = -1;    // transfer whose copy must finish before filling (or -1)
};

struct StagingPlan {
  std::vector<StagingTransfer> transfers;
  std::vector<uint64_t> tensor_offsets;  // device offset of each shard, in input order
  uint64_t device_bytes = 0;             // device allocation the plan fills
  uint64_t file_bytes = 0;               // bytes read from the files
};

// Plans the upload of `shards` (one RankPlan's shards). InvalidArgument, naming the shard and
// range, for a zero buffer size or buffer count, an alignment that is not a power of two, a
// range with count 0, or a strided range whose stride is shorter than its length (pieces
// would overlap). Adjacent pieces of a file are merged into one read.
absl::StatusOr<StagingPlan> PlanStagingUpload(absl::Span<const model::TensorShard> shards,
                                              const StagingOptions& options = {});

}  // namespace tessera::cuda
