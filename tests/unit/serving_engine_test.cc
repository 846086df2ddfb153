// ServingEngine end to end over an in-process StepEngine on a generated tiny llama (exact
// float32 path), and over a scripted runner where the test picks the sampled tokens. The
// truth for model runs is an independent loop: the executor alone, one sequence, with the
// worker's sampler fed its logits (same seed -> same tokens).
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/gguf/split.h"
#include "common/model/synthetic.h"
#include "controller/serving/model_text.h"
#include "controller/serving/serving_engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/local_step_runner.h"
#include "tests/support/scripted_step_runner.h"
#include "tests/support/synthetic_model.h"
#include "worker/engine/step_engine.h"
#include "worker/sampling/sampling.h"

namespace tessera::serving {
namespace {

using ::testing::HasSubstr;
using testing::LocalStepRunner;
using testing::ScriptedStepRunner;

const std::string kFffd = "\xEF\xBF\xBD";

// The tiny llama with Q8_0 weights: the fast path's integer products (whose per-row bits do
// not depend on the batch under batch invariance).
const std::string& TinyQ8Model() {
  static const std::string path = [] {
    model::SyntheticOptions o;
    o.arch = "llama";
    o.preset = "tiny";
    o.quant = "Q8_0";
    o.seed = 7;
    auto w = model::BuildSyntheticModel(o);
    EXPECT_TRUE(w.ok()) << w.status();
    std::string p = absl::StrCat(::testing::TempDir(), "/serving-tiny-llama-q8.gguf");
    EXPECT_TRUE(w->WriteFile(p).ok());
    return p;
  }();
  return path;
}

const std::string& TinyModel() {
  static const std::string path = [] {
    model::SyntheticOptions o;
    o.arch = "llama";
    o.preset = "tiny";
    o.quant = "F32";
    o.seed = 7;
    auto w = model::BuildSyntheticModel(o);
    EXPECT_TRUE(w.ok()) << w.status();
    std::string p = absl::StrCat(::testing::TempDir(), "/serving-tiny-llama.gguf");
    EXPECT_TRUE(w->WriteFile(p).ok());
    return p;
  }();
  return path;
}

executor::ExecutorOptions ExactOptions(int64_t kv_tokens) {
  executor::ExecutorOptions o;
  o.exact = true;
  o.threads = 1;
  o.kv_tokens = kv_tokens;
  return o;
}

std::unique_ptr<LocalStepRunner> MakeRunner(int64_t kv_tokens = 4096) {
  auto r = LocalStepRunner::Create(TinyModel(), ExactOptions(kv_tokens));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : nullptr;
}

std::unique_ptr<ServingEngine> MakeEngine(StepRunner* runner, EngineOptions options = {},
                                          EngineObserver* observer = nullptr,
                                          const std::string& model = TinyModel()) {
  auto file = gguf::GgufModel::Open(model);
  EXPECT_TRUE(file.ok()) << file.status();
  auto text = LoadModelText(file->metadata(), "");
  EXPECT_TRUE(text.ok()) << text.status();
  ModelInfo info;
  info.name = "tiny";
  info.context_length = 4096;
  info.n_vocab = text->tokenizer.vocab().size();
  info.eog_token_ids = text->eog_token_ids;
  return std::make_unique<ServingEngine>(runner, std::move(text->tokenizer),
                                         std::move(text->chat_template), info, options, observer);
}

// Everything a request's sink received.
struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<std::string> texts;  // per event
  std::vector<TokenLogprobs> logprobs;
  std::string finish_reason;
  absl::Status status;
  Usage usage;
  int events_after_finish = 0;
};

class Collector {
 public:
  EventSink Sink() {
    return [this](GenerateEvent e) {
      std::lock_guard<std::mutex> l(mu_);
      if (done_) ++o_.events_after_finish;
      o_.tokens.insert(o_.tokens.end(), e.token_ids.begin(), e.token_ids.end());
      o_.text += e.text;
      o_.texts.push_back(e.text);
      for (auto& lp : e.logprobs) o_.logprobs.push_back(lp);
      if (e.finished) {
        done_ = true;
        o_.finish_reason = e.finish_reason;
        o_.status = e.status;
        o_.usage = e.usage;
      }
      cv_.notify_all();
    };
  }
  Outcome Wait() {
    std::unique_lock<std::mutex> l(mu_);
    EXPECT_TRUE(cv_.wait_for(l, std::chrono::seconds(120), [&] { return done_; }))
        << "request never finished";
    return o_;
  }
  size_t TokenCount() {
    std::lock_guard<std::mutex> l(mu_);
    return o_.tokens.size();
  }
  void WaitForTokens(size_t n) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::seconds(60), [&] { return done_ || o_.tokens.size() >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Outcome o_;
};

std::vector<int32_t> Prompt(int n, int offset) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (37 * i + 11 + 13 * offset) % 330;
  return t;
}

// The independent truth: the executor alone on one sequence, the sampler fed its logits.
std::vector<int32_t> Reference(const GenerateRequest& r, int max_tokens) {
  static auto ex = *executor::Executor::Create(TinyModel(), ExactOptions(1024));
  sampling::SamplingParams p;
  p.temperature = r.sampling.temperature;
  p.top_k = r.sampling.top_k;
  p.top_p = r.sampling.top_p;
  p.min_p = r.sampling.min_p;
  p.repetition_penalty = r.sampling.repetition_penalty;
  p.presence_penalty = r.sampling.presence_penalty;
  p.frequency_penalty = r.sampling.frequency_penalty;
  p.seed = r.sampling.seed;
  auto sampler = sampling::Sampler::Create(p);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  sampler->AddPromptTokens(r.prompt_tokens);
  executor::SequenceInput s;
  s.tokens = r.prompt_tokens;
  s.block_table.resize(ex->n_blocks());
  std::iota(s.block_table.begin(), s.block_table.end(), 0);
  std::vector<int32_t> out;
  while (static_cast<int>(out.size()) < max_tokens) {
    auto logits = ex->Step({&s, 1});
    EXPECT_TRUE(logits.ok()) << logits.status();
    out.push_back(sampler->Sample((*logits)[0]).token);
    s.start_pos += static_cast<int64_t>(s.tokens.size());
    s.tokens = {out.back()};
  }
  return out;
}

GenerateRequest Request(int i, int prompt_len, int max_tokens) {
  GenerateRequest r;
  r.request_id = absl::StrCat("r", i);
  r.prompt_tokens = Prompt(prompt_len, i);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.seed = 1000 + i;
  if (i % 3 == 0) {
    r.sampling.temperature = 0;
  } else {
    r.sampling.temperature = 0.6f + 0.2f * (i % 4);
    if (i % 2 == 0) r.sampling.top_k = 40;
    if (i % 5 == 0) r.sampling.top_p = 0.9f;
    if (i % 7 == 0) r.sampling.repetition_penalty = 1.1f;
  }
  return r;
}

// Submits all, waits for all.
std::vector<Outcome> RunAll(Engine& engine, const std::vector<GenerateRequest>& requests) {
  std::vector<std::unique_ptr<Collector>> collectors;
  std::vector<std::unique_ptr<RequestHandle>> handles;
  std::vector<absl::Status> refused;
  for (const GenerateRequest& r : requests) {
    collectors.push_back(std::make_unique<Collector>());
    auto h = engine.Submit(r, collectors.back()->Sink());
    EXPECT_TRUE(h.ok()) << h.status();
    refused.push_back(h.status());
    if (h.ok()) handles.push_back(*std::move(h));
  }
  std::vector<Outcome> out;
  for (size_t i = 0; i < collectors.size(); ++i) {
    if (refused[i].ok()) {
      out.push_back(collectors[i]->Wait());
    } else {
      out.emplace_back().status = refused[i];
    }
  }
  return out;
}

struct CountingObserver : EngineObserver {
  std::atomic<int> finished{0}, first_tokens{0}, tokens{0}, preemptions{0}, steps{0}, gaps{0};
  std::atomic<int> max_step_tokens{0};
  // Speculative decoding, as the requests' log lines report it, and as the hook counts it.
  std::atomic<int> spec_request_accepted{0}, spec_request_drafted{0}, spec_off_requests{0};
  std::atomic<int> spec_hook_accepted{0}, spec_hook_drafted{0};
  void OnRequestFinished(const RequestTimings& t, const std::string&, const std::string&) override {
    ++finished;
    EXPECT_GE(t.e2e, t.queue);
    if (t.spec_drafts < 0) {
      ++spec_off_requests;
    } else {
      spec_request_accepted += t.spec_accepted_tokens;
      spec_request_drafted += t.spec_draft_tokens;
    }
  }
  void OnSpeculation(int drafted, int accepted) override {
    spec_hook_drafted += drafted;
    spec_hook_accepted += accepted;
  }
  void OnFirstToken(double) override { ++first_tokens; }
  void OnToken(double) override { ++tokens; }
  void OnStep(const std::string&, double, int n) override {
    ++steps;
    if (n > max_step_tokens) max_step_tokens = n;
  }
  void OnPreemption() override { ++preemptions; }
  void OnStepGap(double seconds) override {
    ++gaps;
    EXPECT_GE(seconds, 0);
  }
};

TEST(ServingEngine, ConcurrentRequestsEqualEachRunAlone) {
  auto runner = MakeRunner();
  CountingObserver observer;
  EngineOptions o;
  o.max_num_batched_tokens = 128;
  auto engine = MakeEngine(runner.get(), o, &observer);
  std::vector<GenerateRequest> requests;
  int total_tokens = 0;
  for (int i = 0; i < 64; ++i) {
    requests.push_back(Request(i, 1 + (i * 7) % 50, 3 + (i * 5) % 14));
    total_tokens += requests.back().max_tokens;
  }
  std::vector<Outcome> got = RunAll(*engine, requests);
  for (int i = 0; i < 64; ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i));
    const GenerateRequest& r = requests[i];
    EXPECT_TRUE(got[i].status.ok()) << got[i].status;
    EXPECT_EQ(got[i].finish_reason, "length");
    EXPECT_EQ(got[i].tokens, Reference(r, r.max_tokens));
    EXPECT_EQ(got[i].usage.prompt_tokens, static_cast<int>(r.prompt_tokens.size()));
    EXPECT_EQ(got[i].usage.completion_tokens, r.max_tokens);
    EXPECT_EQ(got[i].events_after_finish, 0);
  }
  EXPECT_GT(runner->max_seqs_in_step(), 16) << "requests were not batched together";
  EngineStats s = engine->stats();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.finished_length, 64);
  EXPECT_EQ(observer.finished, 64);
  EXPECT_EQ(observer.first_tokens, 64);
  EXPECT_EQ(observer.tokens, total_tokens - 64);
  EXPECT_LE(observer.max_step_tokens, 128);
}

