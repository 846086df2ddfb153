// The CPU communicator: Gloo over TCP, rendezvous through any gloo::rendezvous::Store
// (tesserad's control service in production, an in-memory HashStore in tests).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/comm/communicator.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
}  // namespace gloo

namespace tessera::comm {

struct GlooOptions {
  std::string interface_address = "127.0.0.1";  // the address this rank listens on
  std::string prefix;                           // key prefix in the store (one per group)
  std::chrono::milliseconds timeout{60000};     // rendezvous and every collective
};

class GlooCommunicator : public Communicator {
 public:
  // Joins the group: every rank publishes its address in `store` and connects to all the
  // others. DEADLINE_EXCEEDED naming the ranks that never arrived when the timeout passes.
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Connect(gloo::rendezvous::Store& store,
                                                                   int rank, int size,
                                                                   const GlooOptions& options);
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  using Communicator::AllReduceSum;
  absl::Status AllReduceSum(void* data, size_t count, ReduceDtype dtype) override;
  absl::Status AllGather(const float* in, size_t count, float* out) override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Barrier() override;

 private:
  GlooCommunicator(std::shared_ptr<gloo::Context> context, int rank, int size);

  std::shared_ptr<gloo::Context> context_;
  int rank_, size_;
};

}  // namespace tessera::comm
