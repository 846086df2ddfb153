#include "common/ipc/shm_collectives.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/util/spin.h"

namespace tessera::ipc {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kMagic = 0x6c6c6f43'61726574;  // "teraColl"
constexpr uint32_t kVersion = 1;
constexpr size_t kPage = 4096;
constexpr int kMaxWorld = 1024;
// How long a rank polls for the others before it sleeps on a futex. Ranks reach a
// collective within microseconds of each other when their shares of the work are equal;
// a futex wake-up costs more than that. Short, so that a rank that waits for a slow one
// gives its core back; and not at all while the OS keeps preempting the rank (SpinPolicy:
// more ranks and threads than cores, where polling takes the core from the rank it waits
// for).
constexpr auto kSpin = std::chrono::microseconds(50);
// The longest single futex sleep: the deadline is checked between sleeps.
constexpr auto kMaxSleep = std::chrono::milliseconds(100);

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

struct ShmCollectives::Header {
  uint64_t magic;
  uint32_t version;
  uint32_t world;
  uint64_t slot_bytes;
};

// One per rank: the last round it published, and how many ranks sleep waiting for it.
struct alignas(64) ShmCollectives::RankWord {
  std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> waiters;
};

namespace {

using Header = ShmCollectives::Header;
using RankWord = ShmCollectives::RankWord;

size_t DataOffset(int world) {
  return RoundUp(RoundUp(sizeof(Header), alignof(RankWord)) + world * sizeof(RankWord), kPage);
}
RankWord* WordsOf(char* base) {
  return reinterpret_cast<RankWord*>(base + RoundUp(sizeof(Header), alignof(RankWord)));
}

// Whether round `r` or a later one is published in `arrived` (rounds wrap around 2^32).
bool Reached(uint32_t arrived, uint32_t r) { return static_cast<int32_t>(arrived - r) >= 0; }

}  // namespace

ShmCollectives::ShmCollectives(std::unique_ptr<SharedMemory> shm, int rank, int world,
                               size_t slot_bytes, std::chrono::milliseconds timeout)
    : shm_(std::move(shm)),
      rank_(rank),
      world_(world),
      slot_bytes_(slot_bytes),
      timeout_(timeout) {}

ShmCollectives::~ShmCollectives() = default;

absl::StatusOr<std::unique_ptr<ShmCollectives>> ShmCollectives::Create(int world,
                                                                       size_t slot_bytes) {
  if (world < 1 || world > kMaxWorld) {
    return absl::InvalidArgumentError(absl::StrCat("a group of ", world, " ranks"));
  }
  if (slot_bytes == 0 || slot_bytes > (size_t{1} << 32)) {
    return absl::InvalidArgumentError(absl::StrCat("collective slots of ", slot_bytes, " bytes"));
  }
  slot_bytes = RoundUp(slot_bytes, kPage);
  absl::StatusOr<std::unique_ptr<SharedMemory>> mapped = SharedMemory::Create(
      "tessera-collectives", DataOffset(world) + 2 * static_cast<size_t>(world) * slot_bytes);
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<SharedMemory> shm = *std::move(mapped);
  Header* h = new (shm->data()) Header();
  h->version = kVersion;
  h->world = static_cast<uint32_t>(world);
  h->slot_bytes = slot_bytes;
  RankWord* words = WordsOf(shm->data());
  for (int r = 0; r < world; ++r) {
    new (&words[r]) RankWord();
    words[r].arrived.store(0);
    words[r].waiters.store(0);
  }
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  return std::unique_ptr<ShmCollectives>(
      new ShmCollectives(std::move(shm), -1, world, slot_bytes, std::chrono::milliseconds(0)));
}

absl::StatusOr<std::unique_ptr<ShmCollectives>> ShmCollectives::Attach(
    int fd, int rank, std::chrono::milliseconds timeout) {
  absl::StatusOr<std::unique_ptr<SharedMemory>> mapped = SharedMemory::Map(fd, "collective group");
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<SharedMemory> shm = *std::move(mapped);
  const auto* h = reinterpret_cast<const Header*>(shm->data());
  const auto not_a_group = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("descriptor ", fd, " is not a version ", kVersion, " collective group"));
  };
  if (shm->size() < sizeof(Header) || h->magic != kMagic || h->version != kVersion ||
      h->world < 1 || h->world > kMaxWorld || h->slot_bytes == 0) {
    return not_a_group();
  }
  const int world = static_cast<int>(h->world);
  const size_t slot_bytes = h->slot_bytes;
  if (shm->size() != DataOffset(world) + 2 * static_cast<size_t>(world) * slot_bytes) {
    return not_a_group();
  }
  if (rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is outside the collective group of ", world));
  }
  return std::unique_ptr<ShmCollectives>(
      new ShmCollectives(std::move(shm), rank, world, slot_bytes, timeout));
}

absl::Status ShmCollectives::CheckMember() const {
  if (rank_ < 0) {
    return absl::FailedPreconditionError(
        "the process that created a collective group is none of its ranks");
  }
  return absl::OkStatus();
}

