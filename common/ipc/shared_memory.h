// A shared memory mapping between a process and the children it spawns: an anonymous
// memfd, mapped read-write and shared, that a forked child inherits as a descriptor and
// maps again. The futex helpers wait and wake on 32-bit words inside such a mapping across
// processes (no FUTEX_PRIVATE_FLAG).
//
//   // parent, before fork(); the child gets it as descriptor 4
//   auto shm = SharedMemory::Create("tessera-thing", bytes);
//   // child, after fork(): (*shm)->ShareWithChild(4); then exec
//   // the exec'd child
//   auto shm = SharedMemory::Map(4, "thing");
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace tessera::ipc {

class SharedMemory {
 public:
  // A new zero-filled mapping of `size` bytes (its pages are allocated as they are
  // touched). The descriptor is close-on-exec and numbered 16 or higher, clear of the
  // numbers children get theirs at; see ShareWithChild. `name` shows in /proc/PID/maps.
  static absl::StatusOr<std::unique_ptr<SharedMemory>> Create(const char* name, size_t size);
  // Maps the whole of an inherited descriptor made by Create in another process and closes
  // it (the mapping keeps the memory). InvalidArgument naming `what` when it cannot.
  static absl::StatusOr<std::unique_ptr<SharedMemory>> Map(int fd, const char* what);
  ~SharedMemory();
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  // For a forked child before exec (async-signal-safe): makes the descriptor `target_fd`
  // without close-on-exec. False when dup2/fcntl failed or the descriptor was closed (Map).
  bool ShareWithChild(int target_fd) const;
  int fd() const { return fd_; }
  char* data() const { return static_cast<char*>(base_); }
  size_t size() const { return size_; }

 private:
  SharedMemory(int fd, void* base, size_t size) : fd_(fd), base_(base), size_(size) {}
  int fd_;
  void* base_;
  size_t size_;
};

static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "atomics shared between processes must be lock-free");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex words are 32-bit");

// Sleeps while *word == expected, at most `timeout` (a wake, a signal or a spurious return
// also end it: callers recheck their condition).
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout);
// Wakes every process sleeping on `word`.
void FutexWakeAll(std::atomic<uint32_t>* word);

}  // namespace tessera::ipc
