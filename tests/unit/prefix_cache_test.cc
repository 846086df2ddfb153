// Automatic prefix caching in the block manager and the scheduler, on hand-worked cases:
// what is shared (full, computed blocks of the same tokens and salt, never a prompt's last
// token; with a look-ahead, the same tokens after the block too), hold counts, eviction order,
// reset, the invariant checker, and admission that starts after the cached prefix and gives the
// matched blocks back when it cannot fit.
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "controller/serving/block_manager.h"
#include "controller/serving/scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::serving {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int32_t> Range(int32_t from, int32_t n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A sequence's blocks as the engine drives them: reserve for `tokens`, "compute" them all,
// offer the full blocks to the cache.
std::vector<int32_t> Computed(BlockManager& b, const std::vector<int32_t>& tokens,
                              const std::string& salt = "") {
  std::vector<int32_t> table;
  const int max_blocks = static_cast<int>((tokens.size() - 1) / b.block_size());
  const int hit = b.AcquirePrefix(table, tokens, salt, max_blocks);
  int committed = hit;
  EXPECT_TRUE(b.Reserve(table, static_cast<int64_t>(tokens.size())));
  b.CacheFullBlocks(table, tokens, salt, static_cast<int64_t>(tokens.size()), &committed);
  EXPECT_EQ(committed, static_cast<int>(tokens.size()) / b.block_size());
  return table;
}

TEST(PrefixCache, SharesTheFullComputedBlocksOfAPrefix) {
  BlockManager b(8, 4, /*prefix_caching=*/true);
  const std::vector<int32_t> a = Range(0, 10);  // blocks [0-3] [4-7] [8 9]
  std::vector<int32_t> ta = Computed(b, a);
  EXPECT_THAT(ta, ElementsAre(0, 1, 2));
  EXPECT_EQ(b.cached_blocks(), 2);  // the partly filled third block is a's alone

  const std::vector<int32_t> prompt = Concat(Range(0, 8), {100, 101, 102});
  std::vector<int32_t> tb;
  EXPECT_EQ(b.AcquirePrefix(tb, prompt, "", 2), 2);
  EXPECT_THAT(tb, ElementsAre(0, 1));
  EXPECT_EQ(b.used_blocks(), 3);  // shared blocks count once
  EXPECT_TRUE(b.Reserve(tb, 11));
  EXPECT_THAT(tb, ElementsAre(0, 1, 3));
  EXPECT_TRUE(b.CheckInvariants({&ta, &tb}).ok()) << b.CheckInvariants({&ta, &tb});

  b.Release(ta);
  EXPECT_EQ(b.used_blocks(), 3);  // 0 and 1 are still b's; a's block 2 is free
  EXPECT_TRUE(b.CheckInvariants({&tb}).ok()) << b.CheckInvariants({&tb});
  b.Release(tb);
  EXPECT_EQ(b.used_blocks(), 0);
  EXPECT_EQ(b.free_blocks(), 8);
  EXPECT_EQ(b.cached_blocks(), 2);  // released, still matchable
  EXPECT_TRUE(b.CheckInvariants({}).ok()) << b.CheckInvariants({});
  std::vector<int32_t> tc;
  EXPECT_EQ(b.AcquirePrefix(tc, a, "", 2), 2);
  b.Release(tc);
}

TEST(PrefixCache, MatchesStopAtTheFirstDifferenceAndTheLimit) {
  BlockManager b(8, 4, true);
  std::vector<int32_t> t = Computed(b, Range(0, 12));
  b.Release(t);
  ASSERT_EQ(b.cached_blocks(), 3);
  // The same 12 tokens again: the engine passes (12 - 1) / 4 = 2, so the last block (which
  // holds the token to sample from) is recomputed, never written while shared.
  EXPECT_EQ(b.AcquirePrefix(t, Range(0, 12), "", 2), 2);
  b.Release(t);
  // One token differs in the second block: only the first matches.
  std::vector<int32_t> other = Range(0, 12);
  other[5] = 99;
  EXPECT_EQ(b.AcquirePrefix(t, other, "", 2), 1);
  b.Release(t);
  // The first token differs: nothing matches, even though later blocks are equal.
  other = Range(0, 12);
  other[0] = 99;
  EXPECT_EQ(b.AcquirePrefix(t, other, "", 2), 0);
  EXPECT_TRUE(t.empty());
  // Fewer tokens than a block.
  EXPECT_EQ(b.AcquirePrefix(t, Range(0, 3), "", 0), 0);
  EXPECT_TRUE(b.CheckInvariants({}).ok());
}

