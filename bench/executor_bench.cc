// Prefill and decode throughput of the CPU executor, 1 and 2 threads, next to a memcpy
// bandwidth measured in the same run:
//  - llama 124m preset (hidden 768, 12 layers, 12/4 heads, FFN 2048, vocab 32000) at Q4_K_M
//    and Q8_0: prefill 512 tokens, decode 128;
//  - tiny glm-dsa and deepseek2, and the ~1 GB deepseek2-shaped moe-1g preset (64 experts,
//    top-8) at Q8_0: prefill 128, decode 64, with the share of decode time spent in
//    attention, the DSA indexer, the router and the experts.
// Models are generated once into the temp directory. Peak RSS: measure `tessera generate`
// with /usr/bin/time (this process holds several executors at once).
//
//   build/default/bench/executor_bench [--benchmark_filter=...]
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "common/model/synthetic.h"
#include "worker/executor/executor.h"

namespace {

using tessera::executor::Executor;
using tessera::executor::ExecutorOptions;
using tessera::executor::SequenceInput;

struct Model {
  const char* arch;
  const char* preset;
  const char* quant;
};

std::string ModelPath(const Model& m) {
  std::string path = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                  "/tessera-bench-", m.arch, "-", m.preset, "-", m.quant, ".gguf");
  if (!std::filesystem::exists(path)) {
    tessera::model::SyntheticOptions o;
    o.arch = m.arch;
    o.preset = m.preset;
    o.quant = m.quant;
    auto w = tessera::model::BuildSyntheticModel(o);
    if (!w.ok() || !w->WriteFile(path).ok()) std::abort();
  }
  return path;
}

std::unique_ptr<Executor> Make(const Model& m, int threads) {
  ExecutorOptions o;
  o.threads = threads;
  o.kv_tokens = 1024;
  auto ex = Executor::Create(ModelPath(m), o);
  if (!ex.ok()) std::abort();
  return *std::move(ex);
}

std::vector<int32_t> Prompt(int n, int vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 7919 + 13) % vocab;
  return t;
}

void Prefill(benchmark::State& state, Model m, int n) {
  auto ex = Make(m, static_cast<int>(state.range(0)));
  SequenceInput s;
  s.tokens = Prompt(n, static_cast<int>(ex->hparams().n_vocab));
  s.block_table.resize(ex->n_blocks());
  std::iota(s.block_table.begin(), s.block_table.end(), 0);
  for (auto _ : state) {
    auto l = ex->Step({&s, 1});
    benchmark::DoNotOptimize(l);
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(n) * state.iterations(), benchmark::Counter::kIsRate);
}

// Weight bytes one decode step reads: every tensor but the embedding table, experts
// weighted by the share of them a token uses (k of E).
double WeightBytesPerToken(const Executor& ex) {
  const auto& hp = ex.hparams();
  double bytes = 0;
  for (const auto& t : ex.file().tensors()) {
    if (t.name == "token_embd.weight") continue;
    if (t.name.rfind("blk.", 0) == 0 &&
        std::stoul(t.name.substr(4, t.name.find('.', 4) - 4)) >= hp.n_layer) {
      continue;  // MTP block: not run
    }
    double share = t.name.find("_exps.") != std::string::npos
                       ? static_cast<double>(hp.n_expert_used) / hp.n_expert
                       : 1.0;
    bytes += share * static_cast<double>(t.n_bytes);
  }
  return bytes;
}

// A sequence owning every cache block whose 16-token prompt `ex` has just prefilled (the
// decode benchmarks' start).
SequenceInput PrefilledSequence(Executor& ex) {
  SequenceInput s;
  s.block_table.resize(ex.n_blocks());
  std::iota(s.block_table.begin(), s.block_table.end(), 0);
  s.tokens = Prompt(16, static_cast<int>(ex.hparams().n_vocab));
  (void)ex.Step({&s, 1});
  return s;
}

