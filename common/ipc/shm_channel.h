// A same-host message channel between two processes: one shared memory mapping (a memfd
// the child inherits) with two mailboxes, one each way, each holding at most one message
// at a time, signalled through futexes on the mapping.
//
// The worker group sends steps and receives results this way with the workers it spawns:
// a step is one memcpy and one futex wake each way instead of two gRPC stream messages
// through gRPC's poller threads (tens of microseconds per hop).
//
//   // controller, before fork(): the child gets channel->fd() (see ShareWithChild)
//   auto channel = ShmChannel::Create(4 << 20);
//   (*channel)->Post(Mailbox::kToWorker, n, [&](char* p) { step.SerializeToArray(p, n); });
//   // worker
//   auto channel = ShmChannel::Attach(fd);
//   (*channel)->Wait(Mailbox::kToWorker, timeout);
//   (*channel)->Take(Mailbox::kToWorker, [&](const char* p, size_t n) { ... });
//
// A message larger than the mailbox is not posted: the sender sends it another way (the
// gRPC stream) and posts a "went elsewhere" marker in its place, so the receiver knows to
// look there (PostOrSendElsewhere). Post refuses while the mailbox's previous message is untaken:
// the protocol is request/response, and a second message would overwrite the first.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/ipc/shared_memory.h"

namespace tessera::ipc {

enum class Mailbox { kToWorker = 0, kToController = 1 };

class ShmChannel {
 public:
  // A new anonymous mapping with `capacity` bytes per mailbox (its pages are touched only
  // as messages use them). The descriptor is close-on-exec; see ShareWithChild.
  static absl::StatusOr<std::unique_ptr<ShmChannel>> Create(size_t capacity);
  // Maps a channel made by Create in another process, from the descriptor it inherited
  // (closed once mapped, channel or not: a mapping keeps the memory). InvalidArgument when
  // `fd` is not such a channel.
  static absl::StatusOr<std::unique_ptr<ShmChannel>> Attach(int fd);
  ~ShmChannel();
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  // For a forked child before exec (async-signal-safe): makes the channel's descriptor
  // `target_fd` without close-on-exec. Returns false when dup2/fcntl failed.
  bool ShareWithChild(int target_fd) const { return shm_->ShareWithChild(target_fd); }
  int fd() const { return shm_->fd(); }
  size_t capacity() const { return capacity_; }

  // Posts a message of `size` bytes, written in place by `write`. OutOfRange when it does
  // not fit (send it another way, then PostElsewhere); FailedPrecondition when the previous
  // message was not taken yet.
  absl::Status Post(Mailbox box, size_t size, absl::FunctionRef<void(char*)> write);
  // Posts the marker "this message went by another way".
  absl::Status PostElsewhere(Mailbox box);
  // Post, or for a message too large for the mailbox: `send_elsewhere` sends it another way
  // (false: it could not, Unavailable), then PostElsewhere. FailedPrecondition as Post.
  absl::Status PostOrSendElsewhere(Mailbox box, size_t size, absl::FunctionRef<void(char*)> write,
                                   absl::FunctionRef<bool()> send_elsewhere);

  enum class Taken { kNothing, kMessage, kElsewhere };
  // Takes the mailbox's message, if one is there: `read` sees its bytes (only during the
  // call) for kMessage; kElsewhere for a marker. The mailbox is free again afterwards.
  Taken Take(Mailbox box, absl::FunctionRef<void(const char*, size_t)> read);
  // Blocks until the mailbox holds a message, `timeout` passes, or Wake is called; true
  // when a message is there. For the first `poll` of it (at most `timeout`) the caller
  // polls, yielding its core between polls (YieldingPoll), before it sleeps: for a message
  // due within microseconds, which a sleeping thread on an idle vCPU would take tens of
  // microseconds to wake for.
  bool Wait(Mailbox box, std::chrono::microseconds timeout,
            std::chrono::microseconds poll = std::chrono::microseconds(0));
  // Whether `box` holds a message (or marker) its reader has not taken yet.
  bool Untaken(Mailbox box) const;
  // Wakes whoever waits on `box` without a message (a waiter then rechecks why it waits).
  void Wake(Mailbox box);

  struct Layout;
  struct Box;

 private:
  ShmChannel(std::unique_ptr<SharedMemory> shm, size_t capacity);
  Box& BoxOf(Mailbox box) const;
  char* DataOf(Mailbox box) const;  // the mailbox's message bytes
  std::unique_ptr<SharedMemory> shm_;
  size_t capacity_;
};

}  // namespace tessera::ipc
