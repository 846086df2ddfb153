#include "controller/workers/rendezvous_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::workers {

namespace {

using Clock = std::chrono::steady_clock;

// How long a waiter sleeps before it asks again whether its caller cancelled.
constexpr auto kCancelPoll = std::chrono::milliseconds(200);

// "rank 1" for a key that ends in a number (Gloo's keys end in the rank that publishes
// them), else "key '...'".
std::string Publisher(const std::string& key) {
  const size_t i = key.find_last_not_of("0123456789");
  return i + 1 < key.size() ? absl::StrCat("rank ", key.substr(i + 1))
                            : absl::StrCat("key '", key, "'");
}

}  // namespace

void RendezvousStore::Set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[key] = value;
  cv_.notify_all();
}

absl::StatusOr<std::string> RendezvousStore::Get(const std::vector<std::string>& keys,
                                                 std::chrono::milliseconds timeout,
                                                 const std::function<bool()>& cancelled) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = Clock::now() + std::max(timeout, std::chrono::milliseconds(1));
  while (!MissingLocked(keys).empty()) {
    if (cancelled() || shut_down_) return absl::CancelledError("cancelled");
    if (cv_.wait_until(lock, std::min(deadline, Clock::now() + kCancelPoll)) ==
            std::cv_status::timeout &&
        Clock::now() >= deadline) {
      std::vector<std::string> publishers;
      for (const std::string& key : MissingLocked(keys)) publishers.push_back(Publisher(key));
      return absl::DeadlineExceededError(
          absl::StrCat("rendezvous: ", absl::StrJoin(publishers, ", "), " never arrived within ",
                       timeout.count(), " ms"));
    }
  }
  return keys.empty() ? std::string() : values_.at(keys.front());
}

void RendezvousStore::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  values_.clear();
}

void RendezvousStore::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shut_down_ = true;
  cv_.notify_all();
}

std::vector<std::string> RendezvousStore::MissingLocked(
    const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (!values_.contains(key)) missing.push_back(key);
  }
  return missing;
}

}  // namespace tessera::workers
