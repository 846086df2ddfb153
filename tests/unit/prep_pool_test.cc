// PrepPool: tasks run off the caller's thread, at most max_queued wait (the rest are refused,
// for the caller to answer 429), and Stop lets the running task finish but drops the queued.
#include "controller/serving/prep_pool.h"

#include <gtest/gtest.h>

#include "absl/status/status.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>

namespace tessera::serving {
namespace {

using namespace std::chrono_literals;

bool WaitFor(const std::function<bool()>& condition) {
  for (int i = 0; i < 2000 && !condition(); ++i) std::this_thread::sleep_for(1ms);
  return condition();
}

TEST(PrepPool, RunsTasksOffTheCallersThread) {
  PrepPool pool(2, 4);
  std::promise<std::thread::id> ran;
  ASSERT_TRUE(pool.TrySubmit([&] { ran.set_value(std::this_thread::get_id()); }).ok());
  EXPECT_NE(ran.get_future().get(), std::this_thread::get_id());
}

TEST(PrepPool, RefusesBeyondMaxQueued) {
  PrepPool pool(1, 1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> done{0};
  ASSERT_TRUE(pool.TrySubmit([&] {
                    released.wait();
                    ++done;
                  })
                  .ok());
  ASSERT_TRUE(WaitFor([&] { return pool.running() == 1; }));
  EXPECT_TRUE(pool.TrySubmit([&] { ++done; }).ok());  // waits
  EXPECT_EQ(pool.queued(), 1);
  EXPECT_EQ(pool.TrySubmit([&] { ++done; }).code(),  // refused: one is already waiting
            absl::StatusCode::kResourceExhausted);
  release.set_value();
  EXPECT_TRUE(WaitFor([&] { return done.load() == 2; }));
  EXPECT_TRUE(WaitFor([&] { return pool.running() == 0 && pool.queued() == 0; }));
  EXPECT_TRUE(pool.TrySubmit([&] { ++done; }).ok());  // room again
  EXPECT_TRUE(WaitFor([&] { return done.load() == 3; }));
}

TEST(PrepPool, StopFinishesTheRunningTaskAndDropsTheQueued) {
  PrepPool pool(1, 4);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> first_done{false}, second_ran{false};
  auto captured = std::make_shared<int>(7);
  std::weak_ptr<int> watch = captured;
  ASSERT_TRUE(pool.TrySubmit([&] {
                    released.wait();
                    first_done = true;
                  })
                  .ok());
  ASSERT_TRUE(WaitFor([&] { return pool.running() == 1; }));
  ASSERT_TRUE(pool.TrySubmit([&, captured] { second_ran = true; }).ok());
  captured.reset();
  std::thread releaser([&] {
    std::this_thread::sleep_for(50ms);
    release.set_value();
  });
  pool.Stop();
  releaser.join();
  EXPECT_TRUE(first_done);
  EXPECT_FALSE(second_ran);
  EXPECT_TRUE(watch.expired()) << "a dropped task's captures are destroyed";
  EXPECT_EQ(pool.TrySubmit([] {}).code(), absl::StatusCode::kUnavailable);
  pool.Stop();  // idempotent
}

}  // namespace
}  // namespace tessera::serving
