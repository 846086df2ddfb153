// worker/sampling/sampling.h against expectations computed here in double: hand-derived
// small cases, the penalty formulas, softmax frequencies of many seeded draws, and the
// documented draw rule replayed with the test's own std::mt19937_64.
#include "worker/sampling/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::sampling {
namespace {

using ::testing::HasSubstr;

Sampler MakeSampler(SamplingParams params) {
  absl::StatusOr<Sampler> sampler = Sampler::Create(std::move(params));
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  return std::move(*sampler);
}

SamplingParams Seeded(uint64_t seed) {
  SamplingParams p;
  p.seed = seed;
  return p;
}

// log-softmax in double over the tokens in `keep` (all when empty), divided by `t`.
std::vector<double> LogSoftmax(const std::vector<double>& logits, double t = 1.0,
                               const std::vector<int>& keep = {}) {
  std::vector<int> ids = keep;
  if (ids.empty()) {
    ids.resize(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
  }
  double max = -INFINITY;
  for (int i : ids) max = std::max(max, logits[i] / t);
  double sum = 0;
  for (int i : ids) sum += std::exp(logits[i] / t - max);
  std::vector<double> out(logits.size(), -INFINITY);
  for (int i : ids) out[i] = logits[i] / t - max - std::log(sum);
  return out;
}

std::vector<float> ToFloat(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// Token ids sorted best first (logit descending, then id ascending).
std::vector<int> Ranked(const std::vector<double>& logits) {
  std::vector<int> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  return ids;
}

// Deterministic test logits: standard normal noise from the test's own generator.
std::vector<double> NoiseLogits(size_t n, uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(n);
  for (double& x : v) {
    // Box-Muller on the raw output: portable, unlike std::normal_distribution.
    const double u1 = (static_cast<double>(rng() >> 11) + 1) * 0x1.0p-53;
    const double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    // Rounded to float, the precision the sampler sees, so that ranks agree.
    x = static_cast<float>(scale * std::sqrt(-2 * std::log(u1)) *
                           std::cos(2 * std::numbers::pi * u2));
  }
  return v;
}

TEST(SamplingParams, DefaultsAreValid) { EXPECT_TRUE(SamplingParams{}.Validate().ok()); }

TEST(SamplingParams, OutOfRangeValuesNameTheParameter) {
  struct Case {
    void (*set)(SamplingParams&);
    const char* name;
  };
  const Case cases[] = {
      {[](SamplingParams& p) { p.temperature = -0.5f; }, "temperature"},
      {[](SamplingParams& p) { p.temperature = NAN; }, "temperature"},
      {[](SamplingParams& p) { p.top_k = -2; }, "top_k"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "top_p"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p"},
      {[](SamplingParams& p) { p.min_p = -0.1f; }, "min_p"},
      {[](SamplingParams& p) { p.min_p = 1.1f; }, "min_p"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty"},
      {[](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty"},
      {[](SamplingParams& p) { p.frequency_penalty = -3.0f; }, "frequency_penalty"},
      {[](SamplingParams& p) { p.top_logprobs = 21; }, "top_logprobs"},
      {[](SamplingParams& p) { p.top_logprobs = -1; }, "top_logprobs"},
      {[](SamplingParams& p) {
         p.stop_token_ids = {2, -7};
       },
       "stop_token_ids"},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p);
    absl::Status status = p.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.name));
    EXPECT_FALSE(Sampler::Create(p).ok()) << c.name;
  }
  SamplingParams edge;
  edge.temperature = 0;
  edge.top_k = -1;
  edge.top_p = 1;
  edge.min_p = 1;
  edge.presence_penalty = -2;
  edge.frequency_penalty = 2;
  edge.top_logprobs = 20;
  EXPECT_TRUE(edge.Validate().ok());
  absl::Status status = [] {
    SamplingParams p;
    p.top_p = 1.5f;
    return p.Validate();
  }();
  EXPECT_EQ(status.message(), "sampling parameter top_p: expected a value in (0, 1], got 1.5");
}

TEST(Sampler, GreedyIsArgmaxWithTiesToLowestId) {
  SamplingParams p;
  p.temperature = 0;
  Sampler sampler = MakeSampler(p);
  EXPECT_EQ(sampler.Sample(std::vector<float>{1, 3, 3, 2}).token, 1);
  EXPECT_EQ(sampler.Sample(std::vector<float>{-5, -4, -4.5f}).token, 1);
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const std::vector<double> logits = NoiseLogits(5000, seed, 3.0);
    EXPECT_EQ(sampler.Sample(ToFloat(logits)).token, Ranked(logits)[0]);
  }
  // NaN never wins; +inf does.
  EXPECT_EQ(sampler.Sample(std::vector<float>{NAN, 0.0f, -1.0f}).token, 1);
  EXPECT_EQ(sampler.Sample(std::vector<float>{0.0f, INFINITY, 1.0f}).token, 1);
}

TEST(Sampler, EmptyLogits) {
  Sampler sampler = MakeSampler(Seeded(1));
  SampleResult r = sampler.Sample({});
  EXPECT_EQ(r.token, -1);
  EXPECT_TRUE(std::isnan(r.logprob));
}

TEST(Sampler, TopPOfOneTwoThreeAtHalfKeepsOnlyTheLast) {
  // softmax(1, 2, 3) = (0.090, 0.245, 0.665): 0.665 >= 0.5 alone.
  SamplingParams p = Seeded(7);
  p.top_p = 0.5f;
  p.logprobs_mode = LogprobsMode::kProcessed;
  p.top_logprobs = 3;
  Sampler sampler = MakeSampler(p);
  for (int i = 0; i < 200; ++i) {
    SampleResult r = sampler.Sample(std::vector<float>{1, 2, 3});
    ASSERT_EQ(r.token, 2);
    EXPECT_EQ(r.logprob, 0.0f);
    ASSERT_EQ(r.top_logprobs.size(), 1u);
  }
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  // 0.665 < 0.7 <= 0.665 + 0.245: ids 2 and 1, renormalized.
  const std::vector<double> logits = {1, 2, 3};
  SamplingParams p = Seeded(7);
  p.top_p = 0.7f;
  p.logprobs_mode = LogprobsMode::kProcessed;
  p.top_logprobs = 3;
  Sampler sampler = MakeSampler(p);
  const std::vector<double> expected = LogSoftmax(logits, 1.0, {1, 2});
  bool saw[3] = {false, false, false};
  for (int i = 0; i < 300; ++i) {
    SampleResult r = sampler.Sample(ToFloat(logits));
    saw[r.token] = true;
    EXPECT_NEAR(r.logprob, expected[r.token], 1e-6);
    ASSERT_EQ(r.top_logprobs.size(), 2u);
    EXPECT_EQ(r.top_logprobs[0].token, 2);
    EXPECT_NEAR(r.top_logprobs[0].logprob, expected[2], 1e-6);
    EXPECT_EQ(r.top_logprobs[1].token, 1);
    EXPECT_NEAR(r.top_logprobs[1].logprob, expected[1], 1e-6);
  }
  EXPECT_FALSE(saw[0]);
  EXPECT_TRUE(saw[1]);
  EXPECT_TRUE(saw[2]);
}

TEST(Sampler, MinPDropsTokensBelowTheFractionOfTheMax) {
  // Probabilities relative to the best: 1, 0.5, 0.2, 0.05. min_p 0.1 drops the last.
  const std::vector<double> logits = {0, std::log(0.5), std::log(0.2), std::log(0.05)};
  SamplingParams p = Seeded(3);
  p.min_p = 0.1f;
  p.logprobs_mode = LogprobsMode::kProcessed;
  p.top_logprobs = 4;
  Sampler sampler = MakeSampler(p);
  SampleResult r = sampler.Sample(ToFloat(logits));
  ASSERT_EQ(r.top_logprobs.size(), 3u);
  const double expected[] = {std::log(1 / 1.7), std::log(0.5 / 1.7), std::log(0.2 / 1.7)};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r.top_logprobs[i].token, i);
    EXPECT_NEAR(r.top_logprobs[i].logprob, expected[i], 1e-6);
  }
}

TEST(Sampler, TopKKeepsTheKBest) {
  const std::vector<double> logits = {1, 2, 3, 0.5, 3};
  SamplingParams p = Seeded(5);
  p.top_k = 2;  // ids 2 and 4 (tie at 3), not 1.
  p.logprobs_mode = LogprobsMode::kProcessed;
  p.top_logprobs = 5;
  p.temperature = 0.5f;
  Sampler sampler = MakeSampler(p);
  const std::vector<double> expected = LogSoftmax(logits, 0.5, {2, 4});
  for (int i = 0; i < 100; ++i) {
    SampleResult r = sampler.Sample(ToFloat(logits));
    ASSERT_TRUE(r.token == 2 || r.token == 4) << r.token;
    ASSERT_EQ(r.top_logprobs.size(), 2u);
    EXPECT_EQ(r.top_logprobs[0].token, 2);
    EXPECT_EQ(r.top_logprobs[1].token, 4);
    EXPECT_NEAR(r.top_logprobs[0].logprob, expected[2], 1e-6);
  }
}

TEST(Sampler, PenaltiesFollowTheirFormulas) {
  const std::vector<double> logits = {2, -1, 0.5, 3, -2};
  SamplingParams p = Seeded(11);
  p.repetition_penalty = 1.5f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.logprobs_mode = LogprobsMode::kProcessed;
  p.top_logprobs = 5;
  Sampler sampler = MakeSampler(p);
  sampler.AddPromptTokens(std::vector<int32_t>{0, 1, 0, 99});  // 99: beyond the vocabulary
  sampler.AcceptGeneratedToken(3);
  sampler.AcceptGeneratedToken(3);
  sampler.AcceptGeneratedToken(2);
  // Repetition (prompt and output): positive / 1.5, negative * 1.5. Frequency and
  // presence (output only): - 0.5 * count - 0.25.
  const std::vector<double> penalized = {2 / 1.5, -1 * 1.5, 0.5 / 1.5 - 0.5 - 0.25,
                                         3 / 1.5 - 1.0 - 0.25, -2};
  const std::vector<double> expected = LogSoftmax(penalized);
  SampleResult r = sampler.Sample(ToFloat(logits));
  ASSERT_EQ(r.top_logprobs.size(), 5u);
  const std::vector<int> order = Ranked(penalized);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r.top_logprobs[i].token, order[i]);
    EXPECT_NEAR(r.top_logprobs[i].logprob, expected[order[i]], 1e-6) << order[i];
  }
  EXPECT_NEAR(r.logprob, expected[r.token], 1e-6);
}

