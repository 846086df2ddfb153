// Speculative decoding's drafts and verification (worker/sampling/speculative.h). N-gram
// drafts and greedy verification are checked against hand-written expectations; sampled
// verification against the distribution it must preserve: tokens generated with drafts
// (from a random drafter, and from a deterministic one) are distributed at every position as
// the target's distribution there (a chi-square test at p = 0.001 over 20,000 generations),
// and the same test rejects plain acceptance of the drafts, so it can fail.
#include "worker/sampling/speculative.h"

#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::sampling {
namespace {

using Ids = std::vector<int32_t>;

TEST(NgramDraft, TakesWhatFollowedTheLongestSuffixMatch) {
  EXPECT_EQ(NgramDraft(Ids{1, 2, 3, 4, 1, 2}, {}), (Ids{3, 4, 1, 2}));
  // The longest suffix that occurs earlier wins over a more recent shorter one.
  EXPECT_EQ(NgramDraft(Ids{1, 2, 3, 9, 2, 3, 7, 1, 2, 3}, {}), (Ids{9, 2, 3, 7}));
  // Of several occurrences, the most recent; the draft stops at the history's end.
  EXPECT_EQ(NgramDraft(Ids{5, 6, 9, 5, 6, 7, 5, 6}, {}), (Ids{7, 5, 6}));
  EXPECT_EQ(NgramDraft(Ids{1, 2, 3, 4, 1, 2}, {.max_draft = 2}), (Ids{3, 4}));
  EXPECT_TRUE(NgramDraft(Ids{1, 2, 3, 4}, {}).empty());
  EXPECT_TRUE(NgramDraft(Ids{7, 1, 2, 7}, {.min_n = 2}).empty());  // only a 1-gram matches
  EXPECT_EQ(NgramDraft(Ids{7, 1, 2, 7}, {}), (Ids{1, 2, 7}));
  EXPECT_TRUE(NgramDraft(Ids{}, {}).empty());
  EXPECT_TRUE(NgramDraft(Ids{3}, {}).empty());
  EXPECT_EQ(NgramDraft(Ids{3, 3}, {}), (Ids{3}));
}

// The drafts by definition, written out: the tokens after the latest earlier start of the
// longest suffix (max_n down to min_n) that occurs before.
Ids BruteForceDrafts(const Ids& h, const NgramOptions& o) {
  const int size = static_cast<int>(h.size());
  for (int n = std::min(o.max_n, size - 1); n >= std::max(o.min_n, 1); --n) {
    for (int start = size - n - 1; start >= 0; --start) {
      bool equal = true;
      for (int i = 0; i < n; ++i) equal = equal && h[start + i] == h[size - n + i];
      if (!equal) continue;
      Ids out;
      for (int i = start + n; i < size && static_cast<int>(out.size()) < o.max_draft; ++i) {
        out.push_back(h[i]);
      }
      return out;
    }
  }
  return {};
}

// The incremental index gives NgramDraft's drafts token by token as a history grows (small
// vocabularies, so that n-grams repeat and recent occurrences must win over older ones), in
// jumps of several tokens (accepted drafts), and after what must rebuild it: other n bounds,
// a shorter history, a changed last token.
TEST(NgramIndex, DraftsWhatNgramDraftDraftsAsTheHistoryGrows) {
  std::mt19937_64 rng(5);
  int nonempty = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int vocab = 2 + trial % 7;
    const NgramOptions o{
        .min_n = 1 + trial % 2, .max_n = 2 + trial % 4, .max_draft = 1 + trial % 5};
    SCOPED_TRACE(testing::Message() << "trial " << trial << " vocab " << vocab);
    NgramIndex index;
    Ids h;
    while (h.size() < 300) {
      const int add = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < add; ++i) h.push_back(static_cast<int32_t>(rng() % vocab));
      const Ids want = BruteForceDrafts(h, o);
      ASSERT_EQ(index.Draft(h, o), want) << "history of " << h.size();
      ASSERT_EQ(NgramDraft(h, o), want) << "history of " << h.size();
      nonempty += !want.empty();
    }
    // Rebuilds: other bounds, a shorter history, the last indexed token changed.
    const NgramOptions other{.min_n = 1, .max_n = 3, .max_draft = 4};
    EXPECT_EQ(index.Draft(h, other), BruteForceDrafts(h, other));
    h.resize(150);
    EXPECT_EQ(index.Draft(h, other), BruteForceDrafts(h, other));
    h[148] = static_cast<int32_t>(vocab + 1);
    h.push_back(h[148]);
    EXPECT_EQ(index.Draft(h, other), BruteForceDrafts(h, other));
  }
  EXPECT_GT(nonempty, 1000);
  NgramIndex empty;
  EXPECT_TRUE(empty.Draft(Ids{}, {}).empty());
  EXPECT_TRUE(empty.Draft(Ids{3}, {}).empty());
  EXPECT_EQ(empty.Draft(Ids{3, 3}, {}), (Ids{3}));
}