// Speculative decoding with n-gram drafts: every request's tokens (greedy, seeded sampling,
// penalties, logprobs) equal the executor-and-sampler loop without drafts, alone and batched,
// and drafts were both made and accepted (prompts that repeat a pattern, and the loops a
// random model falls into, give the n-gram lookup something to find).
TEST(ServingEngine, SpeculativeNgramDecodingEqualsPlainDecoding) {
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 24; ++i) {
    GenerateRequest r = Request(i, 1, 24 + i % 9);
    r.prompt_tokens.clear();
    const int period = 3 + i % 5;
    for (int k = 0; k < 40 + i; ++k) r.prompt_tokens.push_back((17 * (k % period) + i) % 330);
    if (i % 4 == 1) {
      r.logprobs = true;
      r.top_logprobs = 2;
    }
    requests.push_back(std::move(r));
  }
  for (int k : {1, 2, 4}) {
    for (bool batched : {true, false}) {
      SCOPED_TRACE(absl::StrCat("K=", k, batched ? " batched" : " alone"));
      auto runner = MakeRunner();
      EngineOptions o;
      o.speculative = "ngram";
      o.num_speculative_tokens = k;
      o.ngram_min = 1;
      CountingObserver observer;
      auto engine = MakeEngine(runner.get(), o, &observer);
      std::vector<Outcome> got;
      if (batched) {
        got = RunAll(*engine, requests);
      } else {
        for (const GenerateRequest& r : requests) got.push_back(RunAll(*engine, {r})[0]);
      }
      for (size_t i = 0; i < requests.size(); ++i) {
        SCOPED_TRACE(absl::StrCat("request ", i));
        const GenerateRequest& r = requests[i];
        ASSERT_TRUE(got[i].status.ok()) << got[i].status;
        EXPECT_EQ(got[i].tokens, Reference(r, r.max_tokens));
        EXPECT_EQ(got[i].usage.completion_tokens, r.max_tokens);
        if (r.logprobs) {
          ASSERT_EQ(got[i].logprobs.size(), static_cast<size_t>(r.max_tokens));
          for (size_t t = 0; t < got[i].logprobs.size(); ++t) {
            EXPECT_EQ(got[i].logprobs[t].token, got[i].tokens[t]);
            EXPECT_EQ(got[i].logprobs[t].top.size(), 2u);
          }
        }
      }
      const EngineStats s = engine->stats();
      EXPECT_GT(s.spec_draft_tokens, 0);
      EXPECT_GT(s.spec_accepted_tokens, 0) << "no draft was ever accepted";
      EXPECT_LE(s.spec_accepted_tokens, s.spec_draft_tokens);
      // Per request (the log line) and per decode (the metrics hook) add up to the same.
      EXPECT_EQ(observer.spec_off_requests, 0);
      EXPECT_EQ(observer.spec_request_accepted, s.spec_accepted_tokens);
      EXPECT_EQ(observer.spec_hook_accepted, s.spec_accepted_tokens);
      EXPECT_EQ(observer.spec_request_drafted, s.spec_draft_tokens);
      EXPECT_EQ(observer.spec_hook_drafted, s.spec_draft_tokens);
      EXPECT_EQ(s.kv_blocks_used, 0);
      // Accepted drafts save steps: fewer steps than tokens generated, alone.
      if (!batched) {
        int64_t generated = 0;
        for (const GenerateRequest& r : requests) generated += r.max_tokens;
        EXPECT_LT(runner->steps(), generated + static_cast<int64_t>(requests.size()));
      }
    }
  }
}