void Decode(benchmark::State& state, Model m, int n) {
  auto ex = Make(m, static_cast<int>(state.range(0)));
  const int vocab = static_cast<int>(ex->hparams().n_vocab);
  SequenceInput s = PrefilledSequence(*ex);  // then n single-token steps per iteration
  ex->ResetProfile();
  for (auto _ : state) {
    s.start_pos = 16;
    for (int i = 0; i < n; ++i) {
      s.tokens = {(i * 31 + 7) % vocab};
      auto l = ex->Step({&s, 1});
      benchmark::DoNotOptimize(l);
      ++s.start_pos;
    }
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(n) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["weight_GB_per_s"] = benchmark::Counter(
      WeightBytesPerToken(*ex) * n * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  auto profile = ex->Profile();
  double total = 0;
  for (const auto& [phase, secs] : profile) total += secs;
  for (const char* phase : {"attention", "indexer", "router", "experts", "dense_ffn", "head"}) {
    if (profile.count(phase) && total > 0)
      state.counters[std::string(phase) + "_share"] = profile[phase] / total;
  }
}

// Speculative verification's cost: one decode step that also feeds K drafted tokens
// (SequenceInput::rows_as_decodes, the logits of every row), as tesserad --speculative runs
// it. Each iteration is one such step at a growing position; K = 0 is the plain decode step.
// A step whose drafts are all rejected yields one token, so its time over K = 0's is the
// cost of rejected drafts; the ratio is printed as step_ms and compared in bench/README.
void Verify(benchmark::State& state, Model m) {
  const int k = static_cast<int>(state.range(1));
  auto ex = Make(m, static_cast<int>(state.range(0)));
  const int vocab = static_cast<int>(ex->hparams().n_vocab);
  SequenceInput s = PrefilledSequence(*ex);
  ex->ResetProfile();
  int64_t pos = 16;
  for (auto _ : state) {
    if (pos + k + 1 >= 1000) pos = 16;
    s.start_pos = pos;
    s.tokens.assign(k + 1, 0);
    for (int i = 0; i <= k; ++i) s.tokens[i] = static_cast<int32_t>((pos * 31 + i * 7) % vocab);
    s.all_logits = k > 0;
    s.rows_as_decodes = k > 0;
    auto l = ex->Step({&s, 1});
    benchmark::DoNotOptimize(l);
    ++pos;  // one token kept: the drafts' entries are overwritten by the next step
  }
  state.counters["steps_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  auto profile = ex->Profile();
  for (const auto& [phase, secs] : profile) {
    state.counters[phase + "_ms"] = 1000 * secs / static_cast<double>(state.iterations());
  }
}

// The upper bound of speculation on the same steps: drafts that are always right. The
// trunk's own greedy continuation of a prompt (plain decode steps, in the setup) is fed back
// as the drafts, K per step, verified as tesserad --speculative verifies them (rows as
// decodes, the logits of every row, the longest prefix whose argmax matches plus the
// trunk's next token), so every step keeps K + 1 tokens; K = 0 is plain greedy decode.
// tokens_per_s over K = 0's is the most a drafter can gain here; acceptance_length counts
// tokens per step and mismatches the verified tokens that differ from the continuation
// (0 when verification gives every row the bits of its plain decode step).
void VerifyAccepted(benchmark::State& state, Model m) {
  const int k = static_cast<int>(state.range(1));
  constexpr int kPrompt = 16, kGenerate = 64;
  auto ex = Make(m, static_cast<int>(state.range(0)));
  const int vocab = static_cast<int>(ex->hparams().n_vocab);
  auto argmax = [vocab](const std::vector<float>& logits, size_t row) {
    const float* r = logits.data() + row * vocab;
    return static_cast<int32_t>(std::max_element(r, r + vocab) - r);
  };
  SequenceInput s;
  s.block_table.resize(ex->n_blocks());
  std::iota(s.block_table.begin(), s.block_table.end(), 0);
  s.tokens = Prompt(kPrompt, vocab);
  auto prefill = ex->Step({&s, 1});
  if (!prefill.ok()) return state.SkipWithError(std::string(prefill.status().message()).c_str());
  std::vector<int32_t> next = {argmax((*prefill)[0], 0)};  // next[i]: the token at kPrompt + i
  while (next.size() < kGenerate + 5) {
    s.start_pos = kPrompt + static_cast<int64_t>(next.size()) - 1;
    s.tokens = {next.back()};
    auto l = ex->Step({&s, 1});
    if (!l.ok()) return state.SkipWithError(std::string(l.status().message()).c_str());
    next.push_back(argmax((*l)[0], 0));
  }
  int64_t generated = 0, steps = 0, mismatches = 0;
  for (auto _ : state) {
    for (int i = 0; i < kGenerate;) {
      s.start_pos = kPrompt + i;
      s.tokens.assign(next.begin() + i, next.begin() + i + k + 1);
      s.all_logits = k > 0;
      s.rows_as_decodes = k > 0;
      auto l = ex->Step({&s, 1});
      if (!l.ok()) return state.SkipWithError(std::string(l.status().message()).c_str());
      int kept = 0;
      while (kept < k && argmax((*l)[0], kept) == next[i + kept + 1]) ++kept;
      // A rejected draft, or the trunk's own token after all K differing from plain decode's.
      if (kept < k || argmax((*l)[0], k) != next[i + k + 1]) ++mismatches;
      i += kept + 1;
      generated += kept + 1;
      ++steps;
    }
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(generated), benchmark::Counter::kIsRate);
  state.counters["acceptance_length"] =
      static_cast<double>(generated) / static_cast<double>(std::max<int64_t>(steps, 1));
  state.counters["mismatches"] = static_cast<double>(mismatches);
}

// The memory bandwidth a plain copy reaches on this machine, for scale: decode reads every
// weight once per token.
void BM_Memcpy(benchmark::State& state) {
  const size_t n = size_t{256} << 20;
  std::vector<char> a(n, 1), b(n);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), n);
    benchmark::DoNotOptimize(b.data());
  }
  state.counters["GB_per_s"] =
      benchmark::Counter(2.0 * n * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// A streaming read (sum) of 1 GiB with T threads: the bandwidth decode can reach.
void BM_ReadBandwidth(benchmark::State& state) {
  const size_t n = size_t{1} << 30;
  static std::vector<uint64_t>* data = new std::vector<uint64_t>(n / 8, 1);
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) {
    std::vector<std::thread> ts;
    std::vector<uint64_t> sums(threads);
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        const size_t per = data->size() / threads;
        uint64_t s = 0;
        for (size_t i = t * per; i < (t + 1) * per; ++i) s += (*data)[i];
        sums[t] = s;
      });
    }
    for (auto& th : ts) th.join();
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["GB_per_s"] = benchmark::Counter(static_cast<double>(n) * state.iterations() / 1e9,
                                                  benchmark::Counter::kIsRate);
}