TEST(VerifyGreedy, KeepsTheMatchingPrefixThenTheTargetsToken) {
  VerifyResult r = VerifyGreedy(Ids{5, 6, 7}, Ids{5, 6, 8, 9});
  EXPECT_EQ(r.accepted, 2);
  EXPECT_EQ(r.next, 8);
  r = VerifyGreedy(Ids{5, 6, 7}, Ids{5, 6, 7, 4});
  EXPECT_EQ(r.accepted, 3);
  EXPECT_EQ(r.next, 4);
  r = VerifyGreedy(Ids{1}, Ids{2, 3});
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.next, 2);
  r = VerifyGreedy(Ids{}, Ids{4});
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.next, 4);
}

constexpr int kVocab = 6;
constexpr int kPositions = 5;
constexpr int kDrafts = 3;
constexpr int kRuns = 20000;
// The chi-square distribution's 0.999 quantile for kVocab - 1 = 5 degrees of freedom
// (standard tables: 20.515).
constexpr double kCritical = 20.515;

std::vector<double> RandomDistribution(std::mt19937_64& rng) {
  std::vector<double> d(kVocab);
  double total = 0;
  for (double& x : d) total += (x = std::uniform_real_distribution<double>(0.02, 1.0)(rng));
  for (double& x : d) x /= total;
  return d;
}

enum class Drafter { kRandom, kDeterministic };

// Generates kPositions tokens many times with drafts of kDrafts tokens, the target's
// distribution depending on the position only, and returns the chi-square statistic of the
// tokens at each position against that distribution. `plain_acceptance` keeps every draft
// (wrong on purpose).
std::vector<double> ChiSquarePerPosition(Drafter drafter, bool plain_acceptance) {
  std::mt19937_64 rng(2024);
  std::vector<std::vector<double>> p, q;
  for (int i = 0; i < kPositions + kDrafts + 1; ++i) {
    p.push_back(RandomDistribution(rng));
    q.push_back(RandomDistribution(rng));
  }
  // The deterministic drafter always proposes the target's least likely token: a bad drafter
  // makes the rejection path do the work.
  auto least = [&](int pos) {
    return static_cast<int32_t>(std::min_element(p[pos].begin(), p[pos].end()) - p[pos].begin());
  };
  std::vector<std::vector<int>> counts(kPositions, std::vector<int>(kVocab, 0));
  for (int run = 0; run < kRuns; ++run) {
    int pos = 0;
    while (pos < kPositions) {
      Ids drafts;
      for (int k = 0; k < kDrafts; ++k) {
        if (drafter == Drafter::kRandom) {
          std::discrete_distribution<int32_t> draw(q[pos + k].begin(), q[pos + k].end());
          drafts.push_back(draw(rng));
        } else {
          drafts.push_back(least(pos + k));
        }
      }
      const absl::Span<const std::vector<double>> pp(p.data() + pos, kDrafts + 1);
      const absl::Span<const std::vector<double>> qq =
          drafter == Drafter::kRandom
              ? absl::Span<const std::vector<double>>(q.data() + pos, kDrafts)
              : absl::Span<const std::vector<double>>();
      VerifyResult r = VerifySampled(drafts, pp, qq, rng);
      if (plain_acceptance) r = {kDrafts, drafts.back()};  // keeps the drafts as they are
      for (int k = 0; k < r.accepted && pos < kPositions; ++k) ++counts[pos++][drafts[k]];
      if (pos < kPositions && !plain_acceptance) ++counts[pos++][r.next];
    }
  }
  std::vector<double> stats;
  for (int pos = 0; pos < kPositions; ++pos) {
    double chi2 = 0;
    for (int t = 0; t < kVocab; ++t) {
      const double expected = kRuns * p[pos][t];
      chi2 += (counts[pos][t] - expected) * (counts[pos][t] - expected) / expected;
    }
    stats.push_back(chi2);
  }
  return stats;
}

TEST(VerifySampled, TokensAreDistributedAsTheTargetsWithARandomDrafter) {
  const std::vector<double> stats = ChiSquarePerPosition(Drafter::kRandom, false);
  for (int pos = 0; pos < kPositions; ++pos) {
    EXPECT_LT(stats[pos], kCritical) << "position " << pos;
  }
}

TEST(VerifySampled, TokensAreDistributedAsTheTargetsWithADeterministicDrafter) {
  const std::vector<double> stats = ChiSquarePerPosition(Drafter::kDeterministic, false);
  for (int pos = 0; pos < kPositions; ++pos) {
    EXPECT_LT(stats[pos], kCritical) << "position " << pos;
  }
}

TEST(VerifySampled, TheTestRejectsPlainAcceptance) {
  for (Drafter d : {Drafter::kRandom, Drafter::kDeterministic}) {
    const std::vector<double> stats = ChiSquarePerPosition(d, true);
    EXPECT_GT(*std::max_element(stats.begin(), stats.end()), kCritical);
  }
}

TEST(VerifySampled, CertainTargetsAcceptExactly) {
  // p one-hot on the drafts: every draft is kept; one-hot elsewhere: the first is rejected
  // and the target's token comes instead.
  std::mt19937_64 rng(1);
  std::vector<std::vector<double>> p(3, std::vector<double>(4, 0.0));
  p[0][2] = p[1][3] = p[2][1] = 1.0;
  VerifyResult r = VerifySampled(Ids{2, 3}, p, {}, rng);
  EXPECT_EQ(r.accepted, 2);
  EXPECT_EQ(r.next, 1);
  r = VerifySampled(Ids{0, 3}, p, {}, rng);
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.next, 2);
}

}  // namespace
}  // namespace tessera::sampling
