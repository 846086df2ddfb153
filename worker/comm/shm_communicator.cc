#include "worker/comm/shm_communicator.h"

#include <algorithm>
#include <chrono>

namespace tessera::comm {

absl::Status ShmCommunicator::AllReduceSum(void* data, size_t count, ReduceDtype dtype) {
  if (size() == 1 || count == 0) return absl::OkStatus();
  return ReduceAsFloat(data, count, dtype, [&](float* values, size_t n) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = group_->AllReduceSum(values, n);
    if (s.ok()) {
      RecordAllReduce(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return s;
  });
}

absl::Status ShmCommunicator::AllGather(const float* in, size_t count, float* out) {
  if (size() == 1) {
    std::copy_n(in, count, out);
    return absl::OkStatus();
  }
  return group_->AllGather(in, count, out);
}

absl::Status ShmCommunicator::Broadcast(void* data, size_t bytes, int root) {
  if (size() == 1 || bytes == 0) return absl::OkStatus();
  return group_->Broadcast(data, bytes, root);
}

absl::Status ShmCommunicator::Barrier() {
  if (size() == 1) return absl::OkStatus();
  return group_->Barrier();
}

}  // namespace tessera::comm