char* ShmCollectives::BeginRound() {
  ++round_;
  return const_cast<char*>(SlotOf(rank_));
}

const char* ShmCollectives::SlotOf(int r) const {
  const size_t set = round_ & 1;
  return shm_->data() + DataOffset(world_) + (set * world_ + r) * slot_bytes_;
}

absl::Status ShmCollectives::FinishRound(const char* what) {
  RankWord* words = WordsOf(shm_->data());
  // Publish, then wake sleepers: pairs with the waiter's increment of `waiters` before it
  // rereads `arrived` (all seq_cst), so either it sees this round or this sees it.
  words[rank_].arrived.store(round_, std::memory_order_seq_cst);
  if (words[rank_].waiters.load(std::memory_order_seq_cst) > 0) {
    FutexWakeAll(&words[rank_].arrived);
  }
  const auto start = Clock::now();
  const auto spin_until = start + (spin_policy_.Spin() ? kSpin : Clock::duration::zero());
  const auto deadline = start + timeout_;
  for (int j = 0; j < world_; ++j) {
    if (j == rank_) continue;
    std::atomic<uint32_t>& arrived = words[j].arrived;
    for (int i = 0; !Reached(arrived.load(std::memory_order_acquire), round_); ++i) {
      CpuRelax();
      if ((i & 63) == 63 && Clock::now() > spin_until) break;
    }
    if (Reached(arrived.load(std::memory_order_acquire), round_)) continue;
    words[j].waiters.fetch_add(1, std::memory_order_seq_cst);
    bool late = false;
    for (;;) {
      const uint32_t seen = arrived.load(std::memory_order_seq_cst);
      if (Reached(seen, round_)) break;
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) {
        late = true;
        break;
      }
      FutexWait(&arrived, seen,
                std::min<std::chrono::nanoseconds>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(left), kMaxSleep));
    }
    words[j].waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (late) {
      std::string missing;
      for (int k = 0; k < world_; ++k) {
        if (k != rank_ && !Reached(words[k].arrived.load(std::memory_order_acquire), round_)) {
          absl::StrAppend(&missing, missing.empty() ? "" : ", ", k);
        }
      }
      return absl::DeadlineExceededError(
          absl::StrCat(what, " through shared memory: rank ", rank_, " waited ",
                       std::chrono::duration<double>(timeout_).count(), " s for rank(s) ", missing,
                       ", which never arrived (a worker died or stalled)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ShmCollectives::AllReduceSum(float* data, size_t count) {
  if (absl::Status s = CheckMember(); !s.ok()) return s;
  const size_t per_round = slot_bytes_ / sizeof(float);
  for (size_t off = 0; off < count; off += per_round) {
    const size_t n = std::min(per_round, count - off);
    std::memcpy(BeginRound(), data + off, n * sizeof(float));
    if (absl::Status s = FinishRound("all-reduce"); !s.ok()) return s;
    // Every rank adds the slots in rank order, so every rank gets the same bits.
    float* out = data + off;
    const auto* s0 = reinterpret_cast<const float*>(SlotOf(0));
    if (world_ == 1) {
      std::memcpy(out, s0, n * sizeof(float));
    } else {
      const auto* s1 = reinterpret_cast<const float*>(SlotOf(1));
      for (size_t i = 0; i < n; ++i) out[i] = s0[i] + s1[i];
    }
    for (int r = 2; r < world_; ++r) {
      const auto* s = reinterpret_cast<const float*>(SlotOf(r));
      for (size_t i = 0; i < n; ++i) out[i] += s[i];
    }
  }
  return absl::OkStatus();
}

absl::Status ShmCollectives::AllGather(const float* in, size_t count, float* out) {
  if (absl::Status s = CheckMember(); !s.ok()) return s;
  const size_t per_round = slot_bytes_ / sizeof(float);
  for (size_t off = 0; off < count; off += per_round) {
    const size_t n = std::min(per_round, count - off);
    std::memcpy(BeginRound(), in + off, n * sizeof(float));
    if (absl::Status s = FinishRound("all-gather"); !s.ok()) return s;
    for (int r = 0; r < world_; ++r) {
      std::memcpy(out + r * count + off, SlotOf(r), n * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::Status ShmCollectives::Broadcast(void* data, size_t bytes, int root) {
  if (absl::Status s = CheckMember(); !s.ok()) return s;
  if (root < 0 || root >= world_) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast from rank ", root, " in a group of ", world_));
  }
  char* bytes_at = static_cast<char*>(data);
  for (size_t off = 0; off < bytes; off += slot_bytes_) {
    const size_t n = std::min(slot_bytes_, bytes - off);
    char* mine = BeginRound();
    if (rank_ == root) std::memcpy(mine, bytes_at + off, n);
    if (absl::Status s = FinishRound("broadcast"); !s.ok()) return s;
    if (rank_ != root) std::memcpy(bytes_at + off, SlotOf(root), n);
  }
  return absl::OkStatus();
}

absl::Status ShmCollectives::Barrier() {
  if (absl::Status s = CheckMember(); !s.ok()) return s;
  BeginRound();
  return FinishRound("barrier");
}

}  // namespace tessera::ipc