TEST(Sampler, FrequencyPenaltyCountsOnlyGeneratedTokens) {
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 1.0f;
  Sampler sampler = MakeSampler(p);
  sampler.AddPromptTokens(std::vector<int32_t>{0, 0, 0});
  const std::vector<float> logits = {1.0f, 0.5f};
  // 1 > 0.5 -> 0; then 0 < 0.5 -> 1; then 0 > -0.5 -> 0; then -1 < -0.5 -> 1.
  std::vector<int32_t> tokens;
  for (int i = 0; i < 4; ++i) tokens.push_back(sampler.Sample(logits).token);
  EXPECT_EQ(tokens, (std::vector<int32_t>{0, 1, 0, 1}));
}

TEST(Sampler, RepetitionPenaltyCountsThePrompt) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 3.0f;
  Sampler sampler = MakeSampler(p);
  sampler.AddPromptTokens(std::vector<int32_t>{0});
  EXPECT_EQ(sampler.Sample(std::vector<float>{1.0f, 0.5f}).token, 1);  // 1/3 < 0.5
}

TEST(Sampler, RawLogprobsIgnorePenaltiesAndTemperature) {
  const std::vector<double> logits = {0.3, 1.7, -0.4, 1.7, 0.9, -2.0};
  SamplingParams p = Seeded(13);
  p.temperature = 0.6f;
  p.top_k = 3;
  p.repetition_penalty = 1.3f;
  p.top_logprobs = 4;
  Sampler sampler = MakeSampler(p);
  sampler.AddPromptTokens(std::vector<int32_t>{1, 4});
  const std::vector<double> expected = LogSoftmax(logits);
  for (int i = 0; i < 20; ++i) {
    SampleResult r = sampler.Sample(ToFloat(logits));
    EXPECT_NEAR(r.logprob, expected[r.token], 1e-6);
    ASSERT_EQ(r.top_logprobs.size(), 4u);
    const int order[] = {1, 3, 4, 0};  // tie 1.7: lower id first
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(r.top_logprobs[j].token, order[j]);
      EXPECT_NEAR(r.top_logprobs[j].logprob, expected[order[j]], 1e-6);
    }
  }
}

