#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "common/util/spin.h"
#include "common/util/thread_name.h"

namespace tessera::cpu {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kLocked = 0xFFFFFFFFu;
// How long an idle worker polls for the next call before it sleeps, and how long the caller
// polls for the last tasks before it yields its core between polls. Short on purpose: on a
// machine shared with other processes, a spinning thread takes the core from whoever would
// run the work it waits for.
constexpr auto kWorkerSpin = std::chrono::microseconds(40);
constexpr auto kCallerSpin = std::chrono::microseconds(20);

inline uint32_t GenerationOf(uint64_t word) { return static_cast<uint32_t>(word >> 32); }

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (n_threads <= 0) n_threads = 1;
  workers_.reserve(n_threads - 1);
  for (int t = 1; t < n_threads; ++t)
    workers_.emplace_back([this, t] {
      NameThisThread("tessera-pool");
      WorkerLoop(t);
    });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_seq_cst);
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  epoch_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::RunTasks(uint32_t gen, int thread) {
  uint64_t word = work_.load(std::memory_order_acquire);
  for (;;) {
    if (GenerationOf(word) != gen) return;
    const uint32_t next = static_cast<uint32_t>(word);
    // Read after the word: if these belong to a later generation, that generation's
    // kLocked store happened before them and the exchange below fails.
    const auto* fn = fn_.load(std::memory_order_acquire);
    const int64_t n = n_tasks_.load(std::memory_order_acquire);
    if (next == kLocked || static_cast<int64_t>(next) >= n) return;
    if (!work_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      continue;  // `word` now holds the current value
    }
    (*fn)(next, thread);
    done_.fetch_add(1, std::memory_order_acq_rel);
    word = work_.load(std::memory_order_acquire);
  }
}

void ThreadPool::WorkerLoop(int thread) {
  uint32_t seen = 0;
  SpinPolicy policy;
  for (;;) {
    // Poll for a new generation, then sleep until the caller bumps the epoch.
    uint32_t gen = GenerationOf(work_.load(std::memory_order_acquire));
    const auto deadline = Clock::now() + (policy.Spin() ? kWorkerSpin : Clock::duration::zero());
    for (int i = 0; gen == seen && !stopping_.load(std::memory_order_relaxed); ++i) {
      CpuRelax();
      // Every 64 polls: while spinning, a thread the OS wants to run here (another
      // process's, or the controller's answer to a step) goes first; after, sleep.
      if ((i & 63) == 63) {
        if (Clock::now() <= deadline) {
          std::this_thread::yield();
        } else {
          const uint32_t epoch = epoch_.load(std::memory_order_seq_cst);
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          // Checked again after announcing the sleep: a caller that published before it
          // saw no sleeper, and one that publishes after it bumps the epoch.
          gen = GenerationOf(work_.load(std::memory_order_seq_cst));
          if (gen == seen && !stopping_.load(std::memory_order_seq_cst)) epoch_.wait(epoch);
          sleepers_.fetch_sub(1, std::memory_order_seq_cst);
          i = 0;
        }
      }
      gen = GenerationOf(work_.load(std::memory_order_acquire));
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    seen = gen;
    RunTasks(gen, thread);
  }
}

void ThreadPool::Run(int64_t n_tasks, const std::function<void(int64_t, int)>& fn) {
  const uint32_t gen = GenerationOf(work_.load(std::memory_order_relaxed)) + 1;
  const uint64_t base = static_cast<uint64_t>(gen) << 32;
  work_.store(base | kLocked, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  fn_.store(&fn, std::memory_order_release);
  n_tasks_.store(n_tasks, std::memory_order_release);
  work_.store(base, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    epoch_.notify_all();
  }
  RunTasks(gen, 0);
  // Every task is claimed; wait for the ones still running on other threads.
  const auto deadline = Clock::now() + kCallerSpin;
  bool spin = true;
  for (int i = 0; done_.load(std::memory_order_acquire) != n_tasks; ++i) {
    if (spin) {
      CpuRelax();
      if ((i & 63) == 63 && Clock::now() > deadline) spin = false;
    } else {
      std::this_thread::yield();
    }
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
  // The hand-out word counts tasks in 32 bits: very long loops go in slices.
  constexpr int64_t kSlice = int64_t{1} << 30;
  for (int64_t first = 0; first < n_tasks; first += kSlice) {
    const int64_t n = std::min(kSlice, n_tasks - first);
    if (first == 0 && n == n_tasks) {
      Run(n, fn);
    } else {
      const std::function<void(int64_t, int)> shifted = [&](int64_t t, int thread) {
        fn(first + t, thread);
      };
      Run(n, shifted);
    }
  }
}

}  // namespace tessera::cpu
