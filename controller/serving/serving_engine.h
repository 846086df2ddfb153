// The Engine the API layers use, implemented by continuous batching over a StepRunner:
// a scheduler thread admits requests (scheduler.h), keeps the KV blocks (block_manager.h),
// builds each tessera::v1::StepRequest, runs it, and turns the sampled tokens into
// GenerateEvents (text with stop strings and U+FFFD for invalid bytes, log-probabilities,
// usage).
//
//   ServingEngine engine(&worker_group, std::move(tokenizer), std::move(chat_template),
//                        info, options, &metrics_observer);
//   auto handle = engine.Submit(std::move(request), [conn](GenerateEvent e) { ... });
//   ...
//   (*handle)->Cancel();  // the client went away
//
// Failures: a step that fails with UNAVAILABLE (a worker died) fails every request in
// flight with that status and frees their blocks; the engine keeps serving once the
// runner is ready again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/chat/template.h"
#include "common/tokenizer/tokenizer.h"
#include "controller/serving/block_manager.h"
#include "controller/serving/engine.h"
#include "controller/serving/engine_observer.h"
#include "controller/serving/model_text.h"
#include "controller/serving/scheduler.h"
#include "controller/serving/step_runner.h"

namespace tessera::serving {

struct EngineOptions {
  // Sequences in one step.
  int max_num_seqs = 64;
  // Tokens fed to the model in one step (prefill chunks plus decodes).
  int max_num_batched_tokens = 512;
  // Requests queued beyond it are refused with RESOURCE_EXHAUSTED.
  int max_waiting_requests = 256;
  // 0: max_model_len.
  int64_t max_prompt_tokens = 0;
  // Prompt + generated tokens. 0: ModelInfo::max_model_len, else its context_length. Never
  // more than the KV cache holds (block_size * n_blocks), so one sequence always fits.
  int64_t max_model_len = 0;
  // Applies to requests without their own deadline; zero: none.
  std::chrono::steady_clock::duration request_timeout{0};
  // max_tokens of requests that give none (clamped to the context left); 0: up to the
  // context length, as vLLM.
  int32_t default_max_tokens = 0;
  // Prompt text bounds, checked before rendering or tokenizing: the bytes of a completion's
  // prompt, of a chat's message contents together, and of the rendered chat prompt (0: 32
  // per token of max_prompt_tokens); messages in one chat (0: max_prompt_tokens, since every
  // message takes at least one token).
  uint64_t max_prompt_bytes = 0;
  int64_t max_chat_messages = 0;
  // Special-token strings in request text (message contents, completion prompts) become
  // special tokens, as before this option existed. Off: only the template's own text does.
  bool parse_special_in_content = false;
  // Automatic prefix caching (block_manager.h): prompts skip the prefill of full KV blocks
  // an earlier request computed with the same tokens and cache salt.
  bool enable_prefix_caching = true;
  // Hand a step's events to their sinks (and detokenize them, unless the request has stop
  // strings) while the runner computes the next step, instead of before starting it.
  bool overlap_delivery = true;
  // Speculative decoding: "none", "ngram" (prompt lookup: drafts from the sequence's own
  // tokens) or "mtp" (the workers' MTP head drafts after each sampled token; the runner's
  // workers must have loaded it), verified by the workers in the next step; the output is
  // the same as without.
  std::string speculative = "none";
  // Drafted tokens per decode (at most), and the n-gram lengths looked up (longest first).
  int num_speculative_tokens = 4;
  int ngram_min = 2;
  int ngram_max = 4;
  // Checks the block manager's invariants after every step (a violation fails the step's
  // requests and is kept in EngineStats::block_check_failure). On in debug builds.
#ifdef NDEBUG
  bool check_block_invariants = false;
#else
  bool check_block_invariants = true;
#endif
};

struct EngineStats {
  int running = 0;
  int waiting = 0;
  int kv_blocks_total = 0;
  int kv_blocks_used = 0;
  int kv_blocks_free = 0;
  double kv_usage = 0;  // used / total
  int block_size = 0;
  int64_t preemptions = 0;
  int64_t steps = 0;
  // Speculative decoding: decodes that carried drafts, the drafted tokens, the drafts kept,
  // and the drafts kept by position (index 0: the first draft of a decode).
  int64_t spec_drafts = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_position;
  // Requests ended, by how.
  int64_t finished_stop = 0;
  int64_t finished_length = 0;
  int64_t cancelled = 0;
  int64_t failed = 0;  // worker errors, deadlines, internal errors
  // Prefix caching: prompt tokens of first admissions, those found cached, blocks cached.
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  int kv_blocks_cached = 0;
  // The first broken block-manager invariant (check_block_invariants), empty when none.
  std::string block_check_failure;
};

class ServingEngine : public Engine {
 public:
  // `runner` and `observer` (optional) must outlive the engine. The model's end-of-generation
  // ids are info.eog_token_ids, or when empty the tokenizer's. Starts the scheduler thread.
  ServingEngine(StepRunner* runner, tokenizer::Tokenizer tokenizer,
                std::optional<chat::ChatTemplate> chat_template, ModelInfo info,
                EngineOptions options, EngineObserver* observer = nullptr);
  // Stops the scheduler thread; requests still in flight receive UNAVAILABLE.
  ~ServingEngine() override;

  ServingEngine(const ServingEngine&) = delete;
  ServingEngine& operator=(const ServingEngine&) = delete;