TEST(Sampler, GreedyProcessedLogprobsUseTemperatureOne) {
  const std::vector<double> logits = {0.5, 2.5, 1.0};
  SamplingParams p;
  p.temperature = 0;
  p.logprobs_mode = LogprobsMode::kProcessed;
  p.top_logprobs = 2;
  Sampler sampler = MakeSampler(p);
  SampleResult r = sampler.Sample(ToFloat(logits));
  const std::vector<double> expected = LogSoftmax(logits);
  EXPECT_EQ(r.token, 1);
  EXPECT_NEAR(r.logprob, expected[1], 1e-6);
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[1].token, 2);
  EXPECT_NEAR(r.top_logprobs[1].logprob, expected[2], 1e-6);
}

// Draws `n` tokens and checks every frequency against `probs` within 5 standard
// deviations; tokens of probability 0 must never appear.
void ExpectFrequencies(Sampler& sampler, const std::vector<double>& logits,
                       const std::vector<double>& probs, int n) {
  std::vector<int> counts(logits.size());
  const std::vector<float> input = ToFloat(logits);
  for (int i = 0; i < n; ++i) ++counts[sampler.Sample(input).token];
  for (size_t t = 0; t < probs.size(); ++t) {
    if (probs[t] == 0) {
      EXPECT_EQ(counts[t], 0) << "token " << t;
      continue;
    }
    const double mean = n * probs[t];
    const double sd = std::sqrt(n * probs[t] * (1 - probs[t]));
    EXPECT_NEAR(counts[t], mean, 5 * sd + 1) << "token " << t;
  }
}

