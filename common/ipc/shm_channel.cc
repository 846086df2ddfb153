#include "common/ipc/shm_channel.h"

#include <algorithm>
#include <new>

#include "absl/strings/str_cat.h"
#include "common/util/spin.h"
#include "common/util/status_macros.h"

namespace tessera::ipc {
namespace {

constexpr uint64_t kMagic = 0x6c6e6843'61726574;  // "teraChnl"
constexpr uint32_t kVersion = 1;
constexpr uint64_t kElsewhere = ~uint64_t{0};
constexpr size_t kPage = 4096;

}  // namespace

// One direction. The poster bumps `seq` after writing the message; the mailbox is empty
// while seq == taken. `signal`, the futex word, changes with every message and every Wake,
// so a waiter that read it before either does not sleep through it.
struct alignas(64) ShmChannel::Box {
  std::atomic<uint32_t> seq;
  std::atomic<uint32_t> taken;
  std::atomic<uint32_t> signal;
  std::atomic<uint32_t> waiters;
  std::atomic<uint32_t> wakes;   // Wake calls, so that a waiter tells them from stale wakes
  std::atomic<uint64_t> length;  // the posted message's bytes, or kElsewhere
};

namespace {

using Box = ShmChannel::Box;

size_t DataOffset(size_t header) { return (header + kPage - 1) / kPage * kPage; }

// Publishes the message written before it and wakes its waiter.
void Signal(Box& b) {
  b.seq.fetch_add(1, std::memory_order_seq_cst);
  b.signal.fetch_add(1, std::memory_order_seq_cst);
  // Pairs with Wait's increment of `waiters` before it reads `signal` (all seq_cst): either
  // the waiter reads the new signal (and sees the message) or this sees the waiter.
  if (b.waiters.load(std::memory_order_seq_cst) > 0) FutexWakeAll(&b.signal);
}

}  // namespace

struct ShmChannel::Layout {
  uint64_t magic;
  uint32_t version;
  uint32_t reserved;
  uint64_t capacity;
  Box box[2];
};

namespace {

ShmChannel::Layout* LayoutOf(void* base) { return static_cast<ShmChannel::Layout*>(base); }

// The previous message of `b` was taken (Post would otherwise overwrite it).
absl::Status CheckFree(const Box& b) {
  if (b.taken.load(std::memory_order_acquire) != b.seq.load(std::memory_order_relaxed)) {
    return absl::FailedPreconditionError("the mailbox still holds the previous message");
  }
  return absl::OkStatus();
}

}  // namespace

ShmChannel::ShmChannel(std::unique_ptr<SharedMemory> shm, size_t capacity)
    : shm_(std::move(shm)), capacity_(capacity) {}

ShmChannel::~ShmChannel() = default;

absl::StatusOr<std::unique_ptr<ShmChannel>> ShmChannel::Create(size_t capacity) {
  if (capacity == 0 || capacity > (size_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("a mailbox of ", capacity, " bytes"));
  }
  capacity = (capacity + kPage - 1) / kPage * kPage;
  absl::StatusOr<std::unique_ptr<SharedMemory>> mapped =
      SharedMemory::Create("tessera-step-channel", DataOffset(sizeof(Layout)) + 2 * capacity);
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<SharedMemory> shm = *std::move(mapped);
  Layout* layout = new (shm->data()) Layout();
  layout->version = kVersion;
  layout->capacity = capacity;
  for (Box& b : layout->box) {
    b.seq.store(0);
    b.taken.store(0);
    b.signal.store(0);
    b.waiters.store(0);
    b.wakes.store(0);
    b.length.store(0);
  }
  std::atomic_thread_fence(std::memory_order_release);
  layout->magic = kMagic;
  return std::unique_ptr<ShmChannel>(new ShmChannel(std::move(shm), capacity));
}

absl::StatusOr<std::unique_ptr<ShmChannel>> ShmChannel::Attach(int fd) {
  absl::StatusOr<std::unique_ptr<SharedMemory>> mapped = SharedMemory::Map(fd, "step channel");
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<SharedMemory> shm = *std::move(mapped);
  const size_t size = shm->size();
  const Layout* layout = LayoutOf(shm->data());
  if (size < DataOffset(sizeof(Layout)) || layout->magic != kMagic || layout->version != kVersion ||
      DataOffset(sizeof(Layout)) + 2 * layout->capacity != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("descriptor ", fd, " is not a version ", kVersion, " step channel"));
  }
  const size_t capacity = layout->capacity;
  return std::unique_ptr<ShmChannel>(new ShmChannel(std::move(shm), capacity));
}

