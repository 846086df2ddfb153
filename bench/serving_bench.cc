// Generated tokens/s through ServingEngine (scheduler + StepEngine in-process, no network)
// at concurrency 1, 8 and 32, and the executor's own single-sequence greedy decode loop as
// the yardstick of the same run (what the engine adds, or gains by batching). llama `124m`
// preset at Q4_K_M, 2 executor threads, 32-token prompts, 64-token completions.
// Engine/C/1 runs every request under structured output (a JSON grammar of objects, strings
// and numbers that cannot end before kGen tokens, so both variants generate the same count;
// masks on the sampling rank) beside Engine/C/0 without: the cost of constrained decoding.
//
//   build/default/bench/serving_bench [--benchmark_filter=...]
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "common/gguf/split.h"
#include "common/model/synthetic.h"
#include "controller/serving/model_text.h"
#include "controller/serving/serving_engine.h"
#include "tests/support/local_step_runner.h"

namespace {

using tessera::serving::GenerateEvent;
using tessera::serving::GenerateRequest;

constexpr int kPrompt = 32;
constexpr int kGen = 64;
constexpr int kThreads = 2;

std::string ModelPath() {
  std::string path = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                  "/tessera-bench-llama-124m-Q4_K_M.gguf");
  if (!std::filesystem::exists(path)) {
    tessera::model::SyntheticOptions o;
    o.arch = "llama";
    o.preset = "124m";
    o.quant = "Q4_K_M";
    auto w = tessera::model::BuildSyntheticModel(o);
    if (!w.ok() || !w->WriteFile(path).ok()) std::abort();
  }
  return path;
}

tessera::executor::ExecutorOptions Options() {
  tessera::executor::ExecutorOptions o;
  o.threads = kThreads;
  o.kv_tokens = 4096;
  return o;
}

// A list of at least 41 entries, each several tokens: longer than kGen whatever is sampled.
constexpr char kEntriesGbnf[] = R"gbnf(
root    ::= "{" ws "\"entries\":" ws "[" entry ( "," ws entry ){40,} "]" ws "}"
entry   ::= "{" ws "\"k\":" ws string "," ws "\"v\":" ws number ws "}"
string  ::= "\"" char* "\""
char    ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number  ::= "-"? ( "0" | [1-9] [0-9]{0,14} ) ( "." [0-9]{1,15} )?
ws      ::= [ \t\n]{0,4}
)gbnf";

std::vector<int32_t> Prompt(int i) {
  std::vector<int32_t> t(kPrompt);
  for (int k = 0; k < kPrompt; ++k) t[k] = (k * 7919 + 13 * i + 5) % 300;
  return t;
}

void Engine(benchmark::State& state) {
  const int concurrency = static_cast<int>(state.range(0));
  const bool constrained = state.range(1) != 0;
  auto runner = tessera::testing::LocalStepRunner::Create(ModelPath(), Options());
  if (!runner.ok()) std::abort();
  auto file = tessera::gguf::GgufModel::Open(ModelPath());
  auto text = tessera::serving::LoadModelText(file->metadata(), "");
  if (!file.ok() || !text.ok()) std::abort();
  tessera::serving::ModelInfo info;
  info.n_vocab = text->tokenizer.vocab().size();
  info.context_length = 4096;
  tessera::serving::ServingEngine engine(runner->get(), std::move(text->tokenizer),
                                         std::move(text->chat_template), info, {});
  int64_t generated = 0;
  for (auto _ : state) {
    std::mutex mu;
    std::condition_variable cv;
    int done = 0;
    std::vector<std::unique_ptr<tessera::serving::RequestHandle>> handles;
    for (int i = 0; i < concurrency; ++i) {
      GenerateRequest r;
      r.prompt_tokens = Prompt(i);
      r.max_tokens = kGen;
      r.ignore_eos = true;
      r.sampling.temperature = 0.8f;
      r.sampling.seed = i;
      if (constrained) r.grammar = kEntriesGbnf;
      auto h = engine.Submit(r, [&](GenerateEvent e) {
        if (!e.finished) return;
        std::lock_guard<std::mutex> l(mu);
        ++done;
        // A constrained answer may complete before kGen tokens.
        generated += e.usage.completion_tokens;
        cv.notify_all();
      });
      if (!h.ok()) std::abort();
      handles.push_back(*std::move(h));
    }
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return done == concurrency; });
  }
  state.counters["gen_tokens_per_s"] =
      benchmark::Counter(static_cast<double>(generated), benchmark::Counter::kIsRate);
  state.counters["steps"] = (*runner)->steps();
}

// One sequence, the executor called directly: prefill then greedy decode.
void ExecutorLoop(benchmark::State& state) {
  auto ex = tessera::executor::Executor::Create(ModelPath(), Options());
  if (!ex.ok()) std::abort();
  int64_t generated = 0;
  for (auto _ : state) {
    tessera::executor::SequenceInput s;
    s.tokens = Prompt(0);
    s.block_table.resize((*ex)->n_blocks());
    std::iota(s.block_table.begin(), s.block_table.end(), 0);
    for (int t = 0; t < kGen; ++t) {
      auto l = (*ex)->Step({&s, 1});
      const std::vector<float>& row = (*l)[0];
      s.start_pos += static_cast<int64_t>(s.tokens.size());
      s.tokens = {static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin())};
    }
    generated += kGen;
  }
  state.counters["gen_tokens_per_s"] =
      benchmark::Counter(static_cast<double>(generated), benchmark::Counter::kIsRate);
}

BENCHMARK(ExecutorLoop)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();
BENCHMARK(Engine)
    ->ArgNames({"concurrency", "constrained"})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({8, 0})
    ->Args({8, 1})
    ->Args({32, 0})
    ->Args({32, 1})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