constexpr Model kLlamaQ4{"llama", "124m", "Q4_K_M"};
constexpr Model kLlamaQ8{"llama", "124m", "Q8_0"};
constexpr Model kDsaTiny{"glm-dsa", "tiny", "Q8_0"};
constexpr Model kDs2Tiny{"deepseek2", "tiny", "Q8_0"};
constexpr Model kMoe1g{"deepseek2", "moe-1g", "Q8_0"};

}  // namespace

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_ReadBandwidth)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1)
    ->UseRealTime();
#define TESSERA_BENCH_MODEL(name, model, prefill, decode) \
  BENCHMARK_CAPTURE(Prefill, name, model, prefill)        \
      ->Arg(1)                                            \
      ->Arg(2)                                            \
      ->Unit(benchmark::kMillisecond)                     \
      ->MinTime(2)                                        \
      ->UseRealTime();                                    \
  BENCHMARK_CAPTURE(Decode, name, model, decode)          \
      ->Arg(1)                                            \
      ->Arg(2)                                            \
      ->Unit(benchmark::kMillisecond)                     \
      ->MinTime(2)                                        \
      ->UseRealTime()
TESSERA_BENCH_MODEL(llama124m_q4_k_m, kLlamaQ4, 512, 128);
BENCHMARK_CAPTURE(Verify, llama124m_q4_k_m, kLlamaQ4)
    ->ArgsProduct({{2}, {0, 1, 2, 4}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2)
    ->UseRealTime();
BENCHMARK_CAPTURE(VerifyAccepted, llama124m_q4_k_m, kLlamaQ4)
    ->ArgsProduct({{2}, {0, 1, 2, 4}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2)
    ->UseRealTime();
TESSERA_BENCH_MODEL(llama124m_q8_0, kLlamaQ8, 512, 128);
TESSERA_BENCH_MODEL(glm_dsa_tiny_q8_0, kDsaTiny, 128, 64);
TESSERA_BENCH_MODEL(deepseek2_tiny_q8_0, kDs2Tiny, 128, 64);
TESSERA_BENCH_MODEL(deepseek2_moe1g_q8_0, kMoe1g, 512, 64);
BENCHMARK_MAIN();
