// Automatic prefix caching through the serving engine.
//
// Numerics, over the real executor on a generated model of every architecture (GQA, MLA's
// latent cache, the DSA indexer's key cache), on the exact and the fast path: a prompt whose
// first blocks an earlier request computed gives the same tokens and log-probabilities as
// the same prompt run cold. Bit for bit when the cold run prefills in the same chunks (the
// cached blocks then hold exactly what the cold run computes), and on the batch-invariant
// fast path also when the earlier request computed them in a chunk of another length; on
// the exact path then within Tier 1 of the conformance vectors (|delta logprob| <= 1e-3).
// The truth for multi-turn chats is the executor alone.
//
// Bookkeeping, over a runner that models the KV cache (each step writes its tokens into the
// slots the block tables name and "samples" a function of everything the cache holds for
// the sequence): 64 concurrent multi-turn conversations with random lengths and random
// cancellations in a cache far smaller than their history. Any block shared wrongly,
// overwritten while shared or freed twice changes some answer or breaks an invariant, which
// the engine checks after every step.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/gguf/split.h"
#include "common/model/synthetic.h"
#include "controller/serving/model_text.h"
#include "controller/serving/serving_engine.h"
#include "gtest/gtest.h"
#include "tests/support/local_step_runner.h"

namespace tessera::serving {
namespace {

using testing::LocalStepRunner;

constexpr int kBlock = 16;

std::string ModelPath(const std::string& arch, const std::string& quant) {
  model::SyntheticOptions o;
  o.arch = arch;
  o.preset = "tiny";
  o.quant = quant;
  o.seed = 11;
  std::string p = absl::StrCat(::testing::TempDir(), "/prefix-", arch, "-", quant, ".gguf");
  auto w = model::BuildSyntheticModel(o);
  EXPECT_TRUE(w.ok()) << w.status();
  if (w.ok()) {
    EXPECT_TRUE(w->WriteFile(p).ok());
  }
  return p;
}

// One thread, a cache of 1,024 tokens in blocks of kBlock.
executor::ExecutorOptions OneThread(bool exact) {
  executor::ExecutorOptions o;
  o.exact = exact;
  o.threads = 1;
  o.kv_tokens = 1024;
  return o;
}

std::unique_ptr<ServingEngine> MakeEngine(StepRunner* runner, const std::string& model_path,
                                          EngineOptions options) {
  auto file = gguf::GgufModel::Open(model_path);
  EXPECT_TRUE(file.ok()) << file.status();
  auto text = LoadModelText(file->metadata(), "");
  EXPECT_TRUE(text.ok()) << text.status();
  ModelInfo info;
  info.name = "m";
  info.context_length = 4096;
  info.n_vocab = text->tokenizer.vocab().size();
  info.eog_token_ids = text->eog_token_ids;
  options.check_block_invariants = true;
  return std::make_unique<ServingEngine>(runner, std::move(text->tokenizer),
                                         std::move(text->chat_template), info, options);
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  Usage usage;
  absl::Status status;
  bool finished = false;
};

// Collects one request's events; Wait() returns them once it finished.
class Collector {
 public:
  EventSink Sink() {
    return [this](GenerateEvent e) {
      std::lock_guard<std::mutex> l(mu_);
      o_.tokens.insert(o_.tokens.end(), e.token_ids.begin(), e.token_ids.end());
      for (auto& lp : e.logprobs) o_.logprobs.push_back(std::move(lp));
      if (e.finished) {
        o_.finished = true;
        o_.usage = e.usage;
        o_.status = e.status;
      }
      cv_.notify_all();
    };
  }
  Outcome Wait() {
    std::unique_lock<std::mutex> l(mu_);
    EXPECT_TRUE(cv_.wait_for(l, std::chrono::seconds(120), [&] { return o_.finished; }))
        << "request never finished";
    return o_;
  }
  size_t TokensSoFar() {
    std::lock_guard<std::mutex> l(mu_);
    return o_.tokens.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  Outcome o_;
};

Outcome Generate(Engine& engine, GenerateRequest r) {
  Collector c;
  auto h = engine.Submit(std::move(r), c.Sink());
  EXPECT_TRUE(h.ok()) << h.status();
  if (!h.ok()) return {};
  return c.Wait();
}

GenerateRequest Greedy(std::vector<int32_t> prompt, int max_tokens, std::string salt = "") {
  GenerateRequest r;
  r.request_id = "r";
  r.prompt_tokens = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  r.logprobs = true;
  r.top_logprobs = 5;
  r.cache_salt = std::move(salt);
  return r;
}

std::vector<int32_t> Tokens(int n, int seed) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = 3 + (41 * i + 7 * seed + 5) % 240;
  return t;
}

// The largest |difference| of the sampled tokens' and the alternatives' log-probabilities
// (alternatives matched by token id); infinity when the tokens differ.
double MaxLogprobDelta(const Outcome& a, const Outcome& b) {
  if (a.tokens != b.tokens || a.logprobs.size() != b.logprobs.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.logprobs.size(); ++i) {
    worst = std::max(worst, std::fabs(double(a.logprobs[i].logprob) - b.logprobs[i].logprob));
    for (const auto& [tok, lp] : a.logprobs[i].top) {
      for (const auto& [tok2, lp2] : b.logprobs[i].top) {
        if (tok == tok2) worst = std::max(worst, std::fabs(double(lp) - lp2));
      }
    }
  }
  return worst;
}

bool BitEqual(const Outcome& a, const Outcome& b) {
  if (a.tokens != b.tokens || a.logprobs.size() != b.logprobs.size()) return false;
  for (size_t i = 0; i < a.logprobs.size(); ++i) {
    if (a.logprobs[i].logprob != b.logprobs[i].logprob || a.logprobs[i].top != b.logprobs[i].top) {
      return false;
    }
  }
  return true;
}

struct ArchCase {
  std::string arch;
  bool exact;
};

class PrefixCacheNumerics : public ::testing::TestWithParam<ArchCase> {};

TEST_P(PrefixCacheNumerics, CachedPrefixGivesTheColdResult) {
  const ArchCase& c = GetParam();
  const std::string path = ModelPath(c.arch, "Q8_0");
  auto runner = LocalStepRunner::Create(path, OneThread(c.exact));
  ASSERT_TRUE(runner.ok()) << runner.status();
  ASSERT_EQ((*runner)->block_size(), kBlock);

  const int shared = 2 * kBlock;
  const std::vector<int32_t> b = Tokens(shared + 13, 1);
  std::vector<int32_t> a_same(b.begin(), b.begin() + shared);
  std::vector<int32_t> a_longer = a_same;
  for (int32_t t : Tokens(9, 2)) a_longer.push_back(t);

  // Same chunks: prefills of at most 32 tokens, so the cold run computes [0, 32) then
  // [32, 45), exactly as the earlier request and the cached run do. A salt of its own keeps
  // the cold run cold on the same engine.
  {
    EngineOptions o;
    o.max_num_batched_tokens = shared;
    auto engine = MakeEngine(runner->get(), path, o);
    const Outcome cold = Generate(*engine, Greedy(b, 6, "cold"));
    ASSERT_TRUE(cold.status.ok()) << cold.status;
    EXPECT_EQ(cold.usage.cached_tokens, 0);
    const Outcome first = Generate(*engine, Greedy(a_same, 1));
    EXPECT_EQ(first.usage.cached_tokens, 0);
    const Outcome warm = Generate(*engine, Greedy(b, 6));
    ASSERT_TRUE(warm.status.ok()) << warm.status;
    EXPECT_EQ(warm.usage.cached_tokens, shared);
    EXPECT_EQ(warm.tokens, cold.tokens);
    EXPECT_TRUE(BitEqual(warm, cold))
        << "largest logprob difference " << MaxLogprobDelta(warm, cold);
    EXPECT_EQ(engine->stats().block_check_failure, "");
  }
  // Other chunks: the earlier request computed the shared blocks in a prefill of 41 tokens,
  // the cold run in one of 45.
  {
    auto engine = MakeEngine(runner->get(), path, {});
    const Outcome cold = Generate(*engine, Greedy(b, 6, "cold"));
    Generate(*engine, Greedy(a_longer, 2));
    const Outcome warm = Generate(*engine, Greedy(b, 6));
    EXPECT_EQ(warm.usage.cached_tokens, shared);
    EXPECT_EQ(warm.tokens, cold.tokens);
    EXPECT_LE(MaxLogprobDelta(warm, cold), 1e-3);
    // The batch-invariant fast path picks a prefill row's kernels by its chunk's size (both
    // chunks here take the prefill kernels), and MoE routing with per-vector kernels: the
    // same bits. The exact path's float products may round differently: Tier 1.
    if (!c.exact) {
      EXPECT_TRUE(BitEqual(warm, cold)) << "largest difference " << MaxLogprobDelta(warm, cold);
    }
    EngineStats s = engine->stats();
    EXPECT_EQ(s.prefix_cache_queries, 2 * static_cast<int64_t>(b.size()) + a_longer.size());
    EXPECT_EQ(s.prefix_cache_hits, shared);
    EXPECT_EQ(s.block_check_failure, "");
  }
}

std::vector<ArchCase> AllArchs() {
  std::vector<ArchCase> out;
  for (const char* arch :
       {"llama", "qwen2", "qwen3", "qwen3moe", "deepseek2", "glm4moe", "glm-dsa"}) {
    out.push_back({arch, true});
    out.push_back({arch, false});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Archs, PrefixCacheNumerics, ::testing::ValuesIn(AllArchs()),
                         [](const ::testing::TestParamInfo<ArchCase>& i) {
                           std::string n = i.param.arch + (i.param.exact ? "_exact" : "_fast");
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// The executor alone, one sequence, greedy: the truth for a conversation's turns.
std::vector<int32_t> GreedyReference(executor::Executor& ex, const std::vector<int32_t>& prompt,
                                     int max_tokens) {
  executor::SequenceInput s;
  s.tokens = prompt;
  s.block_table.resize(ex.n_blocks());
  std::iota(s.block_table.begin(), s.block_table.end(), 0);
  std::vector<int32_t> out;
  while (static_cast<int>(out.size()) < max_tokens) {
    auto logits = ex.Step({&s, 1});
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok()) break;
    const std::vector<float>& l = (*logits)[0];
    out.push_back(static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin()));
    s.start_pos += static_cast<int64_t>(s.tokens.size());
    s.tokens = {out.back()};
  }
  return out;
}

TEST(PrefixCache, MultiTurnChatReusesEveryEarlierTurn) {
  const std::string path = ModelPath("llama", "F32");
  auto runner = LocalStepRunner::Create(path, OneThread(/*exact=*/true));
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto reference = executor::Executor::Create(path, OneThread(/*exact=*/true));
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto engine = MakeEngine(runner->get(), path, {});
  std::vector<int32_t> history;
  int64_t queried = 0, hit = 0, fed = 0;  // fed: tokens the previous turn put in the cache
  for (int turn = 0; turn < 4; ++turn) {
    SCOPED_TRACE(absl::StrCat("turn ", turn));
    for (int32_t t : Tokens(11 + 7 * turn, 10 + turn)) history.push_back(t);
    const Outcome o = Generate(*engine, Greedy(history, 9));
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.tokens, GreedyReference(**reference, history, 9));
    // The previous turn fed its prompt and all its answer but the last token (sampled, never
    // fed); its full blocks are what this turn finds.
    EXPECT_EQ(o.usage.cached_tokens, fed / kBlock * kBlock);
    EXPECT_EQ(o.usage.prompt_tokens, static_cast<int32_t>(history.size()));
    queried += static_cast<int64_t>(history.size());
    hit += o.usage.cached_tokens;
    fed = static_cast<int64_t>(history.size()) + 9 - 1;
    history.insert(history.end(), o.tokens.begin(), o.tokens.end());
  }
  EngineStats s = engine->stats();
  EXPECT_EQ(s.prefix_cache_queries, queried);
  EXPECT_EQ(s.prefix_cache_hits, hit);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_GT(s.kv_blocks_cached, 0);
  // Reset: the next turn starts cold, with the same answer.
  EXPECT_TRUE(engine->ResetPrefixCache());
  EXPECT_EQ(engine->stats().kv_blocks_cached, 0);
  const Outcome again = Generate(*engine, Greedy(history, 3));
  EXPECT_EQ(again.usage.cached_tokens, 0);
  EXPECT_EQ(again.tokens, GreedyReference(**reference, history, 3));
}

TEST(PrefixCache, CachedTokensAreTheSharedFullBlocks) {
  const std::string path = ModelPath("llama", "F32");
  auto runner = LocalStepRunner::Create(path, OneThread(/*exact=*/true));
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto engine = MakeEngine(runner->get(), path, {});
  const std::vector<int32_t> system = Tokens(3 * kBlock + 5, 20);  // 53 shared tokens
  for (int q = 0; q < 4; ++q) {
    std::vector<int32_t> prompt = system;
    for (int32_t t : Tokens(6 + q, 30 + q)) prompt.push_back(t);
    const Outcome o = Generate(*engine, Greedy(prompt, 2));
    // The first request computes the 3 full blocks of the system prompt (its fourth block
    // mixes system and question tokens); every later one finds exactly those.
    EXPECT_EQ(o.usage.cached_tokens, q == 0 ? 0 : 3 * kBlock) << "question " << q;
  }
  // Another salt never hits.
  std::vector<int32_t> prompt = system;
  prompt.push_back(9);
  EXPECT_EQ(Generate(*engine, Greedy(prompt, 1, "other-tenant")).usage.cached_tokens, 0);
  EXPECT_EQ(Generate(*engine, Greedy(prompt, 1, "other-tenant")).usage.cached_tokens, 3 * kBlock);
  // With prefix caching off nothing is cached or counted.
  EngineOptions off;
  off.enable_prefix_caching = false;
  auto plain = MakeEngine(runner->get(), path, off);
  EXPECT_EQ(Generate(*plain, Greedy(prompt, 1)).usage.cached_tokens, 0);
  EXPECT_EQ(Generate(*plain, Greedy(prompt, 1)).usage.cached_tokens, 0);
  EXPECT_EQ(plain->stats().prefix_cache_queries, 0);
  EXPECT_FALSE(plain->ResetPrefixCache());
}

// ---- bookkeeping under load --------------------------------------------------------------

// A StepRunner whose "model" reads the KV cache: each step writes every fed token (and its
// position) into the slot its block table names, and a sampling sequence's next token is a
// hash of every token the cache holds for positions [0, its end). A block shared or reused
// wrongly changes that hash; two sequences writing one slot in a step is reported.
class CacheModelRunner : public StepRunner {
 public:
  CacheModelRunner(int n_blocks, int block_size)
      : n_blocks_(n_blocks),
        block_size_(block_size),
        token_(n_blocks * block_size, -1),
        pos_(n_blocks * block_size, -1) {}

