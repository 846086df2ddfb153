// Gives the memory of large transient requests back to the system. A 1-8 MB request body
// (a huge prompt, thousands of chat messages) is parsed, rendered and tokenized into many
// heap blocks; once freed, glibc keeps them in its arenas (one per thread that allocated), so
// tesserad's resident size would stay at its high-water mark (~6x idle after a few such
// requests). Two measures:
//   - TuneMalloc(): at most two malloc arenas for the daemon's many I/O threads (the
//     controller allocates little on hot paths; the workers, which do, keep glibc's default),
//     and fixed thresholds: blocks of 1 MiB and more are mmapped (returned when freed), and
//     an arena whose free top exceeds 4 MiB shrinks at once. glibc's default raises both
//     thresholds after each large mmapped block is freed (up to 32 and 64 MiB), after which
//     a second arena's free top stays resident: malloc_trim returns free pages inside an
//     arena but never shrinks a non-main arena's top (measured: 34 MiB stuck that way);
//   - MemoryTrimmer: every `interval` it reads the resident size (/proc/self/status) and the
//     bytes malloc holds free (mallinfo2), and TrimPolicy decides whether malloc_trim(0),
//     which returns the free pages of every arena, is worth calling.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace tessera::daemon {

// Call before any thread starts.
void TuneMalloc();

// When to trim, from two readings per tick: the resident size and the bytes malloc holds free
// (which include pages an earlier trim already returned; malloc still counts them as free).
// Never while the resident size is within `growth` of the lowest seen (the idle daemon) or
// malloc holds less than growth/4 free (nothing to return). Otherwise trim when
//   - the resident size grew by `growth` since the last trim (memory was touched again), or
//   - malloc's free bytes rose by growth/4 above their lowest since the last trim (a request
//     ended and freed what it had taken), or
//   - the back-off has passed: one interval, doubled (up to 60 intervals) after each trim
//     that returned less than growth/4, so a daemon whose memory is in use is not trimmed
//     every interval for nothing.
// Pure bookkeeping (no clock, no system calls), so it is unit-tested with chosen readings.
class TrimPolicy {
 public:
  using Clock = std::chrono::steady_clock;
  TrimPolicy(std::chrono::milliseconds interval, uint64_t growth_bytes, uint64_t idle_rss,
             Clock::time_point now);

  // One tick's readings; true when a trim should run now.
  bool ShouldTrim(uint64_t rss, uint64_t malloc_free, Clock::time_point now);
  // After a trim: the readings before it (as given to ShouldTrim) and after it.
  void Trimmed(uint64_t rss_before, uint64_t rss_after, uint64_t malloc_free_after,
               Clock::time_point now);

  std::chrono::milliseconds backoff() const { return backoff_; }

 private:
  const std::chrono::milliseconds interval_;
  const uint64_t growth_;
  uint64_t floor_;       // the lowest resident size seen: the idle daemon
  uint64_t last_after_;  // the resident size right after the last trim
  uint64_t free_low_;    // malloc's lowest free bytes since the last trim
  Clock::time_point last_trim_;
  std::chrono::milliseconds backoff_;
};

class MemoryTrimmer {
 public:
  MemoryTrimmer(std::chrono::milliseconds interval, uint64_t growth_bytes);
  ~MemoryTrimmer();  // stops the thread
  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

 private:
  void Run();

  const std::chrono::milliseconds interval_;
  const uint64_t growth_;
  std::mutex mu_;  // guards stop_
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tessera::daemon
