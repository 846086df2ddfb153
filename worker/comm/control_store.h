// Gloo's rendezvous Store over tesserad's control service (WorkerControl.StoreSet /
// StoreGet), so that a group needs no shared file system and no fixed ports: the
// controller holds the keys.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "gloo/rendezvous/store.h"
#include "tessera/v1/worker.grpc.pb.h"

namespace tessera::comm {

class ControlStore : public gloo::rendezvous::Store {
 public:
  // `stub` must outlive the store. `default_timeout` applies to wait() without one.
  ControlStore(tessera::v1::WorkerControl::StubInterface* stub,
               std::chrono::milliseconds default_timeout)
      : stub_(stub), default_timeout_(default_timeout) {}

  // Gloo's interface reports failures by exception; these throw gloo::IoException with a
  // message naming the keys (and so the ranks) that never arrived.
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::vector<char> Get(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                        bool wait_only);

  tessera::v1::WorkerControl::StubInterface* stub_;
  std::chrono::milliseconds default_timeout_;
};

}  // namespace tessera::comm