  // The next token after `context`: what the cache model samples when it holds `context`.
  static int32_t Next(const std::vector<int32_t>& context) {
    uint64_t h = 1469598103934665603ull;
    for (size_t p = 0; p < context.size(); ++p) {
      h = (h ^ (static_cast<uint64_t>(context[p]) * 31 + p)) * 1099511628211ull;
    }
    return static_cast<int32_t>(3 + (h >> 17) % 200);
  }

  absl::StatusOr<tessera::v1::StepResult> RunStep(const tessera::v1::StepRequest& step) override {
    if (step_delay_.count() > 0) std::this_thread::sleep_for(step_delay_);
    std::lock_guard<std::mutex> l(mu_);
    tessera::v1::StepResult r;
    r.set_step_id(step.step_id());
    std::vector<uint64_t> writer(token_.size(), 0);
    for (const tessera::v1::StepSequence& s : step.seqs()) {
      for (int i = 0; i < s.tokens_size(); ++i) {
        const int64_t p = s.start_pos() + i;
        const int64_t slot = Slot(s, p);
        if (slot < 0)
          return absl::InvalidArgumentError(absl::StrCat("position ", p, " has no slot"));
        if (writer[slot] != 0 && writer[slot] != s.seq_id()) {
          violations_.push_back(absl::StrCat("slot ", slot, " written by sequences ", writer[slot],
                                             " and ", s.seq_id(), " in one step"));
        }
        writer[slot] = s.seq_id();
        token_[slot] = s.tokens(i);
        pos_[slot] = p;
      }
    }
    for (const tessera::v1::StepSequence& s : step.seqs()) {
      tessera::v1::SequenceResult* out = r.add_seqs();
      out->set_seq_id(s.seq_id());
      out->set_token(-1);
      if (!s.sample()) continue;
      const int64_t end = s.start_pos() + s.tokens_size();
      std::vector<int32_t> context;
      for (int64_t p = 0; p < end; ++p) {
        const int64_t slot = Slot(s, p);
        // A slot that holds another position's key is a wrong cache: it shows in the token.
        context.push_back(slot >= 0 && pos_[slot] == p ? token_[slot] : -7);
      }
      out->set_token(Next(context));
      out->set_logprob(-1.0f);
    }
    return r;
  }
  int block_size() const override { return block_size_; }
  int n_blocks() const override { return n_blocks_; }
  bool ready() const override { return true; }
  uint64_t cache_epoch() const override { return epoch_.load(); }