TEST(PrefixCache, OnlyTheSameSaltShares) {
  BlockManager b(8, 4, true);
  std::vector<int32_t> t = Computed(b, Range(0, 9), "tenant-a");
  b.Release(t);
  EXPECT_EQ(b.AcquirePrefix(t, Range(0, 9), "tenant-b", 2), 0);
  EXPECT_EQ(b.AcquirePrefix(t, Range(0, 9), "", 2), 0);
  EXPECT_EQ(b.AcquirePrefix(t, Range(0, 9), "tenant-a", 2), 2);
  b.Release(t);
  // Each salt caches its own copy.
  t = Computed(b, Range(0, 9), "tenant-b");
  b.Release(t);
  EXPECT_EQ(b.cached_blocks(), 4);
  EXPECT_EQ(b.AcquirePrefix(t, Range(0, 9), "tenant-b", 2), 2);
  b.Release(t);
}

TEST(PrefixCache, WithoutPrefixCachingNothingIsShared) {
  BlockManager b(8, 4);
  std::vector<int32_t> t = Computed(b, Range(0, 9));
  b.Release(t);
  EXPECT_EQ(b.cached_blocks(), 0);
  EXPECT_EQ(b.AcquirePrefix(t, Range(0, 9), "", 2), 0);
  EXPECT_TRUE(b.CheckInvariants({}).ok());
}

TEST(PrefixCache, EvictsTheLeastRecentlyReleasedTailFirstAndNeverMatchesItAgain) {
  BlockManager b(4, 2, true);
  const std::vector<int32_t> x = {1, 2, 3, 4, 50}, y = {5, 6, 7, 8, 60};
  std::vector<int32_t> tx = Computed(b, x);  // blocks 0 1 (cached) 2 (partial)
  b.Release(tx);
  std::vector<int32_t> ty = Computed(b, y);  // the free blocks first: 2 3, then evicts 1
  EXPECT_THAT(ty, ElementsAre(2, 3, 1));
  b.Release(ty);
  // y's first two blocks are cached; of x only [1 2] is left: [3 4] was evicted (a tail
  // before its prefix).
  std::vector<int32_t> t;
  EXPECT_EQ(b.AcquirePrefix(t, x, "", 2), 1);
  EXPECT_THAT(t, ElementsAre(0));
  b.Release(t);
  EXPECT_EQ(b.AcquirePrefix(t, y, "", 2), 2);
  b.Release(t);
  // A reservation that needs every block evicts them all; none matches afterwards.
  ASSERT_TRUE(b.Reserve(t, 8));
  EXPECT_EQ(b.cached_blocks(), 0);
  b.Release(t);
  EXPECT_EQ(b.AcquirePrefix(t, x, "", 2), 0);
  EXPECT_EQ(b.AcquirePrefix(t, y, "", 2), 0);
  EXPECT_TRUE(b.CheckInvariants({}).ok()) << b.CheckInvariants({});
}

TEST(PrefixCache, MatchedBlocksAreNotEvictedWhileHeld) {
  BlockManager b(3, 2, true);
  std::vector<int32_t> t = Computed(b, {1, 2, 3, 4, 5});
  b.Release(t);
  std::vector<int32_t> held;
  ASSERT_EQ(b.AcquirePrefix(held, {1, 2, 3, 4, 5}, "", 2), 2);
  EXPECT_EQ(b.free_blocks(), 1);
  std::vector<int32_t> other;
  EXPECT_FALSE(b.Reserve(other, 4));  // two blocks: only one is free
  EXPECT_TRUE(b.Reserve(other, 2));
  EXPECT_EQ(b.cached_blocks(), 2);
  EXPECT_TRUE(b.CheckInvariants({&held, &other}).ok());
  b.Release(held);
  b.Release(other);
}

TEST(PrefixCache, IdenticalContentComputedTwiceKeepsOneCachedCopy) {
  BlockManager b(8, 2, true);
  // Two sequences with the same prompt, admitted together: neither finds the other's blocks.
  std::vector<int32_t> p = {1, 2, 3, 4, 5}, t1, t2;
  ASSERT_TRUE(b.Reserve(t1, 5));
  ASSERT_TRUE(b.Reserve(t2, 5));
  int c1 = 0, c2 = 0;
  b.CacheFullBlocks(t1, p, "", 5, &c1);
  b.CacheFullBlocks(t2, p, "", 5, &c2);
  EXPECT_EQ(b.cached_blocks(), 2);  // t1's; t2's copies stay private
  EXPECT_TRUE(b.CheckInvariants({&t1, &t2}).ok());
  b.Release(t2);
  EXPECT_EQ(b.free_blocks(), 8 - 3);
  b.Release(t1);
  std::vector<int32_t> t;
  EXPECT_EQ(b.AcquirePrefix(t, p, "", 2), 2);
  EXPECT_THAT(t, ElementsAre(0, 1));
  b.Release(t);
}

