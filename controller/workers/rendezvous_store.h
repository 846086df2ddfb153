// The key-value store the ranks of a worker group rendezvous through (Gloo's and NCCL's
// bootstrap, via the control service's StoreSet and StoreGet): one writer per key, any number
// of waiters. It has its own lock, so a rank blocked in Get never holds up the group.
//
//   store.Set("g3/rank1", address);
//   absl::StatusOr<std::string> v = store.Get({"g3/rank1"}, timeout, cancelled);
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::workers {

class RendezvousStore {
 public:
  // Sets `key` (replacing an earlier value) and wakes the waiters.
  void Set(const std::string& key, const std::string& value);

  // Waits until every key in `keys` is set and returns the value of the first ("" when
  // `keys` is empty). `cancelled` is asked at least every 200 ms. Errors:
  // DeadlineExceeded after `timeout` (at least 1 ms), naming what is missing ("rendezvous:
  // rank 1 never arrived within 30000 ms": Gloo's keys end in the rank that publishes them;
  // other keys are named whole); Cancelled ("cancelled") once `cancelled` returns true or
  // the store is shut down.
  absl::StatusOr<std::string> Get(const std::vector<std::string>& keys,
                                  std::chrono::milliseconds timeout,
                                  const std::function<bool()>& cancelled);

  // Forgets every key (a new generation of workers rendezvouses afresh).
  void Clear();

  // Wakes every waiter with Cancelled, and so each later Get that has to wait.
  void Shutdown();

 private:
  std::vector<std::string> MissingLocked(const std::vector<std::string>& keys) const;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
  bool shut_down_ = false;
};

}  // namespace tessera::workers
