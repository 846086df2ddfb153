// A small pool of threads for the expensive part of preparing a request (parsing a large
// body, rendering the chat template, tokenizing), so that the HTTP and gRPC I/O threads never
// do it: while two 30,000-message chats are rendered here, /health, /ready, /metrics and small
// requests are still answered at once. The threads run at a lower CPU priority (nice +5) for
// the same reason. At most `max_queued` tasks wait; beyond that TrySubmit refuses, and the
// caller answers as for a full waiting queue (HTTP 429, gRPC RESOURCE_EXHAUSTED).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace tessera::serving {

// Requests (bodies, messages) up to this size are prepared on the thread that received them:
// their work is bounded and small. Larger ones go to the PrepPool.
inline constexpr size_t kInlinePrepBytes = 16 << 10;

class PrepPool {
 public:
  // `threads` >= 1; `max_queued` >= 0 tasks may wait for a thread.
  PrepPool(int threads, int max_queued);
  ~PrepPool();  // Stop()
  PrepPool(const PrepPool&) = delete;
  PrepPool& operator=(const PrepPool&) = delete;

  // Queues `task`. Otherwise (the task dropped unrun) RESOURCE_EXHAUSTED when max_queued
  // tasks already wait, UNAVAILABLE when the pool is stopped: statuses a front end answers
  // as they are (HTTP 429 / 503).
  absl::Status TrySubmit(std::function<void()> task);

  // Tasks waiting for a thread, and tasks running.
  int queued() const;
  int running() const;

  // Lets running tasks finish, drops the queued ones (destroying them unrun), joins the
  // threads. Idempotent.
  void Stop();

  // The default thread count: a quarter of the CPUs, 1 to 8.
  static int DefaultThreads();

 private:
  void Run();

  const int max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  int running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tessera::serving