std::vector<double> Probs(const std::vector<double>& log_probs) {
  std::vector<double> p;
  for (double l : log_probs) p.push_back(std::exp(l));
  return p;
}

TEST(Sampler, FrequenciesMatchTheSoftmax) {
  const std::vector<double> logits = {0.5, -1, 2, 1, 0, -0.3};
  constexpr int kDraws = 100000;
  {
    SamplingParams p = Seeded(101);
    p.temperature = 0.7f;
    Sampler sampler = MakeSampler(p);
    ExpectFrequencies(sampler, logits, Probs(LogSoftmax(logits, 0.7)), kDraws);
  }
  {
    // top-k 3 -> {2, 3, 0}, then temperature 1.3.
    SamplingParams p = Seeded(102);
    p.top_k = 3;
    p.temperature = 1.3f;
    Sampler sampler = MakeSampler(p);
    ExpectFrequencies(sampler, logits, Probs(LogSoftmax(logits, 1.3, {2, 3, 0})), kDraws);
  }
  {
    // softmax at T=1: 2 -> 0.498, 3 -> 0.183, 0 -> 0.111, 4 -> 0.067 ... top-p 0.75 keeps
    // {2, 3, 0} (0.792); then temperature 2 over them.
    SamplingParams p = Seeded(103);
    p.top_p = 0.75f;
    p.temperature = 2.0f;
    Sampler sampler = MakeSampler(p);
    const std::vector<double> t1 = Probs(LogSoftmax(logits));
    ASSERT_LT(t1[2] + t1[3], 0.75);
    ASSERT_GT(t1[2] + t1[3] + t1[0], 0.75);
    ExpectFrequencies(sampler, logits, Probs(LogSoftmax(logits, 2.0, {2, 3, 0})), kDraws);
  }
  {
    // min-p 0.3: keep exp(l - 2) >= 0.3, i.e. l >= 2 + ln 0.3 = 0.796: {2, 3}.
    SamplingParams p = Seeded(104);
    p.min_p = 0.3f;
    Sampler sampler = MakeSampler(p);
    ExpectFrequencies(sampler, logits, Probs(LogSoftmax(logits, 1.0, {2, 3})), kDraws);
  }
}

