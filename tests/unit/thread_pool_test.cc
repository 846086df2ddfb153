#include "kernels/cpu/thread_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::cpu {
namespace {

TEST(ThreadPoolTest, EveryTaskRunsExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 7, 100, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> bad_thread{0};
      pool.ParallelFor(n, [&](int64_t task, int thread) {
        hits[task].fetch_add(1);
        if (thread < 0 || thread >= threads) bad_thread.fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "task " << i;
      EXPECT_EQ(bad_thread.load(), 0);
    }
  }
}

TEST(ThreadPoolTest, ThreadIndexIsExclusiveWhileRunning) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> in_use(4);
  std::atomic<int> clashes{0};
  pool.ParallelFor(2000, [&](int64_t, int thread) {
    if (in_use[thread].fetch_add(1) != 0) clashes.fetch_add(1);
    std::this_thread::yield();
    in_use[thread].fetch_sub(1);
  });
  EXPECT_EQ(clashes.load(), 0);
}

TEST(ThreadPoolTest, ConcurrentCallersAreSerialised) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep) {
        pool.ParallelFor(50, [&](int64_t task, int) { total.fetch_add(task); });
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 20 * (49 * 50 / 2));
}

// Back-to-back calls with fewer tasks than threads: workers arrive late, find a call over
// or a newer one, and must never run an old call's function (its captures are gone: the
// sanitizer build would report the stale access) nor a task twice or not at all. More
// threads than cores makes late workers the rule.
TEST(ThreadPoolTest, LateWorkersNeverRunAFinishedCall) {
  ThreadPool pool(6);
  for (int call = 0; call < 20000; ++call) {
    std::vector<int> hits(1 + call % 4, 0);
    std::atomic<int> total{0};
    pool.ParallelFor(static_cast<int64_t>(hits.size()), [&hits, &total, call](int64_t t, int) {
      hits[t] += 1 + call;
      total.fetch_add(1);
    });
    ASSERT_EQ(total.load(), static_cast<int>(hits.size())) << "call " << call;
    for (int h : hits) ASSERT_EQ(h, 1 + call) << "call " << call;
  }
}

TEST(ThreadPoolTest, ConstructAndDestroyRepeatedly) {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(3);
    if (i % 2 == 0) pool.ParallelFor(10, [](int64_t, int) {});
  }
  ThreadPool defaulted;
  EXPECT_GE(defaulted.size(), 1);
}

}  // namespace
}  // namespace tessera::cpu