// The same on the fast path (integer products, attention in place), against the engine
// without drafts: verified rows are computed as one-token steps compute them
// (SequenceInput::rows_as_decodes), so tokens and logprobs are equal bit for bit.
TEST(ServingEngine, SpeculativeNgramDecodingEqualsPlainDecodingOnTheFastPath) {
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 16; ++i) {
    GenerateRequest r = Request(i, 1, 32);
    r.prompt_tokens.clear();
    for (int k = 0; k < 48; ++k) r.prompt_tokens.push_back((29 * (k % (3 + i % 4)) + i) % 330);
    r.logprobs = true;
    requests.push_back(std::move(r));
  }
  auto run = [&](const std::string& speculative) {
    executor::ExecutorOptions fast;
    fast.threads = 2;
    fast.kv_tokens = 4096;
    auto runner = LocalStepRunner::Create(TinyQ8Model(), fast);
    EXPECT_TRUE(runner.ok()) << runner.status();
    EngineOptions o;
    o.speculative = speculative;
    o.num_speculative_tokens = 3;
    o.ngram_min = 1;
    auto engine = MakeEngine(runner->get(), o);
    std::vector<Outcome> got = RunAll(*engine, requests);
    return std::make_pair(got, engine->stats());
  };
  const auto [plain, plain_stats] = run("none");
  const auto [spec, spec_stats] = run("ngram");
  EXPECT_EQ(plain_stats.spec_draft_tokens, 0);
  EXPECT_GT(spec_stats.spec_accepted_tokens, 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i));
    EXPECT_EQ(spec[i].tokens, plain[i].tokens);
    ASSERT_EQ(spec[i].logprobs.size(), plain[i].logprobs.size());
    for (size_t t = 0; t < plain[i].logprobs.size(); ++t) {
      EXPECT_EQ(spec[i].logprobs[t].logprob, plain[i].logprobs[t].logprob) << "token " << t;
    }
  }
}

// The fast path (threads, in-place attention, the kernels the batch size picks) keeps every
// request's tokens and logprobs bit for bit when it runs among others: for float32 weights
// (the embedded default model's kind, products in float) and Q8_0 (integer products), with a
// token budget small enough that prompts are cut into chunks of every length (1 to 40) at
// places that depend on the batch.
TEST(ServingEngine, FastPathConcurrentRequestsEqualEachRunAlone) {
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 24; ++i) {
    GenerateRequest r = Request(i, 2 + (i * 11) % 61, 6 + i % 7);
    r.logprobs = true;
    r.top_logprobs = 1;
    requests.push_back(std::move(r));
  }
  for (const std::string* model : {&TinyModel(), &TinyQ8Model()}) {
    SCOPED_TRACE(*model);
    executor::ExecutorOptions fast;
    fast.threads = 2;
    fast.kv_tokens = 4096;
    auto run = [&](const std::vector<GenerateRequest>& batch, int budget) {
      auto runner = LocalStepRunner::Create(*model, fast);
      EXPECT_TRUE(runner.ok()) << runner.status();
      EngineOptions o;
      o.max_num_batched_tokens = budget;
      auto engine = MakeEngine(runner->get(), o);
      std::vector<Outcome> got = RunAll(*engine, batch);
      EXPECT_GT((*runner)->max_seqs_in_step(), batch.size() > 1 ? 8 : 0);
      return got;
    };
    const std::vector<Outcome> together = run(requests, 40);
    for (size_t i = 0; i < requests.size(); ++i) {
      SCOPED_TRACE(absl::StrCat("request ", i));
      // Alone, with a budget that takes the whole prompt at once.
      const Outcome alone = run({requests[i]}, 512)[0];
      ASSERT_TRUE(together[i].status.ok()) << together[i].status;
      EXPECT_EQ(together[i].tokens, alone.tokens);
      ASSERT_EQ(together[i].logprobs.size(), alone.logprobs.size());
      for (size_t t = 0; t < alone.logprobs.size(); ++t) {
        EXPECT_EQ(together[i].logprobs[t].logprob, alone.logprobs[t].logprob) << "token " << t;
      }
    }
  }
}

// GLM-5's shape in small: MoE, MLA with the DSA indexer, and a NextN/MTP block (the small
// glm-dsa preset), in `quant` (Q8_0: integer products, F32: float ones); or DeepSeek-V3's
// (arch deepseek2: no indexer, grouped routing) with one NextN block added.
const std::string& MtpModel(const std::string& quant = "Q8_0",
                            const std::string& arch = "glm-dsa") {
  static std::map<std::string, std::string>* paths = new std::map<std::string, std::string>;
  const std::string key = arch + "/" + quant;
  auto it = paths->find(key);
  if (it == paths->end()) {
    model::SyntheticOptions o;
    o.arch = arch;
    o.preset = "small";
    o.quant = quant;
    o.seed = 9;
    o.nextn = 1;
    it = paths->emplace(key, testing::WriteSyntheticModel(o, "serving-mtp")).first;
  }
  return it->second;
}

executor::ExecutorOptions MtpFastOptions() {
  executor::ExecutorOptions o;
  o.threads = 2;
  o.kv_tokens = 2048;
  o.load_mtp = true;
  return o;
}

namespace v1 = ::tessera::v1;

