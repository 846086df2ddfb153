#include "controller/daemon/memory_trimmer.h"

#include <malloc.h>

#include <algorithm>

#include "common/util/proc_stats.h"

namespace tessera::daemon {

void TuneMalloc() {
  mallopt(M_ARENA_MAX, 2);
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  mallopt(M_TRIM_THRESHOLD, 4 << 20);
}

TrimPolicy::TrimPolicy(std::chrono::milliseconds interval, uint64_t growth_bytes, uint64_t idle_rss,
                       Clock::time_point now)
    : interval_(interval),
      growth_(growth_bytes),
      floor_(idle_rss),
      last_after_(idle_rss),
      free_low_(UINT64_MAX),
      last_trim_(now),
      backoff_(interval) {}

bool TrimPolicy::ShouldTrim(uint64_t rss, uint64_t malloc_free, Clock::time_point now) {
  floor_ = std::min(floor_, rss);
  free_low_ = std::min(free_low_, malloc_free);
  if (rss < floor_ + growth_) return false;     // near idle
  if (malloc_free < growth_ / 4) return false;  // malloc has nothing to give back
  if (rss >= last_after_ + growth_) return true;
  if (malloc_free >= free_low_ + growth_ / 4) return true;
  return now - last_trim_ >= backoff_;
}

void TrimPolicy::Trimmed(uint64_t rss_before, uint64_t rss_after, uint64_t malloc_free_after,
                         Clock::time_point now) {
  const bool returned_little = rss_before - std::min(rss_before, rss_after) < growth_ / 4;
  backoff_ = returned_little ? std::min(2 * backoff_, 60 * interval_) : interval_;
  last_after_ = rss_after;
  free_low_ = malloc_free_after;
  last_trim_ = now;
  floor_ = std::min(floor_, rss_after);
}

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
  using Clock = TrimPolicy::Clock;
  TrimPolicy policy(interval_, growth_, util::RssBytes(), Clock::now());
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
    const uint64_t rss = util::RssBytes();
    const uint64_t malloc_free = mallinfo2().fordblks;
    if (!policy.ShouldTrim(rss, malloc_free, Clock::now())) continue;
    lock.unlock();
    malloc_trim(0);
    const uint64_t after = util::RssBytes();
    const uint64_t free_after = mallinfo2().fordblks;
    lock.lock();
    policy.Trimmed(rss, after, free_after, Clock::now());
  }
}

}  // namespace tessera::daemon
