// A fixed pool of worker threads for data-parallel kernels. The pool owns its threads: they
// start in the constructor and are stopped and joined in the destructor.
#pragma once

#include <atomic>
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
  //
  // The call waits for its tasks, never for the workers: a worker the OS has not scheduled
  // yet (a machine busy with other processes) simply finds the tasks taken when it runs, so
  // an oversubscribed machine costs the tasks' time, not a wake-up of every thread.
  void ParallelFor(int64_t n_tasks, const std::function<void(int64_t task, int thread)>& fn);

 private:
  void WorkerLoop(int thread);
  // Claims and runs tasks of generation `gen` until none are left.
  void RunTasks(uint32_t gen, int thread);
  void Run(int64_t n_tasks, const std::function<void(int64_t, int)>& fn);

  std::mutex call_mu_;  // one ParallelFor at a time
  // The current generation's hand-out word: generation in the high 32 bits, the next task
  // in the low 32 (kLocked while the generation's job is being written). Workers claim a
  // task by compare-exchange, so a worker holding a stale word can never claim a task of
  // another generation; the job (fn_, n_tasks_) is published between the kLocked store and
  // the release of task 0.
  std::atomic<uint64_t> work_{0};
  std::atomic<const std::function<void(int64_t, int)>*> fn_{nullptr};
  std::atomic<int64_t> n_tasks_{0};
  std::atomic<int64_t> done_{0};  // tasks of the current generation finished
  // Workers spin briefly (a decode step makes ~100 small parallel calls, and a futex
  // wake-up per call costs more than the matmuls themselves), yielding their core every 64
  // polls so that whatever the OS wants to run there goes first, then sleep on `epoch_`; a
  // worker the OS keeps preempting (a machine busy with other processes) does not spin.
  std::atomic<uint32_t> epoch_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> workers_;
};

}  // namespace tessera::cpu