std::vector<int32_t> Iota(int n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

int32_t Argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

// The workers' MTP drafts (StepEngine, StepSequence.mtp) against the MTP head computed
// independently on a fresh executor: the whole prompt's hidden states in one step, the MTP
// block over every (position, next token) pair in one step, then one row fed back per
// further draft. The engine instead gets the prompt in two chunks (the first chunk's last
// position waits for the next chunk's first token) and then verifies its drafts in a decode
// step; on the fast path prompt rows get the same bits however they are chunked, so the
// first step's drafts must be equal exactly, the verify step's by the argmax.
TEST(ServingEngine, MtpDraftsAreTheMtpHeadsGreedyTokens) {
  const std::vector<int32_t> prompt = Prompt(24, 5);
  auto ex = executor::Executor::Create(MtpModel(), MtpFastOptions());
  ASSERT_TRUE(ex.ok()) << ex.status();
  const int64_t V = (*ex)->hparams().n_vocab;
  const int n_blocks = (*ex)->n_blocks();
  worker::StepEngine engine(*std::move(ex), 0);
  auto chunk = [&](uint64_t step_id, int start, std::vector<int32_t> tokens, bool sample,
                   int drafts) {
    v1::StepRequest step;
    step.set_step_id(step_id);
    v1::StepSequence* s = step.add_seqs();
    s->set_seq_id(1);
    s->mutable_tokens()->Assign(tokens.begin(), tokens.end());
    s->set_start_pos(start);
    for (int b = 0; b < n_blocks; ++b) s->add_block_table(b);
    s->set_sample(sample);
    s->set_num_drafts(drafts);
    s->set_mtp(true);
    s->set_mtp_draft_tokens(3);
    if (step_id == 1) s->set_new_sampler(true);  // greedy
    auto r = engine.Run(step);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::StepResult{};
  };
  const v1::StepResult r1 =
      chunk(1, 0, std::vector<int32_t>(prompt.begin(), prompt.begin() + 10), false, 0);
  ASSERT_EQ(r1.seqs(0).mtp_drafts_size(), 0);
  const v1::StepResult r2 =
      chunk(2, 10, std::vector<int32_t>(prompt.begin() + 10, prompt.end()), true, 0);
  const int32_t x = r2.seqs(0).token();
  ASSERT_EQ(r2.seqs(0).mtp_drafts_size(), 3);

  // The independent computation.
  auto ref = executor::Executor::Create(MtpModel(), MtpFastOptions());
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto mtp_drafts = [&](const std::vector<int32_t>& seq, int count) {
    executor::SequenceInput trunk;
    trunk.tokens.assign(seq.begin(), seq.end() - 1);
    trunk.block_table = Iota(n_blocks);
    trunk.all_hidden = true;
    std::vector<std::vector<float>> hidden;
    EXPECT_TRUE((*ref)->Step({&trunk, 1}, nullptr, &hidden).ok());
    executor::SequenceInput m;
    m.tokens.assign(seq.begin() + 1, seq.end());
    m.block_table = trunk.block_table;
    m.mtp_hidden = hidden[0];
    std::vector<int32_t> out;
    for (int k = 0; k < count; ++k) {
      std::vector<std::vector<float>> h;
      auto l = (*ref)->MtpStep({&m, 1}, &h);
      EXPECT_TRUE(l.ok()) << l.status();
      if (!l.ok()) return out;
      out.push_back(Argmax((*l)[0].data() + (*l)[0].size() - V, V));
      m.start_pos += static_cast<int64_t>(m.tokens.size());
      m.tokens = {out.back()};
      m.mtp_hidden = h[0];
    }
    return out;
  };
  std::vector<int32_t> seq = prompt;
  seq.push_back(x);
  const std::vector<int32_t> want = mtp_drafts(seq, 3);
  EXPECT_EQ(std::vector<int32_t>(r2.seqs(0).mtp_drafts().begin(), r2.seqs(0).mtp_drafts().end()),
            want);

  // Verify them: x and the three drafts in one step; then the next drafts follow the kept
  // drafts and the token after them.
  std::vector<int32_t> feed = {x};
  feed.insert(feed.end(), r2.seqs(0).mtp_drafts().begin(), r2.seqs(0).mtp_drafts().end());
  const v1::StepResult r3 = chunk(3, 24, feed, true, 3);
  for (const v1::SequenceResult& a : r3.seqs(0).accepted_drafts()) seq.push_back(a.token());
  seq.push_back(r3.seqs(0).token());
  ASSERT_EQ(r3.seqs(0).mtp_drafts_size(), 3);
  EXPECT_EQ(r3.seqs(0).mtp_drafts(0), mtp_drafts(seq, 1)[0]);
}

// --speculative mtp through the serving engine: 32 requests at once, each one's tokens and logprobs
// equal the engine's without speculation bit for bit (greedy and seeded sampling; prompts cut into
// chunks by a small token budget; K = 1, 2 and 4; Q8_0 and F32 weights; glm-dsa and deepseek2),
// drafts were made and verified, nothing leaks.
TEST(ServingEngine, SpeculativeMtpDecodingEqualsPlainDecoding) {
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 32; ++i) {
    GenerateRequest r = Request(i, 9 + (5 * i) % 47, 12);
    r.logprobs = true;
    requests.push_back(std::move(r));
  }
  for (const auto& [model, k] : {std::pair<const std::string*, int>{&MtpModel(), 1},
                                 {&MtpModel(), 4},
                                 {&MtpModel("F32"), 2},
                                 {&MtpModel("Q8_0", "deepseek2"), 2}}) {
    SCOPED_TRACE(absl::StrCat(*model, " K=", k));
    auto run = [&](const std::string& speculative) {
      auto runner = LocalStepRunner::Create(*model, MtpFastOptions());
      EXPECT_TRUE(runner.ok()) << runner.status();
      EngineOptions o;
      o.speculative = speculative;
      o.num_speculative_tokens = k;
      o.max_num_batched_tokens = 40;
      auto engine = MakeEngine(runner->get(), o, nullptr, *model);
      std::vector<Outcome> got = RunAll(*engine, requests);
      return std::make_pair(got, engine->stats());
    };
    const auto [plain, plain_stats] = run("none");
    const auto [spec, spec_stats] = run("mtp");
    EXPECT_EQ(plain_stats.spec_draft_tokens, 0);
    EXPECT_GT(spec_stats.spec_draft_tokens, 0);
    EXPECT_LE(spec_stats.spec_accepted_tokens, spec_stats.spec_draft_tokens);
    EXPECT_EQ(spec_stats.kv_blocks_used, 0);
    std::printf("mtp: %lld draft tokens, %lld accepted\n",
                static_cast<long long>(spec_stats.spec_draft_tokens),
                static_cast<long long>(spec_stats.spec_accepted_tokens));
    for (size_t i = 0; i < requests.size(); ++i) {
      SCOPED_TRACE(absl::StrCat("request ", i));
      ASSERT_TRUE(spec[i].status.ok()) << spec[i].status;
      EXPECT_EQ(spec[i].tokens, plain[i].tokens);
      ASSERT_EQ(spec[i].logprobs.size(), plain[i].logprobs.size());
      for (size_t t = 0; t < plain[i].logprobs.size(); ++t) {
        EXPECT_EQ(spec[i].logprobs[t].logprob, plain[i].logprobs[t].logprob) << "token " << t;
      }
    }
  }
}

// --speculative mtp with prefix caching: the MTP block's entry for a block's last position
// pairs it with the next token, so a prompt that shares two full blocks with an earlier one
// but differs right after them reuses only the first (its second's last MTP entry holds the
// earlier prompt's next token), and its drafts are those it gets with nothing cached; a
// prompt that also shares the next token reuses both.
TEST(ServingEngine, MtpDraftsAfterAPrefixHitAreTheSequencesOwn) {
  auto probe = LocalStepRunner::Create(MtpModel(), MtpFastOptions());
  ASSERT_TRUE(probe.ok()) << probe.status();
  const int bs = (*probe)->block_size();
  const std::vector<int32_t> shared = Prompt(2 * bs, 3);
  auto request = [&](int i, std::vector<int32_t> tail) {
    GenerateRequest r = Request(i, 1, 10);
    r.sampling.temperature = 0;  // greedy: drafts and tokens comparable run to run
    r.prompt_tokens = shared;
    r.prompt_tokens.insert(r.prompt_tokens.end(), tail.begin(), tail.end());
    return r;
  };
  const GenerateRequest a = request(0, {7, 8, 9, 10, 11});
  const GenerateRequest b = request(1, {17, 8, 9, 10, 11});  // differs right after the blocks
  const GenerateRequest c = request(2, {7, 18, 19});         // shares the next token too
  auto run = [&](bool prefix_caching, const std::vector<GenerateRequest>& before,
                 const GenerateRequest& r) {
    auto runner = LocalStepRunner::Create(MtpModel(), MtpFastOptions());
    EXPECT_TRUE(runner.ok()) << runner.status();
    EngineOptions o;
    o.speculative = "mtp";
    o.num_speculative_tokens = 2;
    o.enable_prefix_caching = prefix_caching;
    auto engine = MakeEngine(runner->get(), o, nullptr, MtpModel());
    for (const GenerateRequest& earlier : before) {
      EXPECT_TRUE(RunAll(*engine, {earlier})[0].status.ok());
    }
    (*runner)->TakeMtpDrafts();
    const Outcome got = RunAll(*engine, {r})[0];
    EXPECT_TRUE(got.status.ok()) << got.status;
    return std::make_pair(got, (*runner)->TakeMtpDrafts());
  };
  for (const GenerateRequest* r : {&b, &c}) {
    SCOPED_TRACE(r->request_id);
    const auto [alone, alone_drafts] = run(false, {}, *r);
    const auto [after_a, after_a_drafts] = run(true, {a}, *r);
    EXPECT_EQ(after_a.usage.cached_tokens, r == &b ? bs : 2 * bs);
    EXPECT_EQ(after_a.tokens, alone.tokens);
    ASSERT_FALSE(alone_drafts.empty());
    EXPECT_EQ(after_a_drafts, alone_drafts);
  }
}

