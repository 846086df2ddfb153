// Prefill (512 tokens) and decode (128 tokens) throughput of the CPU executor on the
// llama-shaped 124m preset (hidden 768, 12 layers, 12/4 heads, FFN 2048, vocab 32000) at
// Q4_K_M and Q8_0, 1 and 2 threads, next to a memcpy bandwidth measured in the same run.
// Peak RSS is reported against the file size (weights are used in place from the mapping).
//
//   build/default/bench/executor_bench [--benchmark_filter=...]
#include <sys/resource.h>

#include <cstring>
#include <filesystem>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "common/model/synthetic.h"
#include "worker/executor/executor.h"

namespace {

using tessera::executor::Executor;
using tessera::executor::ExecutorOptions;
using tessera::executor::SequenceInput;

std::string ModelPath(const std::string& quant) {
  std::string path = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                  "/tessera-bench-124m-", quant, ".gguf");
  if (!std::filesystem::exists(path)) {
    tessera::model::SyntheticOptions o;
    o.arch = "llama";
    o.preset = "124m";
    o.quant = quant;
    auto w = tessera::model::BuildSyntheticModel(o);
    if (!w.ok() || !w->WriteFile(path).ok()) std::abort();
  }
  return path;
}

std::unique_ptr<Executor> Make(const std::string& quant, int threads) {
  ExecutorOptions o;
  o.threads = threads;
  o.kv_tokens = 1024;
  auto ex = Executor::Create(ModelPath(quant), o);
  if (!ex.ok()) std::abort();
  return *std::move(ex);
}

std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 7919 + 13) % 32000;
  return t;
}

void SetRss(benchmark::State& state, const std::string& quant) {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  state.counters["peak_rss_MiB"] = ru.ru_maxrss / 1024.0;
  state.counters["file_MiB"] = std::filesystem::file_size(ModelPath(quant)) / 1048576.0;
}

void BM_Prefill512(benchmark::State& state, const std::string& quant) {
  auto ex = Make(quant, static_cast<int>(state.range(0)));
  SequenceInput s;
  s.tokens = Prompt(512);
  s.block_table.resize(ex->n_blocks());
  std::iota(s.block_table.begin(), s.block_table.end(), 0);
  for (auto _ : state) {
    auto l = ex->Step({&s, 1});
    benchmark::DoNotOptimize(l);
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(512.0 * state.iterations(), benchmark::Counter::kIsRate);
  SetRss(state, quant);
}

void BM_Decode128(benchmark::State& state, const std::string& quant) {
  auto ex = Make(quant, static_cast<int>(state.range(0)));
  SequenceInput s;
  s.block_table.resize(ex->n_blocks());
  std::iota(s.block_table.begin(), s.block_table.end(), 0);
  s.tokens = Prompt(16);
  (void)ex->Step({&s, 1});  // a short prompt, then 128 single-token steps per iteration
  for (auto _ : state) {
    s.start_pos = 16;
    for (int i = 0; i < 128; ++i) {
      s.tokens = {(i * 31 + 7) % 32000};
      auto l = ex->Step({&s, 1});
      benchmark::DoNotOptimize(l);
      ++s.start_pos;
    }
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(128.0 * state.iterations(), benchmark::Counter::kIsRate);
  SetRss(state, quant);
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

}  // namespace

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK_CAPTURE(BM_Prefill512, q4_k_m, std::string("Q4_K_M"))
    ->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->MinTime(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_Prefill512, q8_0, std::string("Q8_0"))
    ->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->MinTime(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_Decode128, q4_k_m, std::string("Q4_K_M"))
    ->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->MinTime(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_Decode128, q8_0, std::string("Q8_0"))
    ->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->MinTime(2)->UseRealTime();
BENCHMARK_MAIN();
