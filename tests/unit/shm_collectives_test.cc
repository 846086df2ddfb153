// ShmCollectives: groups of 2-4 forked processes, each mapping the group from its inherited
// descriptor, run the same 1,500 collectives of random kinds and sizes (many larger than a
// slot, so that they take several rounds and the two slot sets alternate under racing
// ranks); every rank checks every result against values it computes itself: the float sum in
// rank order, the concatenation, the root's bytes. Then a rank that never arrives, and what
// Attach refuses.
#include "common/ipc/shm_collectives.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tessera::ipc {
namespace {

using std::chrono::milliseconds;

// Rank q's value i in collective `op`: reproducible by every rank.
float ValueOf(uint64_t op, int q, size_t i) {
  uint64_t z = op * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(q) * 0xBF58476D1CE4E5B9ull + i;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<int64_t>(z >> 40) - (int64_t{1} << 23)) / (1 << 20);
}

// The child's side: 0 when every result was right, else 1 with the first wrong one on stderr.
int RunRank(int fd, int rank, int world, int ops) {
  auto attached = ShmCollectives::Attach(fd, rank, std::chrono::seconds(20));
  if (!attached.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, std::string(attached.status().message()).c_str());
    return 1;
  }
  ShmCollectives& g = **attached;
  std::mt19937_64 rng(7);  // the same sequence of kinds and sizes on every rank
  for (int op = 0; op < ops; ++op) {
    const int kind = static_cast<int>(rng() % 4);
    // Mostly decode-sized, some several slots long (a slot holds 1,024 floats here).
    const size_t count = rng() % 5 == 0 ? rng() % 5000 : rng() % 800;
    auto fail = [&](const char* what, size_t i) {
      std::fprintf(stderr, "rank %d, op %d (%s of %zu): wrong at %zu\n", rank, op, what, count, i);
      return 1;
    };
    std::vector<float> mine(count);
    for (size_t i = 0; i < count; ++i) mine[i] = ValueOf(op, rank, i);
    if (kind == 0) {
      if (!g.AllReduceSum(mine.data(), count).ok()) return fail("all-reduce status", 0);
      for (size_t i = 0; i < count; ++i) {
        float want = ValueOf(op, 0, i);
        for (int q = 1; q < world; ++q) want += ValueOf(op, q, i);
        if (std::memcmp(&want, &mine[i], sizeof(float)) != 0) return fail("all-reduce", i);
      }
    } else if (kind == 1) {
      std::vector<float> all(count * world, -1.0f);
      if (!g.AllGather(mine.data(), count, all.data()).ok()) return fail("all-gather status", 0);
      for (int q = 0; q < world; ++q) {
        for (size_t i = 0; i < count; ++i) {
          if (all[q * count + i] != ValueOf(op, q, i)) return fail("all-gather", q * count + i);
        }
      }
    } else if (kind == 2) {
      const int root = op % world;
      if (!g.Broadcast(mine.data(), count * sizeof(float), root).ok()) {
        return fail("broadcast status", 0);
      }
      for (size_t i = 0; i < count; ++i) {
        if (mine[i] != ValueOf(op, root, i)) return fail("broadcast", i);
      }
    } else if (!g.Barrier().ok()) {
      return fail("barrier", 0);
    }
  }
  return 0;
}

TEST(ShmCollectives, ForkedRanksAgreeWithIndependentResults) {
  for (int world : {2, 3, 4}) {
    SCOPED_TRACE(world);
    auto group = ShmCollectives::Create(world, 4096);
    ASSERT_TRUE(group.ok()) << group.status();
    EXPECT_EQ((*group)->slot_bytes(), 4096u);
    std::vector<pid_t> pids;
    for (int r = 0; r < world; ++r) {
      const int fd = dup((*group)->fd());  // what a spawned worker inherits
      ASSERT_GE(fd, 0);
      const pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) _exit(RunRank(fd, r, world, 1500));
      close(fd);
      pids.push_back(pid);
    }
    for (pid_t pid : pids) {
      int status = 0;
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    }
  }
}

TEST(ShmCollectives, ARankThatNeverArrivesIsNamed) {
  auto group = ShmCollectives::Create(3, 4096);
  ASSERT_TRUE(group.ok()) << group.status();
  auto rank1 = ShmCollectives::Attach(dup((*group)->fd()), 1, milliseconds(200));
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  std::vector<float> v(10, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = (*rank1)->AllReduceSum(v.data(), v.size());
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(s.message().find("rank(s) 0, 2"), std::string::npos) << s;
  EXPECT_NE(s.message().find("all-reduce"), std::string::npos) << s;
}

TEST(ShmCollectives, RefusesWhatIsNotAGroup) {
  EXPECT_TRUE(absl::IsInvalidArgument(ShmCollectives::Create(0, 4096).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ShmCollectives::Create(2, 0).status()));

  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EXPECT_TRUE(
      absl::IsInvalidArgument(ShmCollectives::Attach(pipe_fds[0], 0, milliseconds(100)).status()));
  close(pipe_fds[0]);
  close(pipe_fds[1]);

  const int zeros = memfd_create("not-a-group", MFD_CLOEXEC);
  ASSERT_GE(zeros, 0);
  ASSERT_EQ(ftruncate(zeros, 3 * 4096), 0);
  auto z = ShmCollectives::Attach(zeros, 0, milliseconds(100));
  EXPECT_TRUE(absl::IsInvalidArgument(z.status())) << z.status();
  EXPECT_NE(z.status().message().find("is not a version 1 collective group"), std::string::npos)
      << z.status();

  auto group = ShmCollectives::Create(2, 4096);
  ASSERT_TRUE(group.ok()) << group.status();
  auto outside = ShmCollectives::Attach(dup((*group)->fd()), 2, milliseconds(100));
  EXPECT_TRUE(absl::IsInvalidArgument(outside.status())) << outside.status();
  // The creator holds the mapping for its children; it takes part in no collective.
  float v = 1.0f;
  EXPECT_TRUE(absl::IsFailedPrecondition((*group)->AllReduceSum(&v, 1)));
  EXPECT_TRUE(absl::IsFailedPrecondition((*group)->Barrier()));
}

}  // namespace
}  // namespace tessera::ipc
