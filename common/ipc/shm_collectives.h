// Collectives among processes on one host through one shared memory mapping: the CPU
// workers of a tensor-parallel group that the controller spawns all-reduce their partial
// sums here instead of over TCP (Gloo). A collective is one memcpy in, a wait for the other
// ranks' arrival (a short spin, then a futex), and a read of every rank's slot: a few
// microseconds for a decode step's hidden vector, where a TCP round needs two thread hops
// per message on each side.
//
//   // controller, before forking the ranks (each inherits the descriptor)
//   auto group = ShmCollectives::Create(/*world=*/2, /*slot_bytes=*/4 << 20);
//   // rank r
//   auto group = ShmCollectives::Attach(fd, r, std::chrono::seconds(60));
//   (*group)->AllReduceSum(values, n);
//
// Every rank must call the same sequence of collectives with the same sizes, as with any
// communicator. Each collective is cut into rounds of at most `slot_bytes` per rank; the
// slots alternate between two sets, so a rank writes the next round while slower ranks
// still read the last one. Results are identical on every rank: each sums the slots in
// rank order. A rank that does not arrive within the timeout fails the call with
// DEADLINE_EXCEEDED naming it; the group is then unusable (the controller restarts it).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/ipc/shared_memory.h"
#include "common/util/spin.h"

namespace tessera::ipc {

class ShmCollectives {
 public:
  // A group of `world` ranks with `slot_bytes` per rank and round (rounded up to a page).
  // The creator only holds the mapping for its children (ShareWithChild); it is no rank.
  static absl::StatusOr<std::unique_ptr<ShmCollectives>> Create(int world, size_t slot_bytes);
  // Rank `rank`'s view of a group made by Create in another process, from the inherited
  // descriptor (closed once mapped). InvalidArgument when `fd` is not such a group or the
  // rank is outside it.
  static absl::StatusOr<std::unique_ptr<ShmCollectives>> Attach(int fd, int rank,
                                                                std::chrono::milliseconds timeout);
  ~ShmCollectives();
  ShmCollectives(const ShmCollectives&) = delete;
  ShmCollectives& operator=(const ShmCollectives&) = delete;

  bool ShareWithChild(int target_fd) const { return shm_->ShareWithChild(target_fd); }
  int fd() const { return shm_->fd(); }
  int rank() const { return rank_; }
  int world() const { return world_; }
  size_t slot_bytes() const { return slot_bytes_; }

  // Element-wise sum over the ranks, in place; the same bits on every rank.
  absl::Status AllReduceSum(float* data, size_t count);
  // out = [rank 0's `count` floats][rank 1's]...
  absl::Status AllGather(const float* in, size_t count, float* out);
  // `bytes` bytes of rank `root` copied to every rank.
  absl::Status Broadcast(void* data, size_t bytes, int root);
  absl::Status Barrier();

  struct Header;
  struct RankWord;

 private:
  ShmCollectives(std::unique_ptr<SharedMemory> shm, int rank, int world, size_t slot_bytes,
                 std::chrono::milliseconds timeout);
  // FailedPrecondition for the creator's view (Create), which is no rank.
  absl::Status CheckMember() const;
  // Starts the next round: the slot this rank writes its part of the round into.
  char* BeginRound();
  // Publishes this rank's part of the round and waits until every rank has published
  // theirs; `what` names the collective in errors.
  absl::Status FinishRound(const char* what);
  // Rank r's slot of the current round.
  const char* SlotOf(int r) const;

  std::unique_ptr<SharedMemory> shm_;
  int rank_, world_;
  size_t slot_bytes_;
  std::chrono::milliseconds timeout_;
  uint32_t round_ = 0;      // rounds this rank has started
  SpinPolicy spin_policy_;  // this rank's thread: poll before sleeping?
};

}  // namespace tessera::ipc