  // Every step takes at least this long (set before the engine runs).
  void set_step_delay(std::chrono::microseconds d) { step_delay_ = d; }

  // A worker restart: the cache's contents are gone.
  void Restart() {
    std::lock_guard<std::mutex> l(mu_);
    std::fill(token_.begin(), token_.end(), -1);
    std::fill(pos_.begin(), pos_.end(), -1);
    ++epoch_;
  }

  std::vector<std::string> violations() {
    std::lock_guard<std::mutex> l(mu_);
    return violations_;
  }

 private:
  int64_t Slot(const tessera::v1::StepSequence& s, int64_t p) const {
    const int64_t b = p / block_size_;
    if (b >= s.block_table_size()) return -1;
    const int32_t block = s.block_table(static_cast<int>(b));
    if (block < 0 || block >= n_blocks_) return -1;
    return static_cast<int64_t>(block) * block_size_ + p % block_size_;
  }

  const int n_blocks_, block_size_;
  std::atomic<uint64_t> epoch_{0};
  std::chrono::microseconds step_delay_{0};
  std::mutex mu_;
  std::vector<int32_t> token_;
  std::vector<int64_t> pos_;
  std::vector<std::string> violations_;
};

std::vector<int32_t> ColdRun(std::vector<int32_t> context, int max_tokens) {
  std::vector<int32_t> out;
  for (int i = 0; i < max_tokens; ++i) {
    out.push_back(CacheModelRunner::Next(context));
    context.push_back(out.back());
  }
  return out;
}

TEST(PrefixCache, AWorkerRestartForgetsTheCacheAndFailsWhatWasRunning) {
  CacheModelRunner runner(64, 4);
  runner.set_step_delay(std::chrono::milliseconds(1));  // the long request runs ~200 ms
  auto engine = MakeEngine(&runner, ModelPath("llama", "F32"), {});
  GenerateRequest r;
  r.request_id = "r";
  r.prompt_tokens = Tokens(21, 3);
  r.max_tokens = 2;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  EXPECT_EQ(Generate(*engine, r).usage.cached_tokens, 0);
  Outcome warm = Generate(*engine, r);
  EXPECT_EQ(warm.usage.cached_tokens, 20);  // (21 - 1) / 4 = 5 blocks
  EXPECT_EQ(warm.tokens, ColdRun(r.prompt_tokens, 2));
  runner.Restart();
  Outcome after = Generate(*engine, r);
  EXPECT_EQ(after.usage.cached_tokens, 0) << "blocks the restarted workers no longer hold";
  EXPECT_EQ(after.tokens, ColdRun(r.prompt_tokens, 2));
  // A request running when the workers restart cannot go on: its keys and values are gone.
  GenerateRequest longer = r;
  longer.max_tokens = 200;
  Collector c;
  auto h = engine->Submit(longer, c.Sink());
  ASSERT_TRUE(h.ok()) << h.status();
  while (c.TokensSoFar() < 3) std::this_thread::yield();
  runner.Restart();
  const Outcome lost = c.Wait();
  EXPECT_EQ(lost.status.code(), absl::StatusCode::kUnavailable) << lost.status;
  EXPECT_NE(lost.status.message().find("restarted"), absl::string_view::npos) << lost.status;
  EXPECT_EQ(Generate(*engine, r).tokens, ColdRun(r.prompt_tokens, 2));
  EXPECT_EQ(engine->stats().block_check_failure, "");
}

TEST(PrefixCache, ConcurrentConversationsWithCancellationsInASmallCache) {
  // 120 blocks of 4 tokens: 480 token slots for 64 conversations of up to ~250 tokens each.
  CacheModelRunner runner(120, 4);
  const std::string path = ModelPath("llama", "F32");  // for the tokenizer only
  EngineOptions o;
  o.max_num_batched_tokens = 96;
  o.max_num_seqs = 32;
  o.max_waiting_requests = 1000;
  auto engine = MakeEngine(&runner, path, o);

  constexpr int kConversations = 64, kTurns = 4;
  std::atomic<int> compared{0}, cancelled{0}, cached_turns{0};
  std::vector<std::string> failures;
  std::mutex failures_mu;
  auto fail = [&](std::string why) {
    std::lock_guard<std::mutex> l(failures_mu);
    failures.push_back(std::move(why));
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < kConversations; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 rng(1234 + c);
      // A few conversations share a "system prompt" (and salt), so that different
      // conversations hit each other's blocks too.
      std::vector<int32_t> history = Tokens(1 + rng() % 20, c % 4);
      const std::string salt = c % 8 == 0 ? "" : absl::StrCat("s", c % 3);
      for (int turn = 0; turn < kTurns; ++turn) {
        for (int i = 0, n = 1 + rng() % 40; i < n; ++i) history.push_back(3 + rng() % 200);
        const int max_tokens = 1 + rng() % 12;
        const bool cancel = rng() % 5 == 0;
        GenerateRequest r;
        r.request_id = absl::StrCat("c", c, "t", turn);
        r.prompt_tokens = history;
        r.max_tokens = max_tokens;
        r.ignore_eos = true;
        r.sampling.temperature = 0;
        r.cache_salt = salt;
        Collector col;
        auto h = engine->Submit(r, col.Sink());
        if (!h.ok()) {
          fail(absl::StrCat(r.request_id, ": refused: ", h.status().ToString()));
          return;
        }
        if (cancel) {
          const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
          while (col.TokensSoFar() < static_cast<size_t>(max_tokens / 2) &&
                 std::chrono::steady_clock::now() < until) {
            std::this_thread::yield();
          }
          (*h)->Cancel();
        }
        const Outcome got = col.Wait();
        const std::vector<int32_t> want = ColdRun(history, max_tokens);
        if (got.status.ok()) {
          if (got.tokens != want) fail(absl::StrCat(r.request_id, ": differs from its cold run"));
          ++compared;
        } else if (absl::IsCancelled(got.status)) {
          ++cancelled;
          if (!std::equal(got.tokens.begin(), got.tokens.end(), want.begin())) {
            fail(absl::StrCat(r.request_id, ": cancelled, and what it sent differs"));
          }
        } else {
          fail(absl::StrCat(r.request_id, ": ", got.status.ToString()));
        }
        if (got.usage.cached_tokens > 0) ++cached_turns;
        if (got.usage.cached_tokens % 4 != 0 ||
            got.usage.cached_tokens >= static_cast<int32_t>(r.prompt_tokens.size())) {
          fail(absl::StrCat(r.request_id, ": cached_tokens ", got.usage.cached_tokens));
        }
        // The client goes on with what it received, as a chat UI would.
        history.insert(history.end(), got.tokens.begin(), got.tokens.end());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& f : failures) ADD_FAILURE() << f;
  for (const std::string& v : runner.violations()) ADD_FAILURE() << v;
  EngineStats s = engine->stats();
  EXPECT_EQ(s.block_check_failure, "");
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.running + s.waiting, 0);
  EXPECT_GT(cached_turns.load(), 16) << "later turns should reuse earlier ones";
  EXPECT_GT(s.prefix_cache_hits, 0);
  EXPECT_LE(s.prefix_cache_hits, s.prefix_cache_queries);
  EXPECT_GT(compared.load(), kConversations * kTurns / 2);
  std::printf(
      "compared %d, cancelled %d, turns with a hit %d, preemptions %lld, hit rate %.2f\n",
      compared.load(), cancelled.load(), cached_turns.load(), static_cast<long long>(s.preemptions),
      static_cast<double>(s.prefix_cache_hits) / std::max<int64_t>(1, s.prefix_cache_queries));
}

}  // namespace
}  // namespace tessera::serving
