// Collective operations among the ranks of one tensor-parallel group. The executor calls
// them between its row-parallel products (all-reduce), for the vocab-parallel head
// (all-gather) and for barriers; they are blocking and every rank must call the same
// sequence. Implementations: shared memory (CPU workers spawned on one host), Gloo over TCP
// (other CPU workers), NCCL (GPU workers, device pointers). Errors (a peer that went away, a
// timeout) come back as UNAVAILABLE or DEADLINE_EXCEEDED naming the operation; after one the group
// is unusable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace tessera::comm {

enum class ReduceDtype { kFloat32, kBFloat16, kFloat16 };

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Element-wise sum over all ranks, in place. 16-bit values are reduced in float32 and
  // rounded back once (so the result does not depend on the reduction order's roundings).
  virtual absl::Status AllReduceSum(void* data, size_t count, ReduceDtype dtype) = 0;
  absl::Status AllReduceSum(float* data, size_t count) {
    return AllReduceSum(data, count, ReduceDtype::kFloat32);
  }
  // out = [rank 0's `count` floats][rank 1's]...; out holds size() * count values.
  virtual absl::Status AllGather(const float* in, size_t count, float* out) = 0;
  // `bytes` bytes of rank `root` copied to every rank.
  virtual absl::Status Broadcast(void* data, size_t bytes, int root) = 0;
  virtual absl::Status Barrier() = 0;

  // Device communicators (NCCL): the all-reduce and all-gather queued on `stream` (a
  // cudaStream_t) without waiting, so that the GPU executor keeps one stream busy and can
  // capture them in CUDA graphs. Host communicators say false and return Unimplemented.
  virtual bool on_device() const { return false; }
  virtual absl::Status AllReduceSumOnStream(void* /*data*/, size_t /*count*/, ReduceDtype /*dtype*/,
                                            void* /*stream*/) {
    return absl::UnimplementedError("this communicator works on host memory only");
  }
  virtual absl::Status AllGatherOnStream(const float* /*in*/, size_t /*count*/, float* /*out*/,
                                         void* /*stream*/) {
    return absl::UnimplementedError("this communicator works on host memory only");
  }

  // The duration of each all-reduce since the last call, in call order, and a fresh list
  // after it: the tessera_allreduce_seconds histogram takes one observation per call. Device
  // communicators time what they queue on a stream with CUDA events and read them here, so
  // call it once the stream has finished the step.
  virtual std::vector<double> TakeAllReduceSeconds() {
    return std::exchange(allreduce_seconds_, {});
  }
  // For CUDA graphs (device communicators): how many timed all-reduces are queued since the
  // last Take, and setting that count. A graph captured at the start of a step holds the
  // event records of its n all-reduces, so capturing must not count them (set the count
  // back) and each launch at the start of a step adds n (it re-records the same events).
  virtual size_t queued_allreduces() const { return 0; }
  virtual void set_queued_allreduces(size_t /*n*/) {}

 protected:
  // The most durations (or event pairs) kept between two Takes: a process that never takes
  // them (an in-process executor, no worker loop) stops recording there instead of growing.
  static constexpr size_t kMaxTimedAllReduces = 1 << 14;

  // Host communicators that reduce float32 only: runs `reduce` on `data` as floats (16-bit
  // values widened into a scratch copy and rounded back once afterwards).
  static absl::Status ReduceAsFloat(void* data, size_t count, ReduceDtype dtype,
                                    absl::FunctionRef<absl::Status(float*, size_t)> reduce);

  // Host communicators: records one call's duration.
  void RecordAllReduce(double seconds) {
    if (allreduce_seconds_.size() < kMaxTimedAllReduces) allreduce_seconds_.push_back(seconds);
  }

 private:
  std::vector<double> allreduce_seconds_;
};

}  // namespace tessera::comm
