// Runs a StagingPlan (staging_plan.h) on a device: pinned buffers, file reads into one while
// the previous one's cudaMemcpyAsync is in flight, one event per transfer.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/staging_plan.h"

namespace tessera::cuda {

// Copies `length` bytes at `offset` of GGUF part `part` into `dst` (from the worker's
// mapping of the file); an error aborts the upload and is returned as is.
using StagingReadFn =
    std::function<absl::Status(uint32_t part, uint64_t offset, uint64_t length, void* dst)>;

// Uploads through options.buffers pinned buffers of options.buffer_bytes into
// device_base[0 .. plan.device_bytes) (which the caller allocated) on `stream`, and waits for
// the last copy. Errors name the failing CUDA call or come from `read`; pinned buffers and
// events are released on every path.
absl::Status RunStagingUpload(const StagingPlan& plan, const StagingOptions& options,
                              const StagingReadFn& read, void* device_base, cudaStream_t stream);

// cudaMemGetInfo of `device`: what PlanGpuMemory (memory_planner.h) takes as free and total.
struct DeviceMemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};
absl::StatusOr<DeviceMemoryInfo> QueryDeviceMemory(int device);

}  // namespace tessera::cuda