Box& ShmChannel::BoxOf(Mailbox box) const {
  return LayoutOf(shm_->data())->box[static_cast<int>(box)];
}

char* ShmChannel::DataOf(Mailbox box) const {
  return shm_->data() + DataOffset(sizeof(Layout)) + static_cast<size_t>(box) * capacity_;
}

absl::Status ShmChannel::Post(Mailbox box, size_t size, absl::FunctionRef<void(char*)> write) {
  Box& b = BoxOf(box);
  TESSERA_RETURN_IF_ERROR(CheckFree(b));
  if (size > capacity_) {
    return absl::OutOfRangeError(
        absl::StrCat("a ", size, "-byte message exceeds the ", capacity_, "-byte mailbox"));
  }
  write(DataOf(box));
  b.length.store(size, std::memory_order_relaxed);
  Signal(b);
  return absl::OkStatus();
}

absl::Status ShmChannel::PostElsewhere(Mailbox box) {
  Box& b = BoxOf(box);
  TESSERA_RETURN_IF_ERROR(CheckFree(b));
  b.length.store(kElsewhere, std::memory_order_relaxed);
  Signal(b);
  return absl::OkStatus();
}

absl::Status ShmChannel::PostOrSendElsewhere(Mailbox box, size_t size,
                                             absl::FunctionRef<void(char*)> write,
                                             absl::FunctionRef<bool()> send_elsewhere) {
  absl::Status posted = Post(box, size, write);
  if (!absl::IsOutOfRange(posted)) return posted;
  // Sent first, then the marker: the receiver that sees the marker finds the message
  // there or on its way.
  if (!send_elsewhere()) {
    return absl::UnavailableError(
        absl::StrCat("a ", size, "-byte message too large for the mailbox could not be sent"));
  }
  return PostElsewhere(box);
}

ShmChannel::Taken ShmChannel::Take(Mailbox box, absl::FunctionRef<void(const char*, size_t)> read) {
  Box& b = BoxOf(box);
  const uint32_t seq = b.seq.load(std::memory_order_acquire);
  if (seq == b.taken.load(std::memory_order_relaxed)) return Taken::kNothing;
  const uint64_t length = b.length.load(std::memory_order_relaxed);
  Taken what = Taken::kElsewhere;
  if (length != kElsewhere) {
    // The other process is ours, but a length past the mailbox must not read past it.
    read(DataOf(box), length > capacity_ ? capacity_ : static_cast<size_t>(length));
    what = Taken::kMessage;
  }
  b.taken.store(seq, std::memory_order_release);
  return what;
}

bool ShmChannel::Untaken(Mailbox box) const {
  const Box& b = BoxOf(box);
  return b.seq.load(std::memory_order_acquire) != b.taken.load(std::memory_order_acquire);
}

bool ShmChannel::Wait(Mailbox box, std::chrono::microseconds timeout,
                      std::chrono::microseconds poll) {
  Box& b = BoxOf(box);
  auto ready = [this, box] { return Untaken(box); };
  if (ready()) return true;
  if (poll.count() > 0) {
    poll = std::min(poll, timeout);
    if (YieldingPoll(ready, poll)) return true;
    timeout -= poll;
  }
  // A futex wait also returns for a wake meant for an earlier wait (a poster saw that
  // waiter just as it found the message and left), so it sleeps again until the message,
  // the deadline or a Wake call.
  const uint32_t wakes = b.wakes.load(std::memory_order_seq_cst);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  b.waiters.fetch_add(1, std::memory_order_seq_cst);
  while (true) {
    const uint32_t signal = b.signal.load(std::memory_order_seq_cst);
    if (ready() || b.wakes.load(std::memory_order_seq_cst) != wakes) break;
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    FutexWait(&b.signal, signal, left);
  }
  b.waiters.fetch_sub(1, std::memory_order_seq_cst);
  return ready();
}

void ShmChannel::Wake(Mailbox box) {
  Box& b = BoxOf(box);
  b.wakes.fetch_add(1, std::memory_order_seq_cst);
  b.signal.fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(&b.signal);
}

}  // namespace tessera::ipc