// The kept set of top-p and min-p over a 150k vocabulary (the bucketed path): noise plus a
// few peaked tokens, so that the set is small enough for top_logprobs to list it whole.
TEST(Sampler, LargeVocabularyTruncationKeepsTheExactSet) {
  constexpr size_t kVocab = 151936;
  std::vector<double> logits = NoiseLogits(kVocab, 77, 1.0);
  std::mt19937_64 rng(78);
  for (int i = 0; i < 16; ++i) logits[rng() % kVocab] = 9.0 + 0.25 * i;
  const std::vector<double> t1 = Probs(LogSoftmax(logits));
  const std::vector<int> ranked = Ranked(logits);
  for (float top_p : {0.3f, 0.6f, 0.8f}) {
    std::vector<int> keep;
    double cum = 0;
    while (cum < top_p) {
      keep.push_back(ranked[keep.size()]);
      cum += t1[keep.back()];
    }
    ASSERT_LE(keep.size(), 20u);
    ASSERT_GT(cum - top_p, 1e-4) << "test data too close to the cut";
    ASSERT_GT(top_p - (cum - t1[keep.back()]), 1e-4) << "test data too close to the cut";
    SamplingParams p = Seeded(79);
    p.top_p = top_p;
    p.logprobs_mode = LogprobsMode::kProcessed;
    p.top_logprobs = 20;
    Sampler sampler = MakeSampler(p);
    const std::vector<double> expected = LogSoftmax(logits, 1.0, keep);
    SampleResult r = sampler.Sample(ToFloat(logits));
    ASSERT_EQ(r.top_logprobs.size(), keep.size()) << "top_p " << top_p;
    for (size_t j = 0; j < keep.size(); ++j) {
      EXPECT_EQ(r.top_logprobs[j].token, keep[j]);
      EXPECT_NEAR(r.top_logprobs[j].logprob, expected[keep[j]], 1e-5);
    }
    EXPECT_NE(std::find(keep.begin(), keep.end(), r.token), keep.end());
  }
  {
    SamplingParams p = Seeded(80);
    p.min_p = 0.2f;
    p.logprobs_mode = LogprobsMode::kProcessed;
    p.top_logprobs = 20;
    Sampler sampler = MakeSampler(p);
    std::vector<int> keep;
    for (int id : ranked) {
      if (std::exp(logits[id] - logits[ranked[0]]) < 0.2) break;
      keep.push_back(id);
    }
    const std::vector<double> expected = LogSoftmax(logits, 1.0, keep);
    SampleResult r = sampler.Sample(ToFloat(logits));
    ASSERT_EQ(r.top_logprobs.size(), keep.size());
    for (size_t j = 0; j < keep.size(); ++j) {
      EXPECT_EQ(r.top_logprobs[j].token, keep[j]);
      EXPECT_NEAR(r.top_logprobs[j].logprob, expected[keep[j]], 1e-5);
    }
  }
}

// Top-p and min-p after top-k work on the k survivors renormalized (llama.cpp, vLLM).
TEST(Sampler, TopPAndMinPAfterTopKUseTheSurvivors) {
  const std::vector<double> logits = {0.5, -1, 2, 1, 0, -0.3};
  // top-k 3 -> {2, 3, 0} with probabilities 0.629, 0.231, 0.140 among themselves: top-p 0.8
  // keeps {2, 3}. Over the whole vocabulary 2 and 3 hold only 0.681 and 0 would stay.
  SamplingParams p = Seeded(4);
  p.top_k = 3;
  p.top_p = 0.8f;
  p.logprobs_mode = LogprobsMode::kProcessed;
  p.top_logprobs = 6;
  const std::vector<double> expected = LogSoftmax(logits, 1.0, {2, 3});
  SampleResult r = MakeSampler(p).Sample(ToFloat(logits));
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[0].token, 2);
  EXPECT_NEAR(r.top_logprobs[0].logprob, expected[2], 1e-6);
  EXPECT_EQ(r.top_logprobs[1].token, 3);
  // min-p 0.3 after top-k 3: exp(1 - 2) = 0.37 stays, exp(0.5 - 2) = 0.22 goes.
  p.top_p = 1.0f;
  p.min_p = 0.3f;
  r = MakeSampler(p).Sample(ToFloat(logits));
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[1].token, 3);
  EXPECT_NEAR(r.top_logprobs[1].logprob, expected[3], 1e-6);
}

// The bucketed top-p when the cut falls among many tokens of one bucket: 2000 tokens within
// 0.02 of each other (one bucket, since a far outlier widens the range), and ties.
TEST(Sampler, TopPCutInsideACrowdedBucket) {
  std::vector<double> logits(2001);
  for (int i = 0; i < 2000; ++i) logits[i] = -1e-5 * i;
  logits[2000] = -40;
  const std::vector<double> t1 = Probs(LogSoftmax(logits));
  size_t kept = 0;
  double cum = 0;
  while (cum < 0.6) cum += t1[kept++];
  SamplingParams p = Seeded(8);
  p.top_p = 0.6f;
  p.logprobs_mode = LogprobsMode::kProcessed;
  Sampler sampler = MakeSampler(p);
  std::vector<int> keep(kept);
  std::iota(keep.begin(), keep.end(), 0);
  const std::vector<double> expected = LogSoftmax(logits, 1.0, keep);
  int32_t max_token = 0;
  const std::vector<float> input = ToFloat(logits);
  for (int i = 0; i < 600; ++i) {
    SampleResult r = sampler.Sample(input);
    ASSERT_LT(r.token, static_cast<int32_t>(kept));
    EXPECT_NEAR(r.logprob, expected[r.token], 2e-6);
    max_token = std::max(max_token, r.token);
  }
  EXPECT_GT(max_token, static_cast<int32_t>(kept) - 60);  // the cut is not early
  // Exact ties: 100 equal logits, top-p 0.255 keeps the 26 lowest ids (0.26 >= 0.255).
  p.top_p = 0.255f;
  Sampler tied = MakeSampler(p);
  const std::vector<float> flat(100, 0.5f);
  for (int i = 0; i < 500; ++i) {
    SampleResult r = tied.Sample(flat);
    ASSERT_LT(r.token, 26);
    EXPECT_NEAR(r.logprob, std::log(1.0 / 26), 1e-6);
  }
}

