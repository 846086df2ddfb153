// TrimPolicy with chosen readings (each rule of the header, and the sequence that kept a
// daemon at 2.7x its idle size: trims during a long request return little, then the request
// ends), and the mechanism it relies on, with the real allocator: freed heap shows as
// malloc's free bytes, and malloc_trim returns it.
#include "controller/daemon/memory_trimmer.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstring>
#include <memory>
#include <vector>

#include "common/util/proc_stats.h"

namespace tessera::daemon {
namespace {

using Clock = TrimPolicy::Clock;
using std::chrono::milliseconds;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGrowth = 16 * kMiB;
constexpr milliseconds kTick{1000};

struct PolicyTest : ::testing::Test {
  Clock::time_point t0 = Clock::now();
  TrimPolicy policy{kTick, kGrowth, 20 * kMiB, t0};
  Clock::time_point At(int tick) const { return t0 + tick * kTick; }
};

TEST_F(PolicyTest, NeverNearIdleNorWithNothingFree) {
  EXPECT_FALSE(policy.ShouldTrim(35 * kMiB, 100 * kMiB, At(1)));  // 15 MiB above idle
  EXPECT_FALSE(policy.ShouldTrim(60 * kMiB, 3 * kMiB, At(2)));    // malloc holds < growth/4
  EXPECT_TRUE(policy.ShouldTrim(60 * kMiB, 4 * kMiB, At(3)));
}

TEST_F(PolicyTest, IdleIsTheLowestResidentSizeSeen) {
  EXPECT_FALSE(policy.ShouldTrim(12 * kMiB, 0, At(1)));
  EXPECT_TRUE(policy.ShouldTrim(28 * kMiB, 10 * kMiB, At(2)));  // 16 above the new low
}

TEST_F(PolicyTest, AfterATrimWaitsUntilGrowthOrFreeingOrBackoff) {
  ASSERT_TRUE(policy.ShouldTrim(100 * kMiB, 70 * kMiB, At(1)));
  policy.Trimmed(100 * kMiB, 40 * kMiB, 70 * kMiB, At(1));  // returned 60 MiB
  EXPECT_EQ(policy.backoff(), kTick);
  // Still 20 above idle, nothing new: the next look is one interval later.
  EXPECT_FALSE(policy.ShouldTrim(40 * kMiB, 70 * kMiB, At(1) + kTick / 2));
  EXPECT_TRUE(policy.ShouldTrim(40 * kMiB, 70 * kMiB, At(2)));
  policy.Trimmed(40 * kMiB, 40 * kMiB, 70 * kMiB, At(2));  // returned nothing: back off
  EXPECT_EQ(policy.backoff(), 2 * kTick);
  EXPECT_FALSE(policy.ShouldTrim(40 * kMiB, 70 * kMiB, At(3)));
  EXPECT_TRUE(policy.ShouldTrim(40 * kMiB, 70 * kMiB, At(4)));
  policy.Trimmed(40 * kMiB, 40 * kMiB, 70 * kMiB, At(4));
  EXPECT_EQ(policy.backoff(), 4 * kTick);
  // The resident size grew by `growth` since that trim: at once, whatever the back-off.
  EXPECT_FALSE(policy.ShouldTrim(55 * kMiB, 70 * kMiB, At(5)));
  EXPECT_TRUE(policy.ShouldTrim(56 * kMiB, 70 * kMiB, At(5)));
}

TEST_F(PolicyTest, BackoffIsCappedAtSixtyIntervals) {
  Clock::time_point t = At(0);
  for (int i = 0; i < 10; ++i) {
    t += policy.backoff();
    ASSERT_TRUE(policy.ShouldTrim(60 * kMiB, 40 * kMiB, t)) << i;
    policy.Trimmed(60 * kMiB, 60 * kMiB, 40 * kMiB, t);
  }
  EXPECT_EQ(policy.backoff(), 60 * kTick);
}

// A long request holds its memory: each trim during it returns little and the back-off
// grows. When it ends, malloc's free bytes jump, and that alone triggers the trim, at the
// next tick, not after the back-off.
TEST_F(PolicyTest, ARequestEndingTriggersATrimDespiteTheBackoff) {
  Clock::time_point t = At(0);
  for (int i = 0; i < 5; ++i) {  // in use: 80 MiB resident, 5 MiB free, trims return nothing
    t += policy.backoff();
    ASSERT_TRUE(policy.ShouldTrim(80 * kMiB, 5 * kMiB, t));
    policy.Trimmed(80 * kMiB, 79 * kMiB, 5 * kMiB, t);
  }
  ASSERT_EQ(policy.backoff(), 32 * kTick);
  t += kTick;
  EXPECT_FALSE(policy.ShouldTrim(80 * kMiB, 5 * kMiB, t));  // still in use
  t += kTick;
  EXPECT_TRUE(policy.ShouldTrim(80 * kMiB, 55 * kMiB, t));  // the request freed 50 MiB
}

// Memory reused and freed again between two trims: malloc's free bytes dip and come back;
// the rise from the dip counts, and the returned pages, touched again, are returned again.
TEST_F(PolicyTest, FreeBytesRisingFromTheirLowSinceTheLastTrim) {
  ASSERT_TRUE(policy.ShouldTrim(100 * kMiB, 70 * kMiB, At(1)));
  policy.Trimmed(100 * kMiB, 45 * kMiB, 70 * kMiB, At(1));       // 25 above idle stays in use
  policy.Trimmed(45 * kMiB, 45 * kMiB, 70 * kMiB, At(2));        // back-off 2 ticks
  EXPECT_FALSE(policy.ShouldTrim(58 * kMiB, 57 * kMiB, At(3)));  // 13 MiB taken again
  EXPECT_TRUE(policy.ShouldTrim(50 * kMiB, 70 * kMiB, At(3) + kTick / 2));  // and freed
}

// The allocator, not the policy: a fragmented heap (every 64th block kept) cannot shrink
// from the top, so its freed pages stay resident until malloc_trim, and mallinfo2 reports
// them as free. ASan and other sanitizers replace malloc; the premise does not hold there.
TEST(MallocTrim, FreedFragmentedHeapIsReportedFreeAndReturned) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer replaces malloc";
#endif
  constexpr size_t kBlock = 4096;
  constexpr size_t kBlocks = (64 * kMiB) / kBlock;
  std::vector<std::unique_ptr<char[]>> blocks(kBlocks);
  for (auto& b : blocks) {
    b.reset(new char[kBlock]);
    std::memset(b.get(), 1, kBlock);
  }
  const uint64_t full = util::RssBytes();
  const uint64_t free_before = mallinfo2().fordblks;
  for (size_t i = 0; i < kBlocks; ++i) {
    if (i % 64 != 0) blocks[i].reset();
  }
  const uint64_t free_after = mallinfo2().fordblks;
  const uint64_t still = util::RssBytes();
  EXPECT_GE(free_after, free_before + 48 * kMiB);
  EXPECT_GE(still + 8 * kMiB, full) << "freed pages should stay resident before the trim";
  malloc_trim(0);
  const uint64_t trimmed = util::RssBytes();
  EXPECT_LE(trimmed + 48 * kMiB, still)
      << "full " << full << " before trim " << still << " after " << trimmed;
}

}  // namespace
}  // namespace tessera::daemon
