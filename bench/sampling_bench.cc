// Sampling time per token over a 151,936-entry vocabulary (Qwen2/3's), one Sampler::Sample
// call per iteration, for the common parameter sets. Yardsticks measured in the same run:
// a plain argmax loop over the logits (the least any sampler can do) and std::sort of
// every (logit, id) pair (what a naive top-p pays). Figures only; nothing asserts a speed.
//
//   sampling_bench [--benchmark_filter=...]
//
// Two logit shapes: "peaked" (normal noise, sd 2, plus 32 tokens between 8 and 16, so a
// few dozen tokens hold most of the mass, as in a trained model) and "flat" (standard
// normal noise alone: top-p 0.9 keeps ~90% of the vocabulary, the worst case).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <utility>
#include <vector>

#include "worker/sampling/sampling.h"
#include "worker/sampling/speculative.h"

namespace tessera::sampling {
namespace {

constexpr size_t kVocab = 151936;

std::vector<float> MakeLogits(bool peaked, size_t vocab) {
  std::mt19937_64 rng(1234);
  auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 1) * 0x1.0p-53; };
  std::vector<float> logits(vocab);
  const double sd = peaked ? 2.0 : 1.0;
  for (float& l : logits) {
    l = static_cast<float>(sd * std::sqrt(-2 * std::log(uniform())) *
                           std::cos(2 * std::numbers::pi * uniform()));
  }
  if (peaked) {
    for (int i = 0; i < 32; ++i) logits[rng() % vocab] = 8.0f + 0.25f * i;
  }
  return logits;
}

const std::vector<float>& Logits(bool peaked) {
  static const std::vector<float> kPeaked = MakeLogits(true, kVocab);
  static const std::vector<float> kFlat = MakeLogits(false, kVocab);
  return peaked ? kPeaked : kFlat;
}

// Llama-2's vocabulary size, for the 124M-parameter benchmark model.
const std::vector<float>& Logits32k() {
  static const std::vector<float> kPeaked = MakeLogits(true, 32000);
  return kPeaked;
}

void Run(benchmark::State& state, SamplingParams params, bool peaked, bool vocab_32k = false) {
  const std::vector<float>& logits = vocab_32k ? Logits32k() : Logits(peaked);
  params.seed = 42;
  Sampler sampler = std::move(*Sampler::Create(params));
  // A 2,000-token prompt for the penalty cases.
  std::vector<int32_t> prompt(2000);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(i * 75 % kVocab);
  sampler.AddPromptTokens(prompt);
  for (auto _ : state) {
    SampleResult r = sampler.Sample(logits);
    benchmark::DoNotOptimize(r.token);
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_ArgmaxBaseline(benchmark::State& state) {
  const std::vector<float>& logits = Logits(true);
  for (auto _ : state) {
    size_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i) {
      if (logits[i] > logits[best]) best = i;
    }
    benchmark::DoNotOptimize(best);
  }
}
BENCHMARK(BM_ArgmaxBaseline);

void BM_FullSortBaseline(benchmark::State& state) {
  const std::vector<float>& logits = Logits(true);
  std::vector<std::pair<float, int32_t>> pairs(logits.size());
  for (auto _ : state) {
    for (size_t i = 0; i < logits.size(); ++i) pairs[i] = {-logits[i], static_cast<int32_t>(i)};
    std::sort(pairs.begin(), pairs.end());
    benchmark::DoNotOptimize(pairs.data());
  }
}
BENCHMARK(BM_FullSortBaseline);

SamplingParams Params(float temperature, int32_t top_k, float top_p, float min_p) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  return p;
}