TEST(ServingEngine, ChunkedPrefillEqualsUnchunked) {
  GenerateRequest r = Request(3, 150, 8);  // greedy
  ASSERT_EQ(r.sampling.temperature, 0);
  const std::vector<int32_t> want = Reference(r, 8);
  for (int budget : {512, 16}) {
    SCOPED_TRACE(absl::StrCat("max_num_batched_tokens ", budget));
    auto runner = MakeRunner();
    EngineOptions o;
    o.max_num_batched_tokens = budget;
    auto engine = MakeEngine(runner.get(), o);
    Outcome got = RunAll(*engine, {r})[0];
    EXPECT_EQ(got.tokens, want);
    // 150 prompt tokens take ceil(150 / budget) steps, then one step per further token.
    EXPECT_EQ(runner->steps(), (150 + budget - 1) / budget + 7);
  }
}

TEST(ServingEngine, PreemptionByRecomputeKeepsResults) {
  auto runner = MakeRunner(/*kv_tokens=*/128);  // 8 blocks of 16
  ASSERT_EQ(runner->n_blocks() * runner->block_size(), 128);
  CountingObserver observer;
  auto engine = MakeEngine(runner.get(), {}, &observer);
  EXPECT_EQ(engine->max_model_len(), 128);
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 8; ++i) requests.push_back(Request(i, 20 + i, 24));
  std::vector<Outcome> got = RunAll(*engine, requests);
  for (int i = 0; i < 8; ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i));
    EXPECT_TRUE(got[i].status.ok()) << got[i].status;
    EXPECT_EQ(got[i].tokens, Reference(requests[i], 24));
  }
  EngineStats s = engine->stats();
  EXPECT_GT(s.preemptions, 0);
  EXPECT_EQ(observer.preemptions, s.preemptions);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_total, 8);
}

TEST(ServingEngine, CancelStopsTheRequestAndFreesItsBlocks) {
  auto runner = MakeRunner();
  auto engine = MakeEngine(runner.get());
  GenerateRequest r = Request(1, 40, 3000);
  Collector c;
  auto h = engine->Submit(r, c.Sink());
  ASSERT_TRUE(h.ok()) << h.status();
  c.WaitForTokens(3);
  EXPECT_GT(engine->stats().kv_blocks_used, 0);
  (*h)->Cancel();
  (*h)->Cancel();  // idempotent
  Outcome o = c.Wait();
  EXPECT_EQ(o.status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(o.finish_reason, "abort");
  EXPECT_LT(o.tokens.size(), 3000u);
  EngineStats s = engine->stats();
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.cancelled, 1);
  EXPECT_EQ(engine->InFlight(), 0);
  (*h)->Cancel();  // after the end: nothing happens
  h->reset();
  // The engine goes on serving.
  GenerateRequest next = Request(2, 5, 4);
  EXPECT_EQ(RunAll(*engine, {next})[0].tokens, Reference(next, 4));
}

TEST(ServingEngine, DeadlinesEndRequestsWithDeadlineExceeded) {
  auto runner = MakeRunner();
  EngineOptions o;
  o.request_timeout = std::chrono::milliseconds(100);
  auto engine = MakeEngine(runner.get(), o);
  GenerateRequest by_option = Request(1, 10, 3000);
  GenerateRequest own = Request(2, 10, 3000);
  own.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
  std::vector<Outcome> got = RunAll(*engine, {by_option, own});
  for (const Outcome& out : got) {
    EXPECT_EQ(out.status.code(), absl::StatusCode::kDeadlineExceeded) << out.status;
    EXPECT_LT(out.tokens.size(), 3000u);
  }
  EngineStats s = engine->stats();
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.failed, 2);
}

// A runner whose Nth step fails as a dead worker does. Steps wait until Open(), so that
// a test can put several requests in flight first.
class FailingRunner : public StepRunner {
 public:
  FailingRunner(StepRunner* inner, int fail_step) : inner_(inner), fail_step_(fail_step) {}
  absl::StatusOr<tessera::v1::StepResult> RunStep(const tessera::v1::StepRequest& s) override {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return open_; });
    }
    if (++steps_ == fail_step_) return absl::UnavailableError("worker rank 1 exited (signal 9)");
    return inner_->RunStep(s);
  }
  int block_size() const override { return inner_->block_size(); }
  int n_blocks() const override { return inner_->n_blocks(); }
  bool ready() const override { return inner_->ready(); }
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  StepRunner* inner_;
  int fail_step_;
  int steps_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(ServingEngine, AFailedStepFailsInFlightRequestsAndTheEngineRecovers) {
  auto local = MakeRunner();
  FailingRunner runner(local.get(), /*fail_step=*/4);
  auto engine = MakeEngine(&runner);
  std::vector<std::unique_ptr<Collector>> collectors;
  std::vector<std::unique_ptr<RequestHandle>> handles;
  for (int i = 0; i < 4; ++i) {
    collectors.push_back(std::make_unique<Collector>());
    auto h = engine->Submit(Request(i, 8 + i, 50), collectors.back()->Sink());
    ASSERT_TRUE(h.ok()) << h.status();
    handles.push_back(*std::move(h));
  }
  runner.Open();
  for (auto& c : collectors) {
    Outcome o = c->Wait();
    EXPECT_EQ(o.status.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(o.status.message(), HasSubstr("worker rank 1 exited (signal 9)"));
    EXPECT_EQ(o.finish_reason, "abort");
  }
  EngineStats s = engine->stats();
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.failed, 4);
  EXPECT_TRUE(engine->ready());
  GenerateRequest later = Request(9, 12, 6);
  Outcome o = RunAll(*engine, {later})[0];
  EXPECT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.tokens, Reference(later, 6));
  EXPECT_EQ(local->live_samplers(), 1u);  // the four failed ones were released
}