// With a look-ahead token (MTP drafting) a block also waits for the token after it.
TEST(PrefixCache, OnlyComputedTokensAreCached) {
  for (int lookahead : {0, 1}) {
    SCOPED_TRACE(lookahead);
    BlockManager b(8, 4, true, lookahead);
    std::vector<int32_t> p = Range(0, 12), t;
    ASSERT_TRUE(b.Reserve(t, 12));
    int committed = 0;
    b.CacheFullBlocks(t, p, "", 6, &committed);  // a first chunk of 6 tokens
    EXPECT_EQ(committed, 1);
    EXPECT_EQ(b.cached_blocks(), 1);
    b.CacheFullBlocks(t, p, "", 8, &committed);  // the second block, not what follows it
    EXPECT_EQ(committed, 2 - lookahead);
    b.CacheFullBlocks(t, p, "", 12, &committed);  // the third has no token after it yet
    EXPECT_EQ(committed, 3 - lookahead);
    EXPECT_EQ(b.cached_blocks(), 3 - lookahead);
    b.Release(t);
    EXPECT_TRUE(b.CheckInvariants({}).ok()) << b.CheckInvariants({});
  }
}

TEST(PrefixCache, ResetForgetsEveryBlockAndLeavesHoldersTheirs) {
  BlockManager b(8, 4, true);
  std::vector<int32_t> held = Computed(b, Range(0, 9));
  std::vector<int32_t> t = Computed(b, Range(100, 9));
  b.Release(t);
  ASSERT_EQ(b.cached_blocks(), 4);
  b.ResetPrefixCache();
  EXPECT_EQ(b.cached_blocks(), 0);
  EXPECT_EQ(b.used_blocks(), 3);
  EXPECT_TRUE(b.CheckInvariants({&held}).ok()) << b.CheckInvariants({&held});
  EXPECT_EQ(b.AcquirePrefix(t, Range(0, 9), "", 2), 0);
  EXPECT_EQ(b.AcquirePrefix(t, Range(100, 9), "", 2), 0);
  b.Release(held);
  EXPECT_EQ(b.free_blocks(), 8);
  EXPECT_TRUE(b.CheckInvariants({}).ok());
}

TEST(PrefixCache, TheInvariantCheckNamesWhatIsBroken) {
  BlockManager b(4, 4, true);
  std::vector<int32_t> t = Computed(b, Range(0, 9));
  EXPECT_TRUE(b.CheckInvariants({&t}).ok());
  // A table the manager does not know about, and one it does not see.
  std::vector<int32_t> forged = {3};
  absl::Status s = b.CheckInvariants({&t, &forged});
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("block 3 is held 0 times but named by 1"));
  s = b.CheckInvariants({});
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("held 1 times but named by 0"));
  std::vector<int32_t> out_of_range = {7};
  EXPECT_THAT(std::string(b.CheckInvariants({&out_of_range}).message()),
              HasSubstr("names block 7 of 4"));
  b.Release(t);
}

// ---- the scheduler ----------------------------------------------------------------------

std::unique_ptr<Sequence> Seq(std::vector<int32_t> prompt, std::string salt = "") {
  auto s = std::make_unique<Sequence>();
  s->tokens = std::move(prompt);
  s->prompt_len = static_cast<int32_t>(s->tokens.size());
  s->request.cache_salt = std::move(salt);
  return s;
}

// Applies a plan as the engine does.
void Advance(Scheduler& sched, const StepPlan& plan) {
  for (const ScheduledChunk& c : plan.chunks) {
    c.seq->num_computed += c.n_tokens;
    sched.CacheComputed(c.seq);
    if (c.sample) c.seq->tokens.push_back(7);
  }
}

// Under MTP drafting (one look-ahead token) a block is only shared with prompts that also
// share the token after it, and registers once that token is computed.
TEST(PrefixCache, ALookAheadTokenIsPartOfABlocksIdentity) {
  BlockManager b(8, 4, true, /*lookahead=*/1);
  std::vector<int32_t> a = Computed(b, Range(0, 9));
  b.Release(a);
  ASSERT_EQ(b.cached_blocks(), 2);
  std::vector<int32_t> t;
  // The same two blocks, another token after them: only the first block is the same.
  EXPECT_EQ(b.AcquirePrefix(t, Concat(Range(0, 8), {100, 101}), "", 10), 1);
  b.Release(t);
  EXPECT_EQ(b.AcquirePrefix(t, Concat(Range(0, 9), {101}), "", 10), 2);
  b.Release(t);
  // A prompt that ends with the second block has no token after it to compare.
  EXPECT_EQ(b.AcquirePrefix(t, Range(0, 8), "", 10), 1);
  b.Release(t);
  // Without the look-ahead the token after the blocks does not matter.
  BlockManager plain(8, 4, true);
  std::vector<int32_t> p = Computed(plain, Range(0, 9));
  plain.Release(p);
  EXPECT_EQ(plain.AcquirePrefix(t, Concat(Range(0, 8), {100, 101}), "", 10), 2);
  plain.Release(t);
  EXPECT_TRUE(b.CheckInvariants({}).ok()) << b.CheckInvariants({});
}

