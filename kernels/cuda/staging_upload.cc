#include "kernels/cuda/staging_upload.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_types.h"

namespace tessera::cuda {
namespace {

// Pinned buffers and per-transfer events, freed on scope exit.
struct StagingResources {
  std::vector<void*> buffers;
  std::vector<cudaEvent_t> events;
  ~StagingResources() {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    for (void* b : buffers) cudaFreeHost(b);
  }
};

}  // namespace

absl::Status RunStagingUpload(const StagingPlan& plan, const StagingOptions& options,
                              const StagingReadFn& read, void* device_base, cudaStream_t stream) {
  if (plan.transfers.empty()) return absl::OkStatus();
  if (device_base == nullptr) {
    return absl::InvalidArgumentError("staging upload: no device allocation to fill");
  }
  StagingResources r;
  for (int i = 0; i < options.buffers; ++i) {
    void* b = nullptr;
    if (absl::Status s = CudaStatus(cudaHostAlloc(&b, options.buffer_bytes, cudaHostAllocDefault),
                                    "cudaHostAlloc (staging buffer)");
        !s.ok()) {
      return s;
    }
    r.buffers.push_back(b);
  }
  r.events.resize(plan.transfers.size(), nullptr);
  for (size_t t = 0; t < plan.transfers.size(); ++t) {
    const StagingTransfer& tr = plan.transfers[t];
    // The buffer is free once the copy of its previous transfer has completed.
    if (tr.reuse_after >= 0) {
      if (absl::Status s = CudaStatus(cudaEventSynchronize(r.events[tr.reuse_after]),
                                      "cudaEventSynchronize (staging buffer reuse)");
          !s.ok()) {
        return s;
      }
    }
    auto* buffer = static_cast<uint8_t*>(r.buffers[tr.buffer]);
    for (const StagingRead& rd : tr.reads) {
      if (absl::Status s = read(rd.part, rd.file_offset, rd.length, buffer + rd.buffer_offset);
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s =
            CudaStatus(cudaMemcpyAsync(static_cast<uint8_t*>(device_base) + tr.device_offset,
                                       buffer, tr.bytes, cudaMemcpyHostToDevice, stream),
                       "cudaMemcpyAsync (staging upload)");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CudaStatus(cudaEventCreateWithFlags(&r.events[t], cudaEventDisableTiming),
                                    "cudaEventCreate");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CudaStatus(cudaEventRecord(r.events[t], stream), "cudaEventRecord");
        !s.ok()) {
      return s;
    }
  }
  return CudaStatus(cudaStreamSynchronize(stream), "cudaStreamSynchronize (staging upload)");
}

absl::StatusOr<DeviceMemoryInfo> QueryDeviceMemory(int device) {
  if (absl::Status s = CudaStatus(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) return s;
  size_t free_bytes = 0, total_bytes = 0;
  if (absl::Status s = CudaStatus(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
      !s.ok()) {
    return s;
  }
  return DeviceMemoryInfo{free_bytes, total_bytes};
}

}  // namespace tessera::cuda
