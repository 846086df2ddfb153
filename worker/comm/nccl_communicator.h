// The GPU communicator: NCCL on this rank's device. Pointers passed to its collectives are
// device pointers. The unique id travels from rank 0 to the others through the same
// rendezvous store Gloo uses (the controller's control service). Built where CUDA and NCCL
// are found; exercised on GPU machines only (ctest label `gpu`).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/comm/communicator.h"

namespace gloo::rendezvous {
class Store;
}

namespace tessera::comm {

class NcclCommunicator : public Communicator {
 public:
  // Rank 0 creates the unique id and publishes it under `prefix` + "nccl_id"; the others
  // wait for it (up to `timeout`), then all initialise the communicator on `device`.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Connect(
      gloo::rendezvous::Store& store, const std::string& prefix, int rank, int size, int device,
      std::chrono::milliseconds timeout);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  using Communicator::AllReduceSum;
  absl::Status AllReduceSum(void* data, size_t count, ReduceDtype dtype) override;
  absl::Status AllGather(const float* in, size_t count, float* out) override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Barrier() override;
  bool on_device() const override { return true; }
  absl::Status AllReduceSumOnStream(void* data, size_t count, ReduceDtype dtype,
                                    void* stream) override;
  absl::Status AllGatherOnStream(const float* in, size_t count, float* out, void* stream) override;
  // Every all-reduce is queued between two CUDA events (recorded into a graph as external
  // event nodes while the stream is being captured); this reads their elapsed times.
  std::vector<double> TakeAllReduceSeconds() override;
  size_t queued_allreduces() const override;
  void set_queued_allreduces(size_t n) override;

  struct State;

 private:
  NcclCommunicator(std::unique_ptr<State> state, int rank, int size);
  std::unique_ptr<State> state_;
  int rank_, size_;
};

}  // namespace tessera::comm