TEST(ServingEngine, RandomModelAtHighTemperatureAlwaysAnswersWithText) {
  auto runner = MakeRunner();
  auto engine = MakeEngine(runner.get());
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 24; ++i) {
    GenerateRequest r = Request(i, 4 + i, 24);
    r.ignore_eos = false;
    r.sampling.temperature = 2.0f;
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0f;
    requests.push_back(r);
  }
  for (const Outcome& o : RunAll(*engine, requests)) {
    EXPECT_TRUE(o.status.ok()) << o.status;
    EXPECT_THAT(o.finish_reason, ::testing::AnyOf("stop", "length"));
    // nlohmann::json refuses to serialize invalid UTF-8.
    EXPECT_NO_THROW((void)nlohmann::json(o.text).dump());
  }
}

// ---- scripted tokens ------------------------------------------------------------------

// Byte-level vocabulary: token b (b < 256) is the byte b.
std::vector<int32_t> Bytes(const std::string& s) {
  std::vector<int32_t> out;
  for (unsigned char c : s) out.push_back(c);
  return out;
}

Outcome RunScripted(const std::vector<int32_t>& script, GenerateRequest r) {
  ScriptedStepRunner runner(script);
  auto engine = MakeEngine(&runner);
  if (r.prompt_tokens.empty()) r.prompt_tokens = Bytes("Q: ");
  return RunAll(*engine, {r})[0];
}

TEST(ServingEngine, StopStringsMatchAcrossTokensAndAreExcluded) {
  const std::vector<int32_t> script = Bytes("Hello world, again and again");
  GenerateRequest r;
  r.max_tokens = 28;
  r.stop = {"o w"};
  Outcome o = RunScripted(script, r);
  EXPECT_TRUE(o.status.ok());
  EXPECT_EQ(o.text, "Hell");
  EXPECT_EQ(o.finish_reason, "stop");
  EXPECT_EQ(o.tokens, Bytes("Hello w"));  // the token that completed the stop string is the last
  EXPECT_EQ(o.usage.completion_tokens, 7);
  // "o" was held back until "w" decided it.
  EXPECT_EQ(o.texts, (std::vector<std::string>{"H", "e", "l", "l", "", "", ""}));

  r.stop = {"xyz", "again"};
  EXPECT_EQ(RunScripted(script, r).text, "Hello world, ");
  r.stop = {"worlds"};
  r.max_tokens = 11;
  o = RunScripted(script, r);
  EXPECT_EQ(o.text, "Hello world");  // held "world" released at the end
  EXPECT_EQ(o.finish_reason, "length");
}

// The engine hands a step to the workers before it spends time on the previous step's
// events: at StartStep of step k the sink holds the tokens of steps 1..k-2 only, and the
// token of step k-1 (detokenized late, as the request has no stop strings) arrives while
// step k runs. The text is the same as when it is produced at once.
class PipelineProbeRunner : public ScriptedStepRunner {
 public:
  PipelineProbeRunner(std::vector<int32_t> script, std::function<size_t()> delivered)
      : ScriptedStepRunner(std::move(script)), delivered_(std::move(delivered)) {}
  absl::Status StartStep(const tessera::v1::StepRequest& step) override {
    ++started_;
    at_start_.push_back(delivered_());
    return ScriptedStepRunner::StartStep(step);
  }
  absl::StatusOr<tessera::v1::StepResult> FinishStep() override {
    // Step 1 is the prefill; step k (k >= 2) follows the step that sampled token k-1.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (delivered_() + 1 < static_cast<size_t>(started_) &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    during_.push_back(delivered_());
    return ScriptedStepRunner::FinishStep();
  }
  std::vector<size_t> at_start_, during_;

 private:
  std::function<size_t()> delivered_;
  int started_ = 0;
};