// Flat logits: too many tokens near the best for the prefilter, so top-p takes the
// bucketed path; the second case crowds every token into one bucket (a far outlier
// stretches the range), so the crossing bucket is ranked piecewise.
TEST(Sampler, TopPBucketedPathKeepsTheExactSet) {
  std::vector<double> crowded(20001);
  for (int i = 0; i < 20000; ++i) crowded[i] = static_cast<float>(1e-3 * std::sin(i * 0.7));
  crowded[20000] = -40;
  for (const std::vector<double>& logits : {NoiseLogits(20000, 31, 1.0), crowded}) {
    const std::vector<double> t1 = Probs(LogSoftmax(logits));
    const std::vector<int> ranked = Ranked(logits);
    std::vector<int> keep;
    double cum = 0;
    while (cum < 0.6) {
      keep.push_back(ranked[keep.size()]);
      cum += t1[keep.back()];
    }
    const size_t near_best =
        std::count_if(t1.begin(), t1.end(), [&](double q) { return q >= 1e-6 * t1[ranked[0]]; });
    ASSERT_GT(near_best, 8192u);  // beyond the prefilter
    SamplingParams p = Seeded(32);
    p.top_p = 0.6f;
    p.logprobs_mode = LogprobsMode::kProcessed;
    p.top_logprobs = 20;
    Sampler sampler = MakeSampler(p);
    const std::vector<double> expected = LogSoftmax(logits, 1.0, keep);
    std::vector<bool> kept(logits.size());
    for (int id : keep) kept[id] = true;
    for (int i = 0; i < 30; ++i) {
      SampleResult r = sampler.Sample(ToFloat(logits));
      ASSERT_TRUE(kept[r.token]) << r.token;
      // One token more or less would move this by about 1 / keep.size().
      EXPECT_NEAR(r.logprob, expected[r.token], 1e-5);
      ASSERT_EQ(r.top_logprobs.size(), 20u);
      for (size_t j = 0; j < 20; ++j) EXPECT_EQ(r.top_logprobs[j].token, keep[j]);
    }
  }
}

TEST(Sampler, TopKLargeAndSmallAgainstDouble) {
  const std::vector<double> logits = NoiseLogits(1000, 90, 2.0);
  const std::vector<int> ranked = Ranked(logits);
  for (int k : {10, 500, 999}) {  // the heap and the nth_element paths
    SamplingParams p = Seeded(91);
    p.top_k = k;
    p.temperature = 0.8f;
    p.logprobs_mode = LogprobsMode::kProcessed;
    p.top_logprobs = 20;
    Sampler sampler = MakeSampler(p);
    const std::vector<int> keep(ranked.begin(), ranked.begin() + k);
    const std::vector<double> expected = LogSoftmax(logits, 0.8, keep);
    SampleResult r = sampler.Sample(ToFloat(logits));
    ASSERT_EQ(r.top_logprobs.size(), std::min<size_t>(k, 20)) << k;
    for (size_t j = 0; j < r.top_logprobs.size(); ++j) {
      EXPECT_EQ(r.top_logprobs[j].token, keep[j]);
      EXPECT_NEAR(r.top_logprobs[j].logprob, expected[keep[j]], 1e-5) << k;
    }
    EXPECT_NEAR(r.logprob, expected[r.token], 1e-5);
  }
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
  const std::vector<float> logits = ToFloat(NoiseLogits(1000, 5, 1.5));
  auto run = [&](uint64_t seed) {
    SamplingParams p = Seeded(seed);
    p.top_k = 50;
    p.top_p = 0.9f;
    p.repetition_penalty = 1.1f;
    Sampler sampler = MakeSampler(p);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 200; ++i) tokens.push_back(sampler.Sample(logits).token);
    return tokens;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, UnseededSamplersReportTheirSeed) {
  Sampler a = MakeSampler(SamplingParams{});
  SamplingParams p = Seeded(a.seed());
  Sampler b = MakeSampler(p);
  const std::vector<float> logits = ToFloat(NoiseLogits(100, 6, 1.0));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.Sample(logits).token, b.Sample(logits).token);
}