BENCHMARK_CAPTURE(Run, greedy, Params(0, 0, 1, 0), true);
BENCHMARK_CAPTURE(Run, temperature_0_8, Params(0.8f, 0, 1, 0), true);
BENCHMARK_CAPTURE(Run, top_k_40, Params(0.8f, 40, 1, 0), true);
BENCHMARK_CAPTURE(Run, top_p_0_9_peaked, Params(0.8f, 0, 0.9f, 0), true);
BENCHMARK_CAPTURE(Run, top_p_0_9_flat, Params(0.8f, 0, 0.9f, 0), false);
BENCHMARK_CAPTURE(Run, min_p_0_05, Params(0.8f, 0, 1, 0.05f), true);
// llama.cpp's defaults: top-k 40, top-p 0.95, min-p 0.05, temperature 0.8.
BENCHMARK_CAPTURE(Run, llama_cpp_defaults, Params(0.8f, 40, 0.95f, 0.05f), true);
BENCHMARK_CAPTURE(Run, top_p_0_95_min_p_0_05, Params(0.8f, 0, 0.95f, 0.05f), true);
BENCHMARK_CAPTURE(Run, llama_cpp_defaults_vocab_32k, Params(0.8f, 40, 0.95f, 0.05f), true, true);
BENCHMARK_CAPTURE(Run, greedy_vocab_32k, Params(0, 0, 1, 0), true, true);

SamplingParams WithPenalties() {
  SamplingParams p = Params(0.8f, 40, 0.95f, 0.05f);
  p.repetition_penalty = 1.1f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.5f;
  return p;
}
BENCHMARK_CAPTURE(Run, defaults_penalties_2k_prompt, WithPenalties(), true);

SamplingParams WithLogprobs(LogprobsMode mode) {
  SamplingParams p = Params(0.8f, 40, 0.95f, 0.05f);
  p.top_logprobs = 20;
  p.logprobs_mode = mode;
  return p;
}
BENCHMARK_CAPTURE(Run, defaults_top_logprobs_20_raw, WithLogprobs(LogprobsMode::kRaw), true);
BENCHMARK_CAPTURE(Run, defaults_top_logprobs_20_processed, WithLogprobs(LogprobsMode::kProcessed),
                  true);

// N-gram drafting per decode step on a history of state.range(0) tokens (a long agent
// conversation: random text over a 32,000-token vocabulary, so that longer n-grams rarely
// repeat and the scan goes far): one token appended, then the drafts, as the scheduler does
// for each speculating decode; every 256 steps the history is cut back to its length (not
// timed). The scan (NgramDraft) against the incremental index (NgramIndex), whose cost
// should not grow with the history.
template <bool kIndex>
void NgramDrafts(benchmark::State& state) {
  std::mt19937 rng(3);
  std::vector<int32_t> prompt(state.range(0));
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % 32000);
  std::vector<int32_t> h = prompt;
  NgramIndex index;
  index.Draft(h, {.max_draft = 4});  // the prompt, indexed at admission
  int64_t steps = 0;
  for (auto _ : state) {
    if (++steps % 256 == 0) {
      state.PauseTiming();
      h = prompt;
      index = NgramIndex();
      index.Draft(h, {.max_draft = 4});
      state.ResumeTiming();
    }
    h.push_back(static_cast<int32_t>(rng() % 32000));
    if constexpr (kIndex) {
      benchmark::DoNotOptimize(index.Draft(h, {.max_draft = 4}));
    } else {
      benchmark::DoNotOptimize(NgramDraft(h, {.max_draft = 4}));
    }
  }
}
BENCHMARK(NgramDrafts<false>)->Name("BM_NgramDraftScan")->Arg(1024)->Arg(32768);
BENCHMARK(NgramDrafts<true>)->Name("BM_NgramIndex")->Arg(1024)->Arg(32768);

// The index's one-time cost: a prompt of state.range(0) tokens indexed at its first draft.
void BM_NgramIndexPrompt(benchmark::State& state) {
  std::mt19937 rng(3);
  std::vector<int32_t> prompt(state.range(0));
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % 32000);
  for (auto _ : state) {
    NgramIndex index;
    benchmark::DoNotOptimize(index.Draft(prompt, {.max_draft = 4}));
  }
}
BENCHMARK(BM_NgramIndexPrompt)->Arg(1024)->Arg(32768)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera::sampling

BENCHMARK_MAIN();
