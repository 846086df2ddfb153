// The forward pass on a GPU (ExecutorOptions::device kCuda): the weights LoadWeights chose for
// this rank are uploaded once through pinned staging buffers, the paged KV cache lives in
// device memory, and each step runs the kernels of kernels/cuda/ on one stream. Decode-only
// steps are captured as CUDA graphs and replayed. Plain C++ interface (no CUDA headers), so
// that executor.cc builds the same with or without the CUDA toolkit; builds without it link
// cuda_forward_none.cc, whose Create explains that.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/executor/executor_impl.h"

namespace tessera::executor {

class CudaForward {
 public:
  // Uploads `impl`'s weights (the host views LoadWeights made: in place in the mapping,
  // gathered shards, float32 fixups), sizes the step buffers and plans the KV cache from the
  // device's memory (impl.options.kv_tokens, else gpu_memory_utilization); returns the
  // number of cache blocks in *n_blocks. `impl` must outlive the result.
  static absl::StatusOr<std::unique_ptr<CudaForward>> Create(Executor::Impl& impl, int* n_blocks);
  ~CudaForward();

  // One step over the batch Impl::Flatten built; logits as Executor::Step returns them. With
  // `sampled` (one entry per sequence), the sequences with device_sample (and one logits
  // row) are sampled on the device: only their token and log-probability come back.
  absl::StatusOr<std::vector<std::vector<float>>> Step(const Batch& b,
                                                       std::vector<SampledToken>* sampled);
  // Host bytes from rank 0 to every rank over `comm`, a device communicator (NCCL): staged
  // through a device buffer of this executor's GPU (Executor::BroadcastFromRank0).
  absl::Status BroadcastHost(void* data, size_t bytes, comm::Communicator* comm);

  // "cuda:0 (NVIDIA H200)".
  std::string device_name() const;

  struct State;

 private:
  explicit CudaForward(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tessera::executor
