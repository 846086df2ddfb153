// The communicator of CPU workers that share one host with their whole group (the ranks
// tesserad spawns): collectives through a shared memory mapping the controller made
// (ipc::ShmCollectives) instead of Gloo's TCP connections.
#pragma once

#include <memory>

#include "common/ipc/shm_collectives.h"
#include "worker/comm/communicator.h"

namespace tessera::comm {

class ShmCommunicator : public Communicator {
 public:
  explicit ShmCommunicator(std::unique_ptr<ipc::ShmCollectives> group) : group_(std::move(group)) {}

  int rank() const override { return group_->rank(); }
  int size() const override { return group_->world(); }
  using Communicator::AllReduceSum;
  absl::Status AllReduceSum(void* data, size_t count, ReduceDtype dtype) override;
  absl::Status AllGather(const float* in, size_t count, float* out) override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Barrier() override;

 private:
  std::unique_ptr<ipc::ShmCollectives> group_;
};

}  // namespace tessera::comm