// The documented draw, replayed independently: u = (x >> 11) * 2^-53 from the test's own
// mt19937_64, then the first token (in id order) whose cumulative probability exceeds u.
TEST(Sampler, DrawFollowsTheDocumentedRule) {
  const std::vector<double> logits = {0.1, 1.2, -0.7, 0.4, 2.0, -1.5, 0.0, 0.9};
  const std::vector<double> probs = Probs(LogSoftmax(logits, 0.8));
  SamplingParams p = Seeded(20260101);
  p.temperature = 0.8f;
  Sampler sampler = MakeSampler(p);
  std::mt19937_64 rng(20260101);
  for (int i = 0; i < 2000; ++i) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    int expected = 0;
    double cum = probs[0];
    while (u >= cum && expected + 1 < static_cast<int>(probs.size())) cum += probs[++expected];
    ASSERT_EQ(sampler.Sample(ToFloat(logits)).token, expected) << "draw " << i;
  }
}

// Sampling on a device: NextDeviceDraw shows the u Sample would draw (the test's own
// generator replays it) without taking it; AcceptDeviceSample takes it, so a sequence that
// alternates between the host and a device keeps one random stream: its tokens are those of a
// sequence sampled on the host throughout.
TEST(Sampler, DeviceDrawsKeepTheHostsRandomStream) {
  const std::vector<double> logits = {0.1, 1.2, -0.7, 0.4, 2.0, -1.5, 0.0, 0.9};
  SamplingParams p = Seeded(77);
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  p.stop_token_ids = {4};
  Sampler host = MakeSampler(p), mixed = MakeSampler(p);
  std::mt19937_64 rng(77);
  for (int i = 0; i < 300; ++i) {
    const SampleResult want = host.Sample(ToFloat(logits));
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    if (i % 3 == 0) {
      ASSERT_EQ(mixed.Sample(ToFloat(logits)).token, want.token) << "draw " << i;
      continue;
    }
    const std::optional<DeviceDraw> d = mixed.NextDeviceDraw();
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->uniform, u) << "draw " << i;
    EXPECT_EQ(d->temperature, 0.8f);
    EXPECT_EQ(d->top_p, 0.95f);
    ASSERT_EQ(mixed.NextDeviceDraw()->uniform, u) << "peeking took the draw";
    // The device's choice (here the host's, as a device with the same rule would make it).
    const SampleResult got = mixed.AcceptDeviceSample(want.token, -1.5f);
    EXPECT_EQ(got.token, want.token);
    EXPECT_EQ(got.logprob, -1.5f);
    EXPECT_EQ(got.end_of_generation, want.token == 4);
  }
}

TEST(Sampler, DeviceDrawsOnlyForTheDevicesChain) {
  SamplingParams greedy;
  greedy.temperature = 0;
  Sampler g = MakeSampler(greedy);
  const std::optional<DeviceDraw> d = g.NextDeviceDraw();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->temperature, 0.0f);
  EXPECT_EQ(d->uniform, 0.0);
  SamplingParams p = Seeded(1);
  p.repetition_penalty = 1.1f;
  EXPECT_FALSE(MakeSampler(p).NextDeviceDraw().has_value()) << "penalties need the host";
  p = Seeded(1);
  p.presence_penalty = 0.5f;
  EXPECT_FALSE(MakeSampler(p).NextDeviceDraw().has_value());
  p = Seeded(1);
  p.top_logprobs = 2;
  EXPECT_FALSE(MakeSampler(p).NextDeviceDraw().has_value()) << "alternatives need the host";
  p = Seeded(1);
  p.logprobs_mode = LogprobsMode::kProcessed;
  EXPECT_FALSE(MakeSampler(p).NextDeviceDraw().has_value());
  p = Seeded(1);
  p.top_k = 40;
  p.min_p = 0.05f;
  ASSERT_TRUE(MakeSampler(p).NextDeviceDraw().has_value());
  EXPECT_EQ(MakeSampler(p).NextDeviceDraw()->top_k, 40);
  EXPECT_EQ(MakeSampler(p).NextDeviceDraw()->min_p, 0.05f);
}

