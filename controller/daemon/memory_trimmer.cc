#include "controller/daemon/memory_trimmer.h"

#include <malloc.h>

#include <algorithm>

#include "common/util/proc_stats.h"

namespace tessera::daemon {

void LimitMallocArenas() { mallopt(M_ARENA_MAX, 2); }

MemoryTrimmer::MemoryTrimmer(std::chrono::milliseconds interval, uint64_t growth_bytes)
    : interval_(interval), growth_(growth_bytes), thread_([this] { Run(); }) {}

MemoryTrimmer::~MemoryTrimmer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MemoryTrimmer::Run() {
  using Clock = std::chrono::steady_clock;
  uint64_t floor = util::RssBytes();  // the lowest resident size seen: the idle daemon
  uint64_t last_after = floor;        // the resident size right after the last trim
  Clock::time_point last_trim = Clock::now();
  std::chrono::milliseconds backoff = interval_;
  const std::chrono::milliseconds max_backoff = 60 * interval_;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
    const uint64_t now = util::RssBytes();
    if (now < floor) floor = now;
    if (now < floor + growth_) continue;  // near idle: nothing worth a trim
    // Grown since the last trim, or time to look again at what that trim left.
    if (now < last_after + growth_ && Clock::now() - last_trim < backoff) continue;
    lock.unlock();
    malloc_trim(0);
    const uint64_t after = util::RssBytes();
    lock.lock();
    // A trim that freed little means the memory is in use: look again less often.
    backoff =
        now - std::min(now, after) < growth_ / 4 ? std::min(2 * backoff, max_backoff) : interval_;
    last_after = after;
    last_trim = Clock::now();
  }
}

}  // namespace tessera::daemon