TEST(ServingEngine, AStepsEventsAreDeliveredWhileTheNextStepRuns) {
  Collector c;
  PipelineProbeRunner runner(Bytes("Hello!"), [&] { return c.TokenCount(); });
  CountingObserver observer;
  auto engine = MakeEngine(&runner, {}, &observer);
  GenerateRequest r;
  r.prompt_tokens = Bytes("Q: ");
  r.max_tokens = 6;
  auto h = engine->Submit(r, c.Sink());
  ASSERT_TRUE(h.ok()) << h.status();
  Outcome o = c.Wait();
  EXPECT_EQ(o.text, "Hello!");
  EXPECT_EQ(o.texts, (std::vector<std::string>{"H", "e", "l", "l", "o", "!"}));
  EXPECT_EQ(o.finish_reason, "length");
  // Six steps, each sampling one token.
  EXPECT_EQ(runner.at_start_, (std::vector<size_t>{0, 0, 1, 2, 3, 4}));
  EXPECT_EQ(runner.during_, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  // The scheduler's time between steps is measured for the 5 steps that followed one.
  EXPECT_EQ(observer.steps, 6);
  EXPECT_EQ(observer.gaps, 5);

  // overlap_delivery off: step k starts only after step k-1's token was delivered.
  Collector c2;
  PipelineProbeRunner serial(Bytes("Hello!"), [&] { return c2.TokenCount(); });
  EngineOptions options;
  options.overlap_delivery = false;
  auto serial_engine = MakeEngine(&serial, options);
  auto h2 = serial_engine->Submit(r, c2.Sink());
  ASSERT_TRUE(h2.ok()) << h2.status();
  EXPECT_EQ(c2.Wait().text, "Hello!");
  EXPECT_EQ(serial.at_start_, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
}

TEST(ServingEngine, InvalidUtf8BecomesReplacementCharacters) {
  GenerateRequest r;
  r.max_tokens = 7;
  Outcome o = RunScripted({0xE2, 0x82, 'a', 0xFF, 0xE2, 0x82, 0xAC}, r);
  EXPECT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.text, kFffd + "a" + kFffd + "\xE2\x82\xAC");
  EXPECT_EQ(o.finish_reason, "length");

  r.max_tokens = 4;
  o = RunScripted({'o', 'k', 0xF0, 0x9F}, r);  // ends inside a character
  EXPECT_EQ(o.text, "ok" + kFffd);
}

TEST(ServingEngine, EndOfGenerationAndStopTokenIds) {
  auto file = gguf::GgufModel::Open(TinyModel());
  auto text = LoadModelText(file->metadata(), "");
  ASSERT_TRUE(text.ok());
  ASSERT_FALSE(text->eog_token_ids.empty());
  const int32_t eos = text->eog_token_ids[0];
  GenerateRequest r;
  r.max_tokens = 4;
  Outcome o = RunScripted({'h', 'i', eos, 'x'}, r);
  EXPECT_EQ(o.text, "hi");
  EXPECT_EQ(o.finish_reason, "stop");
  EXPECT_EQ(o.tokens, (std::vector<int32_t>{'h', 'i', eos}));
  r.ignore_eos = true;
  o = RunScripted({'h', 'i', eos, 'x'}, r);
  EXPECT_EQ(o.text, "hix");  // a control token has no text
  EXPECT_EQ(o.finish_reason, "length");
  r.ignore_eos = false;
  r.stop_token_ids = {'b'};
  o = RunScripted(Bytes("abc"), r);
  EXPECT_EQ(o.text, "a");
  EXPECT_EQ(o.finish_reason, "stop");
}

TEST(ServingEngine, LogprobsComeFromTheStepResult) {
  GenerateRequest r;
  r.max_tokens = 2;
  r.logprobs = true;
  r.top_logprobs = 3;
  Outcome o = RunScripted(Bytes("ab"), r);
  ASSERT_EQ(o.logprobs.size(), 2u);
  EXPECT_EQ(o.logprobs[1].token, 'b');
  EXPECT_FLOAT_EQ(o.logprobs[1].logprob, -0.5f);
  ASSERT_EQ(o.logprobs[1].top.size(), 3u);
  EXPECT_EQ(o.logprobs[1].top[2], (std::pair<int32_t, float>{2, -3.0f}));
  r.logprobs = false;
  r.top_logprobs = 0;
  EXPECT_TRUE(RunScripted(Bytes("ab"), r).logprobs.empty());
}

TEST(ServingEngine, FullQueueIsResourceExhausted) {
  ScriptedStepRunner runner(Bytes("abcdef"));
  EngineOptions o;
  o.max_num_seqs = 1;
  o.max_waiting_requests = 2;
  auto engine = MakeEngine(&runner, o);
  runner.Close();
  GenerateRequest r;
  r.prompt_tokens = Bytes("go");
  r.max_tokens = 3;
  Collector a, b, c;
  auto ha = engine->Submit(r, a.Sink());
  ASSERT_TRUE(ha.ok());
  runner.WaitEntered(1);  // a runs (held at the gate); b and c wait
  auto hb = engine->Submit(r, b.Sink());
  auto hc = engine->Submit(r, c.Sink());
  ASSERT_TRUE(hb.ok() && hc.ok());
  EXPECT_EQ(engine->stats().waiting, 2);
  Collector d;
  auto hd = engine->Submit(r, d.Sink());
  EXPECT_EQ(hd.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(hd.status().message(), HasSubstr("max-waiting-requests"));
  runner.Open();
  for (Collector* x : {&a, &b, &c}) EXPECT_EQ(x->Wait().text, "abc");
}

TEST(ServingEngine, CancelFreesBlocksAtOnceEvenDuringAStep) {
  ScriptedStepRunner runner(Bytes("abcdef"), /*n_blocks=*/8, /*block_size=*/4);
  auto engine = MakeEngine(&runner);
  GenerateRequest r;
  r.prompt_tokens = Bytes("a prompt of 21 tokens");
  r.max_tokens = 10;
  runner.Close();  // the first step (the prefill) stays in the runner
  Collector c;
  auto h = engine->Submit(r, c.Sink());
  ASSERT_TRUE(h.ok());
  runner.WaitEntered(1);
  EXPECT_EQ(engine->stats().kv_blocks_used, 6);  // 21 positions in blocks of 4
  (*h)->Cancel();
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  runner.Open();
  Outcome o = c.Wait();
  EXPECT_EQ(o.status.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(o.tokens.empty());  // the held step's token is dropped
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
}

TEST(ServingEngine, SubmitRefusesWhatCannotRun) {
  ScriptedStepRunner runner(Bytes("a"));
  EngineOptions o;
  o.max_prompt_tokens = 8;
  o.max_model_len = 32;
  auto engine = MakeEngine(&runner, o);
  EXPECT_EQ(engine->max_model_len(), 32);
  auto submit = [&](std::vector<int32_t> prompt, int max_tokens) {
    GenerateRequest r;
    r.prompt_tokens = std::move(prompt);
    r.max_tokens = max_tokens;
    return engine->Submit(r, [](GenerateEvent) {}).status();
  };
  absl::Status s = submit(Bytes("123456789"), 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("9 tokens"));
  EXPECT_THAT(s.message(), HasSubstr("max-prompt-tokens) of 8"));
  s = submit(Bytes("1234"), 29);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max-model-len) is 32 tokens"));
  EXPECT_THAT(s.message(), HasSubstr("33 tokens (4 in the prompt, 29 in the completion)"));
  EXPECT_EQ(submit({}, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(submit(Bytes("1234"), 28).ok());

  engine->StartDrain();
  EXPECT_FALSE(engine->ready());
  EXPECT_EQ(submit(Bytes("1"), 1).code(), absl::StatusCode::kUnavailable);

  auto local = MakeRunner(256);
  local->set_ready(false);
  auto not_ready = MakeEngine(local.get());
  EXPECT_FALSE(not_ready->ready());
  GenerateRequest r;
  r.prompt_tokens = Bytes("1");
  EXPECT_EQ(not_ready->Submit(r, [](GenerateEvent) {}).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(ServingEngine, TextHelpers) {
  ScriptedStepRunner runner(Bytes("a"));
  auto engine = MakeEngine(&runner);
  auto ids = engine->Tokenize("Hello world", /*add_special=*/false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*engine->Detokenize(*ids), "Hello world");
  EXPECT_EQ(*engine->Detokenize({0xE2, 'x'}), kFffd + "x");
  EXPECT_EQ(engine->TokenText('A'), "A");
  EXPECT_EQ(engine->TokenText(0xFF), kFffd);
  auto chat = engine->RenderChat({{"user", "hi"}}, true);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(*chat,
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// A chat request's tools, tool calls and chat_template_kwargs reach the template's variables.
TEST(ServingEngine, ChatTemplateExtrasBecomeVariables) {
  auto file = gguf::GgufModel::Open(TinyModel());
  ASSERT_TRUE(file.ok()) << file.status();
  auto text = LoadModelText(file->metadata(), "");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_FALSE(text->chat_template_source.empty());
  ChatTemplateExtras extras;
  extras.vars = R"({"tools":[{"type":"function","function":{"name":"f"}}],)"
                R"("enable_thinking":false,"messages":"ignored"})";
  extras.message_fields = {"",
                           R"({"tool_calls":[{"id":"c1","type":"function",)"
                           R"("function":{"name":"f","arguments":"{\"a\":1}"}}]})",
                           R"({"tool_call_id":"c1"})"};
  const nlohmann::ordered_json vars = ChatVariables(
      text->tokenizer, {{"user", "hi"}, {"assistant", ""}, {"tool", "42"}}, true, &extras);
  EXPECT_EQ(vars["tools"][0]["function"]["name"], "f");
  EXPECT_EQ(vars["enable_thinking"], false);
  ASSERT_EQ(vars["messages"].size(), 3u);  // not replaced by the extras
  EXPECT_EQ(vars["messages"][0], nlohmann::ordered_json({{"role", "user"}, {"content", "hi"}}));
  // String arguments that are a JSON object are passed as the object, as templates expect.
  EXPECT_EQ(vars["messages"][1]["tool_calls"][0]["function"]["arguments"]["a"], 1);
  EXPECT_EQ(vars["messages"][2]["tool_call_id"], "c1");
  EXPECT_EQ(vars["add_generation_prompt"], true);
}

// ---- structured output (a grammar in the request; the worker's matcher masks samples) ----

// A record of bounded size, so that a random model finishes it: every generation ends where
// the grammar does. Checked below by parsing, not by the grammar engine.
constexpr char kRecordGbnf[] = R"gbnf(
root  ::= "{" ws "\"name\":" ws name "," ws "\"age\":" ws age ws "}"
name  ::= "\"" [a-z]{1,8} "\""
age   ::= [1-9] [0-9]?
ws    ::= " "?
)gbnf";

// Whether `text` is a record kRecordGbnf describes: a JSON object with exactly "name" (1-8
// lowercase letters) and "age" (1-99), in that order, single spaces at most.
bool IsRecord(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.size() != 2) return false;
  if (!j.contains("name") || !j["name"].is_string() || !j.contains("age") ||
      !j["age"].is_number_integer()) {
    return false;
  }
  const std::string name = j["name"];
  if (name.empty() || name.size() > 8) return false;
  for (char c : name) {
    if (c < 'a' || c > 'z') return false;
  }
  const int age = j["age"];
  return age >= 1 && age <= 99 && text.find("  ") == std::string::npos &&
         text.find("\"name\"") < text.find("\"age\"");
}

GenerateRequest Constrained(int i, std::string grammar, int max_tokens = 64) {
  GenerateRequest r;
  r.request_id = absl::StrCat("g", i);
  r.prompt_tokens = Prompt(5 + i % 7, i);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 500 + i;
  r.grammar = std::move(grammar);
  return r;
}

TEST(ServingEngine, GrammarConstrainedOutputsAreValidAndEndWithStop) {
  auto runner = MakeRunner();
  auto engine = MakeEngine(runner.get());
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 24; ++i) requests.push_back(Constrained(i, kRecordGbnf));
  // With ignore_eos the end-of-generation token never comes: the grammar's end finishes.
  for (int i = 24; i < 28; ++i) {
    requests.push_back(Constrained(i, kRecordGbnf));
    requests.back().ignore_eos = true;
  }
  std::vector<Outcome> got = RunAll(*engine, requests);
  std::set<std::string> distinct;
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i, ": ", got[i].text));
    ASSERT_TRUE(got[i].status.ok()) << got[i].status;
    EXPECT_EQ(got[i].finish_reason, "stop");
    EXPECT_TRUE(IsRecord(got[i].text));
    distinct.insert(got[i].text);
  }
  // Temperature 1 with different seeds: the grammar constrains, it does not script.
  EXPECT_GT(distinct.size(), got.size() / 2);
  // One compilation served every request.
  EXPECT_EQ(runner->grammar_cache_misses(), 1u);
}