TEST(Sampler, EndOfGeneration) {
  SamplingParams p;
  p.temperature = 0;
  p.stop_token_ids = {7, 3};
  Sampler sampler = MakeSampler(p);
  EXPECT_TRUE(sampler.Sample(std::vector<float>{0, 1, 2, 5}).end_of_generation);
  EXPECT_FALSE(sampler.Sample(std::vector<float>{0, 1, 5, 2}).end_of_generation);
}

TEST(Sampler, TopLogprobsCountAndTies) {
  SamplingParams p = Seeded(1);
  p.top_logprobs = 3;
  Sampler sampler = MakeSampler(p);
  SampleResult r = sampler.Sample(std::vector<float>{1, 2, 2, 0, 2});
  ASSERT_EQ(r.top_logprobs.size(), 3u);
  EXPECT_EQ(r.top_logprobs[0].token, 1);
  EXPECT_EQ(r.top_logprobs[1].token, 2);
  EXPECT_EQ(r.top_logprobs[2].token, 4);
  // Fewer tokens than asked for.
  p.top_logprobs = 20;
  Sampler small = MakeSampler(p);
  EXPECT_EQ(small.Sample(std::vector<float>{1, 2}).top_logprobs.size(), 2u);
}

// A token mask (structured output): masked tokens are never drawn, greedy takes the best
// allowed one, raw log-probabilities stay the model's, processed ones renormalize over the
// allowed set. Truth: LogSoftmax in double over the allowed ids, and counting draws.
TEST(Sampler, MaskedTokensAreNeverChosen) {
  const size_t n = 200;  // four mask words, the last one partial
  const std::vector<double> logits = NoiseLogits(n, 41, 2.0);
  std::vector<uint64_t> mask((n + 63) / 64, 0);
  std::vector<int> allowed;
  for (int id = 0; id < static_cast<int>(n); ++id) {
    // Whole words of ones and zeros, and a mixed one.
    const bool on = (id >= 64 && id < 128) || (id >= 128 && id % 7 == 3);
    if (!on) continue;
    mask[id / 64] |= uint64_t{1} << (id % 64);
    allowed.push_back(id);
  }
  const std::vector<int> ranked = Ranked(logits);
  const int best_allowed = *std::find_if(ranked.begin(), ranked.end(), [&](int id) {
    return std::find(allowed.begin(), allowed.end(), id) != allowed.end();
  });

  SamplingParams greedy;
  greedy.temperature = 0;
  Sampler g = MakeSampler(greedy);
  EXPECT_EQ(g.Sample(ToFloat(logits), mask).token, best_allowed);
  EXPECT_EQ(g.Sample(ToFloat(logits)).token, ranked[0]);  // without a mask: the argmax

  SamplingParams p = Seeded(5);
  p.temperature = 1.0f;
  p.top_logprobs = 3;
  Sampler raw = MakeSampler(p);
  p.logprobs_mode = LogprobsMode::kProcessed;
  Sampler processed = MakeSampler(p);
  const std::vector<double> model = LogSoftmax(logits);
  const std::vector<double> renormalized = LogSoftmax(logits, 1.0, allowed);
  std::vector<int> counts(n, 0);
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    SampleResult r = raw.Sample(ToFloat(logits), mask);
    ASSERT_TRUE((mask[r.token / 64] >> (r.token % 64)) & 1) << "drew masked token " << r.token;
    EXPECT_NEAR(r.logprob, model[r.token], 1e-6);
    ASSERT_EQ(r.top_logprobs.size(), 3u);
    EXPECT_EQ(r.top_logprobs[0].token, ranked[0]);  // the model's own best, masked or not
    ++counts[r.token];
    SampleResult q = processed.Sample(ToFloat(logits), mask);
    EXPECT_NEAR(q.logprob, renormalized[q.token], 1e-5);
    for (const TokenLogprob& t : q.top_logprobs) {
      EXPECT_TRUE(std::find(allowed.begin(), allowed.end(), t.token) != allowed.end());
    }
  }
  // Draw frequencies follow the renormalized distribution (5 standard deviations).
  for (int id : allowed) {
    const double pr = std::exp(renormalized[id]);
    const double sd = std::sqrt(draws * pr * (1 - pr));
    EXPECT_NEAR(counts[id], draws * pr, 5 * sd + 1) << "token " << id;
  }
}

}  // namespace
}  // namespace tessera::sampling
