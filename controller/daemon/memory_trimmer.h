// Gives the memory of large transient requests back to the system. A 1-8 MB request body
// (a huge prompt, thousands of chat messages) is parsed, rendered and tokenized into many
// heap blocks; once freed, glibc keeps them in its arenas (one per thread that allocated), so
// tesserad's resident size would stay at its high-water mark (~6x idle after a few such
// requests). Two measures:
//   - LimitMallocArenas(): at most two malloc arenas for the daemon's many I/O threads (the
//     controller allocates little on hot paths; the workers, which do, keep glibc's default);
//   - MemoryTrimmer: every `interval` it reads the resident size (/proc/self/status); when
//     that is `growth` above the lowest seen (the idle daemon), malloc_trim(0) returns the
//     free pages of every arena: at once when it grew by `growth` since the last trim, else
//     after a back-off that doubles (up to 60 intervals) while trims free little (the memory
//     is in use), so a busy daemon is not trimmed every interval for nothing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace tessera::daemon {

// Call before any thread starts.
void LimitMallocArenas();

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