TEST(PrefixCacheScheduler, AdmissionStartsAfterTheCachedPrefixAndCountsIt) {
  BlockManager blocks(8, 4, true);
  Scheduler sched({8, 64}, &blocks);
  auto a_owned = Seq(Range(0, 10));
  Sequence* a = a_owned.get();
  sched.Enqueue(std::move(a_owned));
  StepPlan p = sched.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].start, 0);
  EXPECT_EQ(p.prefix_queried_tokens, 10);
  EXPECT_EQ(p.prefix_hit_tokens, 0);
  EXPECT_EQ(a->cached_tokens, 0);
  Advance(sched, p);
  // Three decodes: a's tokens 10, 11, 12 are computed, so [8-11] is cached too.
  for (int i = 0; i < 3; ++i) Advance(sched, sched.Schedule());
  EXPECT_EQ(blocks.cached_blocks(), 3);
  sched.Remove(a);

  auto b_owned = Seq(Concat(Range(0, 8), {100, 101, 102}));
  Sequence* b = b_owned.get();
  sched.Enqueue(std::move(b_owned));
  p = sched.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].start, 8);
  EXPECT_EQ(p.chunks[0].n_tokens, 3);
  EXPECT_TRUE(p.chunks[0].sample);
  EXPECT_EQ(p.prefill_tokens, 3);
  EXPECT_EQ(p.prefix_queried_tokens, 11);
  EXPECT_EQ(p.prefix_hit_tokens, 8);
  EXPECT_EQ(b->cached_tokens, 8);
  EXPECT_TRUE(sched.CheckBlocks().ok()) << sched.CheckBlocks();
  sched.Remove(b);
  EXPECT_TRUE(sched.CheckBlocks().ok());
}

TEST(PrefixCacheScheduler, APromptThatCannotFitGivesItsMatchedBlocksBack) {
  BlockManager blocks(3, 4, true);
  Scheduler sched({8, 64}, &blocks);
  auto a = Seq(Range(0, 9));
  Sequence* ap = a.get();
  sched.Enqueue(std::move(a));
  Advance(sched, sched.Schedule());
  sched.Remove(ap);
  ASSERT_EQ(blocks.cached_blocks(), 2);
  // A running sequence holds one block; b matches two blocks but needs two more.
  auto r = Seq({42});
  sched.Enqueue(std::move(r));
  Advance(sched, sched.Schedule());
  auto b_owned = Seq(Concat(Range(0, 8), Range(200, 6)));
  Sequence* b = b_owned.get();
  sched.Enqueue(std::move(b_owned));
  StepPlan p = sched.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);  // only the running decode
  EXPECT_TRUE(b->block_table.empty());
  EXPECT_EQ(b->num_computed, 0);
  EXPECT_EQ(b->cached_tokens, -1);  // not admitted yet: not counted
  EXPECT_EQ(p.prefix_queried_tokens, 0);
  EXPECT_EQ(blocks.cached_blocks(), 2);
  EXPECT_TRUE(sched.CheckBlocks().ok()) << sched.CheckBlocks();
}

TEST(PrefixCacheScheduler, APreemptedSequenceFindsItsReleasedBlocksAgain) {
  BlockManager blocks(4, 2, true);
  Scheduler sched({8, 64}, &blocks);
  auto a_owned = Seq(Range(0, 5)), b_owned = Seq(Range(100, 2));
  Sequence *a = a_owned.get(), *b = b_owned.get();
  sched.Enqueue(std::move(a_owned));
  sched.Enqueue(std::move(b_owned));
  Advance(sched, sched.Schedule());  // a: 3 blocks, b: 1 block; cache full
  ASSERT_EQ(blocks.free_blocks(), 0);
  // b's next token needs a second block and none is free: b (the newest) is preempted.
  StepPlan p = sched.Schedule();
  EXPECT_EQ(p.preempted, 1);
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, a);
  EXPECT_EQ(b->num_computed, 0);
  Advance(sched, p);
  sched.Remove(a);
  // b comes back with [100 101 7]: its released first block is still cached, so only the
  // sampled token is fed again.
  p = sched.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, b);
  EXPECT_EQ(p.chunks[0].start, 2);
  EXPECT_EQ(p.chunks[0].n_tokens, 1);
  EXPECT_EQ(p.prefix_queried_tokens, 0);  // counted at its first admission only
  EXPECT_TRUE(sched.CheckBlocks().ok()) << sched.CheckBlocks();
}

}  // namespace
}  // namespace tessera::serving
