#include "kernels/cpu/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tessera::cpu {
namespace {

// Iterations a worker spins for new work before it sleeps (~50-100 us).
constexpr int kSpinIterations = 20000;

inline void Pause() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (n_threads <= 0) n_threads = 1;
  workers_.reserve(n_threads - 1);
  for (int t = 1; t < n_threads; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    stopping_.store(true, std::memory_order_release);
  }
  start_cv_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::RunTasks(int thread) {
  for (;;) {
    const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) return;
    (*fn_)(task, thread);
  }
}

void ThreadPool::WorkerLoop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    bool found = false;
    for (int i = 0; i < kSpinIterations; ++i) {
      if (generation_.load(std::memory_order_acquire) != seen ||
          stopping_.load(std::memory_order_acquire)) {
        found = true;
        break;
      }
      Pause();
    }
    if (!found) {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] {
        return stop_ || generation_.load(std::memory_order_acquire) != seen;
      });
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    RunTasks(thread);
    busy_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::ParallelFor(int64_t n_tasks,
                             const std::function<void(int64_t task, int thread)>& fn) {
  if (n_tasks <= 0) return;
  std::lock_guard<std::mutex> call_lock(call_mu_);
  if (workers_.empty() || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  fn_ = &fn;
  n_tasks_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  busy_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    // Under the mutex so that a worker about to sleep cannot miss the bump.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  start_cv_.notify_all();
  RunTasks(0);
  for (int spins = 0; busy_workers_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIterations) {
      Pause();
    } else {
      std::this_thread::yield();
    }
  }
  fn_ = nullptr;
}

}  // namespace tessera::cpu