TEST(ServingEngine, GrammarChoicesAndLengthCuts) {
  auto runner = MakeRunner();
  auto engine = MakeEngine(runner.get());
  const std::set<std::string> choices = {"yes", "no", "maybe later"};
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 12; ++i) {
    requests.push_back(Constrained(i, R"(root ::= "yes" | "no" | "maybe later")"));
  }
  // Cut by max_tokens: "length", and the text is a prefix of a valid record.
  for (int i = 12; i < 16; ++i) requests.push_back(Constrained(i, kRecordGbnf, 2));
  std::vector<Outcome> got = RunAll(*engine, requests);
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i, ": ", got[i].text));
    ASSERT_TRUE(got[i].status.ok()) << got[i].status;
    if (i < 12) {
      EXPECT_EQ(got[i].finish_reason, "stop");
      EXPECT_TRUE(choices.contains(got[i].text));
    } else {
      EXPECT_EQ(got[i].finish_reason, "length");
      EXPECT_EQ(got[i].tokens.size(), 2u);
      EXPECT_TRUE(absl::StartsWith(got[i].text, "{")) << "not a record's prefix";
    }
  }
}

TEST(ServingEngine, UnconstrainedRequestsAreUnchangedByConstrainedBatchMates) {
  auto runner = MakeRunner();
  auto engine = MakeEngine(runner.get());
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 8; ++i) {
    requests.push_back(Request(i + 1, 3 + i, 12));
    requests.push_back(Constrained(i, kRecordGbnf));
  }
  std::vector<Outcome> got = RunAll(*engine, requests);
  EXPECT_GT(runner->max_seqs_in_step(), 4) << "requests were not batched together";
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i));
    ASSERT_TRUE(got[i].status.ok()) << got[i].status;
    if (i % 2 == 0) {
      EXPECT_EQ(got[i].tokens, Reference(requests[i], 12));
    } else {
      EXPECT_TRUE(IsRecord(got[i].text)) << got[i].text;
    }
  }
}

TEST(ServingEngine, AGrammarLetsASpecialTokenThroughOnlyWhereItNamesIt) {
  auto file = gguf::GgufModel::Open(TinyModel());
  auto text = LoadModelText(file->metadata(), "");
  ASSERT_TRUE(text.ok());
  const tokenizer::Vocabulary& v = text->tokenizer.vocab();
  // A control token that does not end generation (the tiny model's BOS or another).
  int32_t marker = -1;
  for (int32_t id = 0; id < v.size() && marker < 0; ++id) {
    if (v.type(id) == tokenizer::TokenType::kControl && !v.IsEndOfGeneration(id)) marker = id;
  }
  ASSERT_GE(marker, 0) << "the tiny model has no control token besides end-of-generation";
  auto runner = MakeRunner();
  auto engine = MakeEngine(runner.get());
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 6; ++i) {
    requests.push_back(
        Constrained(i, absl::StrCat("root ::= [a-z]{1,3} <[", marker, "]> [0-9]{2}")));
  }
  for (const Outcome& o : RunAll(*engine, requests)) {
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.finish_reason, "stop");
    const auto at = std::find(o.tokens.begin(), o.tokens.end(), marker);
    ASSERT_NE(at, o.tokens.end()) << "the named special token never came";
    EXPECT_EQ(std::count(o.tokens.begin(), o.tokens.end(), marker), 1);
    // Before it: 1-3 letters; after it: two digits (the control token has no text).
    std::string before, after;
    for (auto it = o.tokens.begin(); it != o.tokens.end(); ++it) {
      if (it == at) continue;
      (it < at ? before : after) += text->tokenizer.Piece(*it);
    }
    EXPECT_TRUE(
        before.size() >= 1 && before.size() <= 3 &&
        std::all_of(before.begin(), before.end(), [](char c) { return c >= 'a' && c <= 'z'; }))
        << before;
    EXPECT_TRUE(after.size() == 2 && std::isdigit(static_cast<unsigned char>(after[0])) &&
                std::isdigit(static_cast<unsigned char>(after[1])))
        << after;
  }
}

TEST(ServingEngine, AnInvalidGrammarFailsOnlyWithAClearError) {
  // Serving compiles grammars before they reach a worker (structured_output.h); one that
  // slips through anyway is a step error naming the grammar, and the engine goes on.
  auto runner = MakeRunner();
  auto engine = MakeEngine(runner.get());
  std::vector<Outcome> bad = RunAll(*engine, {Constrained(0, "root ::= undefined_rule")});
  EXPECT_FALSE(bad[0].status.ok());
  EXPECT_THAT(std::string(bad[0].status.message()), HasSubstr("grammar"));
  std::vector<Outcome> good = RunAll(*engine, {Constrained(1, kRecordGbnf)});
  ASSERT_TRUE(good[0].status.ok()) << good[0].status;
  EXPECT_TRUE(IsRecord(good[0].text)) << good[0].text;
}

}  // namespace
}  // namespace tessera::serving