  absl::StatusOr<std::unique_ptr<RequestHandle>> Submit(GenerateRequest request,
                                                        EventSink sink) override;
  const ModelInfo& info() const override { return info_; }
  absl::StatusOr<std::vector<int32_t>> Tokenize(const std::string& text,
                                                bool add_special) const override;
  absl::StatusOr<std::string> Detokenize(const std::vector<int32_t>& ids) const override;
  absl::StatusOr<std::string> RenderChat(const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt) const override;
  std::string TokenText(int32_t id) const override;
  std::optional<int32_t> SpecialTokenId(std::string_view text) const override;
  absl::StatusOr<std::vector<int32_t>> ChatPromptTokens(
      const std::vector<ChatMessage>& messages, bool add_generation_prompt,
      const ChatTemplateExtras& extras = {}) const override;
  absl::StatusOr<std::vector<int32_t>> PromptTokens(const std::string& text, bool add_special,
                                                    bool parse_special) const override;
  // The runner is ready and the engine is not draining.
  bool ready() const override;
  void StartDrain() override;
  int InFlight() const override;
  bool ResetPrefixCache() override;

  EngineStats stats() const;
  // The context limit in force: max_model_len resolved against the model and, once the
  // runner has been ready, its KV cache.
  int64_t max_model_len() const;

 private:
  struct Link;
  class Handle;
  struct Delivery {
    EventSink* sink;  // owned by a Sequence kept alive until delivered (see Deliver)
    GenerateEvent event;
  };
  // An event's text, produced when it is delivered (see ApplyToken).
  struct PendingText {
    size_t event;      // index in Outbox::events
    OutputText* text;  // the sequence's, kept alive by the outbox until delivered
    int32_t token;     // appended first; -1: none (a stop token's text is not output)
    bool finish;       // then the generation's end: what the text held back
  };
  // What the scheduler thread hands to sinks after releasing the lock: a step's events
  // are delivered while the workers run the next step.
  struct Outbox {
    std::vector<Delivery> events;
    std::vector<PendingText> texts;
    std::vector<std::unique_ptr<Sequence>> finished;  // kept alive for their sinks
  };
  enum class StepOutcome {
    kNothingToRun,
    kHandledWithoutStep,  // requests finished without one (a request that cannot fit)
    kRanStep,
  };

  void Loop();
  // With mu_ held.
  void EnsureCache();
  int64_t EffectiveMaxModelLen() const;
  // The prompt limits in force (takes mu_).
  PromptLimits Limits() const;
  void ReapCancelledAndExpired(Outbox& out);
  // Plans and runs one step; `out` holds the previous step's events on entry, which are
  // delivered while this step runs, and this step's events on return.
  StepOutcome RunOneStep(std::unique_lock<std::mutex>& lock, Outbox& out);
  void AddToStep(const ScheduledChunk& chunk, tessera::v1::StepRequest& step);
  void ApplyResult(const StepPlan& plan, const tessera::v1::StepResult& result, Outbox& out);
  // Applies one sampled token; false when it finished the sequence (then gone from the
  // scheduler).
  bool ApplyToken(Sequence* seq, const tessera::v1::SequenceResult& r, Outbox& out);
  bool IsStopToken(const Sequence& seq, int32_t token) const;
  // Takes the sequence out (freeing its blocks and, once it had a sampler, releasing it on
  // the workers) and queues its last event.
  void Finish(Sequence* seq, GenerateEvent event, const std::string& failure_reason, Outbox& out);
  void FailAll(const absl::Status& status, const std::string& failure_reason, Outbox& out);
  void FailChunks(const StepPlan& plan, const absl::Status& status, Outbox& out);
  // Finishes each of `seqs` with an "abort" event carrying `status`.
  void FailEach(const std::vector<Sequence*>& seqs, const absl::Status& status,
                const std::string& failure_reason, Outbox& out);
  // check_block_invariants: fails everything in flight when the bookkeeping broke.
  void CheckBlocks(Outbox& out);
  // Wakes the scheduler (a request was cancelled) and frees cancelled sequences' blocks.
  void Poke();
  std::optional<Clock::time_point> NextDeadline() const;
  // Without mu_, on the scheduler thread (the only one that touches a sequence's text):
  // produces the pending texts, then hands every event to its sink.
  static void Deliver(Outbox& out);

  StepRunner* const runner_;
  const tokenizer::Tokenizer tokenizer_;
  const std::optional<chat::ChatTemplate> chat_template_;
  const ModelInfo info_;
  const EngineOptions options_;
  EngineObserver* const observer_;
  std::vector<bool> eog_;         // by token id
  std::vector<int32_t> eog_ids_;  // the same, as a list (a constrained request's stop ids)

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool draining_ = false;
  uint64_t next_seq_id_ = 1;
  uint64_t next_step_id_ = 1;
  // When the last step's result came, while the next step follows at once (OnStepGap).
  std::optional<Clock::time_point> previous_step_end_;
  std::unique_ptr<BlockManager> blocks_;
  uint64_t cache_epoch_ = 0;  // the runner's, when blocks_ was last checked against it
  Scheduler scheduler_;
  std::vector<uint64_t> to_release_;  // seq ids whose samplers the next step drops
  EngineStats counters_;              // the cumulative fields
  bool poked_ = false;                // Submit or Cancel since the loop last looked
  // Lets a RequestHandle that outlives the engine call Cancel safely.
  std::shared_ptr<Link> link_;
  std::thread thread_;
};

}  // namespace tessera::serving
