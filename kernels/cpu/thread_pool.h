// A fixed pool of worker threads for data-parallel kernels. The pool owns its threads: they
// start in the constructor and are stopped and joined in the destructor.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::cpu {

class ThreadPool {
 public:
  // `n_threads` counts the calling thread, which works too: 1 means no extra threads.
  // 0 means one per core (std::thread::hardware_concurrency()).
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(task, thread) for every task in [0, n_tasks) and returns when all are done.
  // Tasks are handed out dynamically; `thread` is in [0, size()) and unique among the calls
  // running at the same time (use it to index per-thread scratch). Calls from several
  // threads are serialised; `fn` must not call ParallelFor on the same pool (it would wait
  // for itself).
  void ParallelFor(int64_t n_tasks, const std::function<void(int64_t task, int thread)>& fn);

 private:
  void WorkerLoop(int thread);
  void RunTasks(int thread);

  std::mutex call_mu_;  // one ParallelFor at a time
  // Workers spin on `generation_` for a while before sleeping on start_cv_, and the caller
  // spins on `busy_workers_`: a decode step makes ~100 small parallel calls, and a
  // condition-variable wake-up per call (tens of microseconds on a VM) cost more than the
  // matmuls themselves.
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::atomic<uint64_t> generation_{0};  // bumped per ParallelFor (under mu_)
  std::atomic<int> busy_workers_{0};     // workers still in the current generation
  bool stop_ = false;                    // guarded by mu_
  std::atomic<bool> stopping_{false};
  const std::function<void(int64_t, int)>* fn_ = nullptr;
  int64_t n_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::vector<std::thread> workers_;
};

}  // namespace tessera::cpu
