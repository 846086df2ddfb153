#include "controller/serving/prep_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "common/util/thread_name.h"

namespace tessera::serving {

PrepPool::PrepPool(int threads, int max_queued) : max_queued_(std::max(0, max_queued)) {
  threads = std::max(1, threads);
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      NameThisThread("tessera-prep");
      Run();
    });
  }
}

PrepPool::~PrepPool() { Stop(); }

int PrepPool::DefaultThreads() {
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cpus / 4, 1, 8);
}

absl::Status PrepPool::TrySubmit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return absl::UnavailableError("the server is shutting down");
    if (static_cast<int>(queue_.size()) >= max_queued_) {
      return absl::ResourceExhaustedError(
          "too many large requests are waiting to be prepared (max-waiting-requests); retry "
          "later");
    }
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return absl::OkStatus();
}

int PrepPool::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

int PrepPool::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

void PrepPool::Stop() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && threads_.empty()) return;
    stop_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  dropped.clear();  // outside the lock: a task's captures may do anything when destroyed
}

void PrepPool::Run() {
  // Linux nice values are per thread; lower this one's priority so the I/O threads win.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 5);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    task();
    task = nullptr;
    lock.lock();
    --running_;
  }
}

}  // namespace tessera::serving
