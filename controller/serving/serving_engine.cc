#include "controller/serving/serving_engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/util/thread_name.h"
#include "controller/serving/request_validation.h"
#include "controller/serving/utf8_sanitizer.h"
#include "nlohmann/json.hpp"

namespace tessera::serving {

namespace v1 = tessera::v1;

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// When the scheduler has work it cannot start (workers not ready, or waiting for blocks),
// it looks again this often.
constexpr auto kIdlePoll = std::chrono::milliseconds(10);

}  // namespace

// The engine as a handle sees it: null once the engine is gone.
struct ServingEngine::Link {
  std::mutex mu;
  ServingEngine* engine = nullptr;
};

class ServingEngine::Handle : public RequestHandle {
 public:
  Handle(std::shared_ptr<CancelFlag> flag, std::shared_ptr<Link> link)
      : flag_(std::move(flag)), link_(std::move(link)) {}

  void Cancel() override {
    if (flag_->cancelled.exchange(true)) return;
    std::lock_guard<std::mutex> l(link_->mu);
    if (link_->engine != nullptr) link_->engine->Poke();
  }

 private:
  std::shared_ptr<CancelFlag> flag_;
  std::shared_ptr<Link> link_;
};

ServingEngine::ServingEngine(StepRunner* runner, tokenizer::Tokenizer tokenizer,
                             std::optional<chat::ChatTemplate> chat_template, ModelInfo info,
                             EngineOptions options, EngineObserver* observer)
    : runner_(runner),
      tokenizer_(std::move(tokenizer)),
      chat_template_(std::move(chat_template)),
      info_(std::move(info)),
      options_(options),
      observer_(observer),
      blocks_(std::make_unique<BlockManager>(0, 1, options.enable_prefix_caching)),
      scheduler_({options.max_num_seqs, options.max_num_batched_tokens,
                  options.speculative != "none" ? options.num_speculative_tokens : 0,
                  options.ngram_min, options.ngram_max, options.speculative == "mtp"},
                 blocks_.get()),
      link_(std::make_shared<Link>()) {
  const int32_t n_vocab = std::max(info_.n_vocab, tokenizer_.vocab().size());
  eog_.assign(static_cast<size_t>(n_vocab), false);
  if (!info_.eog_token_ids.empty()) {
    for (int32_t id : info_.eog_token_ids) {
      if (id >= 0 && id < n_vocab) eog_[id] = true;
    }
  } else {
    for (int32_t id = 0; id < tokenizer_.vocab().size(); ++id) {
      eog_[id] = tokenizer_.vocab().IsEndOfGeneration(id);
    }
  }
  for (size_t id = 0; id < eog_.size(); ++id) {
    if (eog_[id]) eog_ids_.push_back(static_cast<int32_t>(id));
  }
  link_->engine = this;
  {
    std::lock_guard<std::mutex> l(mu_);
    EnsureCache();
  }
  thread_ = std::thread([this] {
    NameThisThread("tessera-engine");
    Loop();
  });
}

ServingEngine::~ServingEngine() {
  {
    std::lock_guard<std::mutex> l(link_->mu);
    link_->engine = nullptr;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void ServingEngine::Poke() {
  {
    std::lock_guard<std::mutex> l(mu_);
    poked_ = true;
    // A cancelled sequence's blocks are free at once, even while a step runs: the step
    // request already holds a copy of the block table, and only the scheduler thread hands
    // blocks out, after the step returns (it then drops the sequence's result).
    for (const auto& seq : scheduler_.running()) {
      if (seq->cancel->cancelled.load()) blocks_->Release(seq->block_table);
    }
  }
  wake_.notify_all();
}

// ---- API side -------------------------------------------------------------------------

int64_t ServingEngine::EffectiveMaxModelLen() const {
  int64_t len = options_.max_model_len > 0 ? options_.max_model_len
                : info_.max_model_len > 0  ? info_.max_model_len
                                           : info_.context_length;
  const int64_t capacity = blocks_->capacity_tokens();
  if (capacity > 0 && (len <= 0 || len > capacity)) len = capacity;
  return len;
}

int64_t ServingEngine::max_model_len() const {
  std::lock_guard<std::mutex> l(mu_);
  return EffectiveMaxModelLen();
}

void ServingEngine::EnsureCache() {
  if (!runner_->ready()) return;
  // The workers restarted: what their caches held is gone. While sequences run, RunOneStep
  // first fails them (their keys and values are gone too), then comes here.
  if (const uint64_t epoch = runner_->cache_epoch();
      epoch != cache_epoch_ && scheduler_.running().empty()) {
    blocks_->ResetPrefixCache();
    cache_epoch_ = epoch;
  }
  const int n = runner_->n_blocks(), bs = runner_->block_size();
  if (blocks_->total_blocks() == n && blocks_->block_size() == bs) return;
  if (blocks_->used_blocks() > 0) return;  // swapped once the sequences holding blocks end
  // Under MTP drafting a block's last MTP entry pairs it with the next token: that token is
  // part of what a prompt must share to reuse the block.
  blocks_ = std::make_unique<BlockManager>(n, bs, options_.enable_prefix_caching,
                                           options_.speculative == "mtp" ? 1 : 0);
  scheduler_.set_blocks(blocks_.get());
}

bool ServingEngine::ResetPrefixCache() {
  std::lock_guard<std::mutex> l(mu_);
  if (!blocks_->prefix_caching()) return false;
  blocks_->ResetPrefixCache();
  return true;
}

absl::StatusOr<std::unique_ptr<RequestHandle>> ServingEngine::Submit(GenerateRequest request,
                                                                     EventSink sink) {
  if (!runner_->ready()) {
    return absl::UnavailableError("the model's workers are not ready; retry later");
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (draining_ || stop_) {
    return absl::UnavailableError("the server is shutting down and accepts no new requests");
  }
  EnsureCache();
  RequestLimits limits;
  limits.max_model_len = EffectiveMaxModelLen();
  limits.max_prompt_tokens =
      options_.max_prompt_tokens > 0 ? options_.max_prompt_tokens : limits.max_model_len;
  limits.n_vocab = static_cast<int32_t>(eog_.size());
  limits.default_max_tokens = options_.default_max_tokens;
  absl::StatusOr<int32_t> max_tokens = ValidateRequest(request, limits);
  if (!max_tokens.ok()) return max_tokens.status();
  if (static_cast<int>(scheduler_.waiting().size()) >= options_.max_waiting_requests) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the waiting queue is full (max-waiting-requests = ", options_.max_waiting_requests,
        " requests); retry later"));
  }

  auto seq = std::make_unique<Sequence>();
  seq->seq_id = next_seq_id_++;
  seq->arrival = Clock::now();
  seq->max_tokens = *max_tokens;
  if (request.deadline.has_value()) {
    seq->deadline = request.deadline;
  } else if (options_.request_timeout > Clock::duration::zero()) {
    seq->deadline = seq->arrival + options_.request_timeout;
  }
  seq->tokens = request.prompt_tokens;
  seq->prompt_len = static_cast<int32_t>(request.prompt_tokens.size());
  seq->speculate = options_.speculative == "ngram" || options_.speculative == "mtp";
  seq->text = std::make_unique<OutputText>(&tokenizer_, request.stop);
  seq->cancel = std::make_shared<CancelFlag>();
  seq->request = std::move(request);
  seq->sink = std::move(sink);
  auto handle = std::make_unique<Handle>(seq->cancel, link_);
  scheduler_.Enqueue(std::move(seq));
  poked_ = true;
  lock.unlock();
  wake_.notify_all();
  return handle;
}

absl::StatusOr<std::vector<int32_t>> ServingEngine::Tokenize(const std::string& text,
                                                             bool add_special) const {
  tokenizer::EncodeOptions o;
  o.add_special = add_special;
  // Rendered chat templates spell their markers as text; as HF tokenizers and llama-server.
  o.parse_special = true;
  o.skip_duplicate_bos = true;
  return tokenizer_.Encode(text, o);
}

absl::StatusOr<std::string> ServingEngine::Detokenize(const std::vector<int32_t>& ids) const {
  absl::StatusOr<std::string> bytes = tokenizer_.Decode(ids);
  if (!bytes.ok()) return bytes.status();
  return SanitizeUtf8(*bytes);
}

absl::StatusOr<std::string> ServingEngine::RenderChat(const std::vector<ChatMessage>& messages,
                                                      bool add_generation_prompt) const {
  if (!chat_template_.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", info_.name, " has no chat template (configure chat-template)"));
  }
  return chat_template_->Render(ChatVariables(tokenizer_, messages, add_generation_prompt));
}

PromptLimits ServingEngine::Limits() const {
  int64_t max_prompt_tokens = options_.max_prompt_tokens;
  if (max_prompt_tokens <= 0) {
    std::lock_guard<std::mutex> lock(mu_);
    max_prompt_tokens = EffectiveMaxModelLen();
  }
  max_prompt_tokens = std::max<int64_t>(max_prompt_tokens, 1);
  PromptLimits l;
  l.max_prompt_bytes = options_.max_prompt_bytes > 0
                           ? options_.max_prompt_bytes
                           : 32 * static_cast<uint64_t>(max_prompt_tokens);
  l.max_chat_messages =
      options_.max_chat_messages > 0 ? options_.max_chat_messages : max_prompt_tokens;
  l.parse_special_in_content = options_.parse_special_in_content;
  return l;
}

absl::StatusOr<std::vector<int32_t>> ServingEngine::ChatPromptTokens(
    const std::vector<ChatMessage>& messages, bool add_generation_prompt,
    const ChatTemplateExtras& extras) const {
  if (!chat_template_.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", info_.name, " has no chat template (configure chat-template)"));
  }
  return serving::ChatPromptTokens(tokenizer_, *chat_template_, messages, add_generation_prompt,
                                   Limits(), /*now=*/nullptr, &extras);
}

absl::StatusOr<std::vector<int32_t>> ServingEngine::PromptTokens(const std::string& text,
                                                                 bool add_special,
                                                                 bool parse_special) const {
  return CompletionPromptTokens(tokenizer_, text, add_special, parse_special, Limits());
}

std::string ServingEngine::TokenText(int32_t id) const {
  if (!tokenizer_.vocab().Contains(id)) return "";
  return SanitizeUtf8(tokenizer_.Piece(id));
}

std::optional<int32_t> ServingEngine::SpecialTokenId(std::string_view text) const {
  const tokenizer::Vocabulary& v = tokenizer_.vocab();
  const tokenizer::TokenId id = v.Find(text);
  if (!v.Contains(id)) return std::nullopt;
  const tokenizer::TokenType type = v.type(id);
  if (type == tokenizer::TokenType::kNormal || type == tokenizer::TokenType::kByte) {
    return std::nullopt;
  }
  return id;
}

bool ServingEngine::ready() const {
  if (!runner_->ready()) return false;
  std::lock_guard<std::mutex> l(mu_);
  return !draining_ && !stop_;
}

void ServingEngine::StartDrain() {
  std::lock_guard<std::mutex> l(mu_);
  draining_ = true;
}

int ServingEngine::InFlight() const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int>(scheduler_.running().size() + scheduler_.waiting().size());
}

EngineStats ServingEngine::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  EngineStats s = counters_;
  s.running = static_cast<int>(scheduler_.running().size());
  s.waiting = static_cast<int>(scheduler_.waiting().size());
  s.kv_blocks_total = blocks_->total_blocks();
  s.kv_blocks_used = blocks_->used_blocks();
  s.kv_blocks_free = blocks_->free_blocks();
  s.kv_usage = blocks_->usage();
  s.block_size = blocks_->block_size();
  s.preemptions = scheduler_.preemptions();
  s.kv_blocks_cached = blocks_->cached_blocks();
  return s;
}

// ---- scheduler thread -----------------------------------------------------------------

void ServingEngine::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  Outbox out;
  while (!stop_) {
    poked_ = false;
    ReapCancelledAndExpired(out);
    StepOutcome outcome = StepOutcome::kNothingToRun;
    if (!scheduler_.empty() && runner_->ready()) outcome = RunOneStep(lock, out);
    const bool ran = outcome != StepOutcome::kNothingToRun;
    // When another step follows at once, its RunOneStep delivers these events while the
    // workers compute it; otherwise they go now.
    const bool step_follows =
        outcome == StepOutcome::kRanStep && !stop_ && !scheduler_.empty() && runner_->ready();
    if (!step_follows) previous_step_end_.reset();  // no gap to measure to the next step
    if (!out.events.empty() && !step_follows) {
      lock.unlock();
      Deliver(out);
      lock.lock();
    }
    if (ran || stop_ || poked_) continue;
    // Nothing to run now: sleep until a request arrives or is cancelled, the next deadline,
    // or (with work waiting on the workers or on blocks) the next poll.
    std::optional<Clock::time_point> until = NextDeadline();
    if (!scheduler_.empty()) {
      const Clock::time_point poll = Clock::now() + kIdlePoll;
      if (!until.has_value() || *until > poll) until = poll;
    }
    auto woken = [this] { return stop_ || poked_; };
    if (until.has_value()) {
      wake_.wait_until(lock, *until, woken);
    } else {
      wake_.wait(lock, woken);
    }
  }
  FailAll(absl::UnavailableError("the serving engine shut down"), "internal", out);
  lock.unlock();
  Deliver(out);
}

std::optional<Clock::time_point> ServingEngine::NextDeadline() const {
  std::optional<Clock::time_point> next;
  auto look = [&](const auto& list) {
    for (const auto& s : list) {
      if (s->deadline.has_value() && (!next.has_value() || *s->deadline < *next)) {
        next = s->deadline;
      }
    }
  };
  look(scheduler_.running());
  look(scheduler_.waiting());
  return next;
}

void ServingEngine::ReapCancelledAndExpired(Outbox& out) {
  const Clock::time_point now = Clock::now();
  std::vector<Sequence*> cancelled, expired;
  auto look = [&](const auto& list) {
    for (const auto& s : list) {
      if (s->cancel->cancelled.load()) {
        cancelled.push_back(s.get());
      } else if (s->deadline.has_value() && now >= *s->deadline) {
        expired.push_back(s.get());
      }
    }
  };
  look(scheduler_.running());
  look(scheduler_.waiting());
  for (Sequence* s : cancelled) {
    GenerateEvent e;
    e.finish_reason = "abort";
    e.status = absl::CancelledError(
        absl::StrCat("request ", s->request.request_id, " was cancelled by the client"));
    Finish(s, std::move(e), "", out);
  }
  for (Sequence* s : expired) {
    GenerateEvent e;
    e.finish_reason = "abort";
    e.status = absl::DeadlineExceededError(
        absl::StrCat("request ", s->request.request_id, " exceeded its deadline after ",
                     Seconds(now - s->arrival), " s (", s->generated(), " tokens generated)"));
    Finish(s, std::move(e), "deadline_exceeded", out);
  }
}

ServingEngine::StepOutcome ServingEngine::RunOneStep(std::unique_lock<std::mutex>& lock,
                                                     Outbox& out) {
  if (runner_->cache_epoch() != cache_epoch_ && !scheduler_.running().empty()) {
    // The workers restarted between steps: the running sequences' keys and values are gone.
    std::vector<Sequence*> lost;
    for (const auto& s : scheduler_.running()) lost.push_back(s.get());
    FailEach(
        lost,
        absl::UnavailableError("the workers restarted and lost the running requests' KV cache"),
        "worker_error", out);
  }
  EnsureCache();
  const int64_t preemptions_before = scheduler_.preemptions();
  StepPlan plan = scheduler_.Schedule();
  for (int64_t i = preemptions_before; i < scheduler_.preemptions(); ++i) {
    if (observer_ != nullptr) observer_->OnPreemption();
  }
  if (plan.prefix_queried_tokens > 0) {
    counters_.prefix_cache_queries += plan.prefix_queried_tokens;
    counters_.prefix_cache_hits += plan.prefix_hit_tokens;
    if (observer_ != nullptr) {
      observer_->OnPrefixCache(plan.prefix_queried_tokens, plan.prefix_hit_tokens);
    }
  }
  if (plan.chunks.empty()) {
    Sequence* lost = plan.cannot_fit;
    if (lost == nullptr && scheduler_.HeadCannotFit()) lost = scheduler_.waiting().front().get();
    if (lost == nullptr) return StepOutcome::kNothingToRun;
    // Only when the workers came back with a smaller cache than the request was admitted
    // for (Submit keeps prompt + max_tokens within the cache).
    GenerateEvent e;
    e.finish_reason = "abort";
    e.status = absl::ResourceExhaustedError(
        absl::StrCat("request ", lost->request.request_id, " needs more than the KV cache's ",
                     blocks_->total_blocks(), " blocks of ", blocks_->block_size(), " tokens"));
    Finish(lost, std::move(e), "internal", out);
    return StepOutcome::kHandledWithoutStep;
  }

  v1::StepRequest step;
  step.set_step_id(next_step_id_++);
  for (uint64_t id : to_release_) step.add_release_seq_ids(id);
  to_release_.clear();
  const Clock::time_point now = Clock::now();
  for (const ScheduledChunk& c : plan.chunks) {
    if (!c.seq->first_scheduled.has_value()) c.seq->first_scheduled = now;
    AddToStep(c, step);
  }

  lock.unlock();
  // The previous step's text and events: before this step (then part of the gap between
  // steps, not of the step's duration), or while the workers compute it.
  if (!options_.overlap_delivery) Deliver(out);
  const Clock::time_point t0 = Clock::now();
  if (observer_ != nullptr && previous_step_end_.has_value()) {
    observer_->OnStepGap(Seconds(t0 - *previous_step_end_));
  }
  const absl::Status started = runner_->StartStep(step);
  Deliver(out);
  absl::StatusOr<v1::StepResult> result = started.ok() ? runner_->FinishStep() : started;
  previous_step_end_ = Clock::now();
  const double seconds = Seconds(*previous_step_end_ - t0);
  lock.lock();

  ++counters_.steps;
  if (observer_ != nullptr) {
    const char* phase = plan.decode_tokens == 0    ? "prefill"
                        : plan.prefill_tokens == 0 ? "decode"
                                                   : "mixed";
    observer_->OnStep(phase, seconds, static_cast<int>(plan.prefill_tokens + plan.decode_tokens));
  }
  if (!result.ok()) {
    if (absl::IsUnavailable(result.status())) {
      FailAll(result.status(), "worker_error", out);
    } else {
      FailChunks(plan,
                 absl::InternalError(absl::StrCat("step ", step.step_id(),
                                                  " failed: ", result.status().ToString())),
                 out);
    }
    return StepOutcome::kRanStep;
  }
  bool matches = result->seqs_size() == static_cast<int>(plan.chunks.size());
  for (int i = 0; matches && i < result->seqs_size(); ++i) {
    matches = result->seqs(i).seq_id() == plan.chunks[i].seq->seq_id;
  }
  if (!matches) {
    FailChunks(
        plan,
        absl::InternalError(absl::StrCat(
            "step ", step.step_id(), ": the workers returned ", result->seqs_size(),
            " sequence results that do not match the ", plan.chunks.size(), " sequences sent")),
        out);
    return StepOutcome::kRanStep;
  }
  ApplyResult(plan, *result, out);
  if (options_.check_block_invariants) CheckBlocks(out);
  return StepOutcome::kRanStep;
}

void ServingEngine::CheckBlocks(Outbox& out) {
  absl::Status s = scheduler_.CheckBlocks();
  if (s.ok()) return;
  if (counters_.block_check_failure.empty()) {
    counters_.block_check_failure = std::string(s.message());
  }
  FailAll(absl::InternalError(s.message()), "internal", out);
}

void ServingEngine::AddToStep(const ScheduledChunk& c, v1::StepRequest& step) {
  Sequence& s = *c.seq;
  v1::StepSequence* q = step.add_seqs();
  q->set_seq_id(s.seq_id);
  q->mutable_tokens()->Assign(s.tokens.begin() + c.start, s.tokens.begin() + c.start + c.n_tokens);
  if (!c.drafts.empty()) {
    q->mutable_tokens()->Add(c.drafts.begin(), c.drafts.end());
    q->set_num_drafts(static_cast<int32_t>(c.drafts.size()));
  }
  q->set_start_pos(c.start);
  // One prompt token alone in its chunk is still computed as a prompt's rows are.
  q->set_prefill(c.n_tokens == 1 && c.drafts.empty() && c.start < s.prompt_len);
  q->mutable_block_table()->Assign(s.block_table.begin(), s.block_table.end());
  q->set_sample(c.sample);
  if (s.speculate && options_.speculative == "mtp") {
    q->set_mtp(true);
    if (c.sample) q->set_mtp_draft_tokens(options_.num_speculative_tokens);
  }
  if (s.sampler_created) return;
  q->set_request_id(s.request.request_id);
  // The first step of the sequence creates its sampler on rank 0; after a preemption the
  // same sampler goes on (its random draws and penalty history intact).
  s.sampler_created = true;
  q->set_new_sampler(true);
  const GenerateRequest& r = s.request;
  v1::StepSampling* p = q->mutable_sampling();
  p->set_temperature(r.sampling.temperature);
  p->set_top_k(r.sampling.top_k);
  p->set_top_p(r.sampling.top_p);
  p->set_min_p(r.sampling.min_p);
  p->set_repetition_penalty(r.sampling.repetition_penalty);
  p->set_presence_penalty(r.sampling.presence_penalty);
  p->set_frequency_penalty(r.sampling.frequency_penalty);
  if (r.sampling.seed.has_value()) p->set_seed(*r.sampling.seed);
  p->set_top_logprobs(r.top_logprobs);
  if (!r.grammar.empty()) {
    // The worker's matcher allows the stop tokens only where the grammar can end.
    p->set_grammar(r.grammar);
    if (!r.ignore_eos) p->mutable_stop_token_ids()->Add(eog_ids_.begin(), eog_ids_.end());
    for (int32_t id : r.stop_token_ids) p->add_stop_token_ids(id);
  }
  // Only the repetition penalty looks at the prompt.
  if (r.sampling.repetition_penalty != 1.0f) {
    q->mutable_penalty_prompt()->Assign(r.prompt_tokens.begin(), r.prompt_tokens.end());
  }
}

void ServingEngine::ApplyResult(const StepPlan& plan, const v1::StepResult& result, Outbox& out) {
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    c.seq->num_computed += c.n_tokens;
    // A cancelled request's token is dropped (its blocks may already be released); the
    // next loop finishes it.
    if (c.seq->cancel->cancelled.load()) continue;
    const v1::SequenceResult& r = result.seqs(static_cast<int>(i));
    if (!c.drafts.empty()) {
      // The drafts kept are tokens of the sequence now, their KV entries computed; the
      // others' entries lie beyond num_computed and are overwritten by the next steps.
      const int kept = std::min<int>(r.accepted_drafts_size(), static_cast<int>(c.drafts.size()));
      ++counters_.spec_drafts;
      counters_.spec_draft_tokens += static_cast<int64_t>(c.drafts.size());
      counters_.spec_accepted_tokens += kept;
      if (counters_.spec_accepted_per_position.size() < c.drafts.size()) {
        counters_.spec_accepted_per_position.resize(c.drafts.size(), 0);
      }
      for (int k = 0; k < kept; ++k) ++counters_.spec_accepted_per_position[k];
      if (observer_ != nullptr) observer_->OnSpeculation(static_cast<int>(c.drafts.size()), kept);
      ++c.seq->spec_drafts;
      c.seq->spec_draft_tokens += static_cast<int32_t>(c.drafts.size());
      c.seq->spec_accepted_tokens += kept;
      bool live = true;
      for (int k = 0; k < kept && live; ++k) {
        live = ApplyToken(c.seq, r.accepted_drafts(k), out);
        if (live) ++c.seq->num_computed;
      }
      if (!live) continue;
    }
    scheduler_.CacheComputed(c.seq);
    if (!c.sample) continue;
    c.seq->mtp_drafts.assign(r.mtp_drafts().begin(), r.mtp_drafts().end());
    ApplyToken(c.seq, r, out);
  }
}

bool ServingEngine::IsStopToken(const Sequence& s, int32_t token) const {
  if (!s.request.ignore_eos && token >= 0 && static_cast<size_t>(token) < eog_.size() &&
      eog_[token]) {
    return true;
  }
  const std::vector<int32_t>& ids = s.request.stop_token_ids;
  return std::find(ids.begin(), ids.end(), token) != ids.end();
}

bool ServingEngine::ApplyToken(Sequence* s, const v1::SequenceResult& r, Outbox& out) {
  const int32_t token = r.token();
  if (token < 0 || static_cast<size_t>(token) >= eog_.size()) {
    GenerateEvent e;
    e.finish_reason = "abort";
    e.status =
        absl::InternalError(absl::StrCat("the workers sampled token ", token, " for request ",
                                         s->request.request_id, ", outside the vocabulary"));
    Finish(s, std::move(e), "internal", out);
    return false;
  }
  const Clock::time_point now = Clock::now();
  if (!s->first_token.has_value()) {
    s->first_token = now;
    if (observer_ != nullptr) observer_->OnFirstToken(Seconds(now - s->arrival));
  } else if (observer_ != nullptr) {
    observer_->OnToken(Seconds(now - *s->last_token));
  }
  s->last_token = now;
  s->tokens.push_back(token);

  GenerateEvent e;
  e.token_ids.push_back(token);
  if (s->request.logprobs || s->request.top_logprobs > 0) {
    TokenLogprobs lp;
    lp.token = token;
    lp.logprob = r.logprob();
    for (const v1::StepTokenLogprob& t : r.top_logprobs())
      lp.top.emplace_back(t.token(), t.logprob());
    e.logprobs.push_back(std::move(lp));
  }
  // A stop token's own text is not part of the answer (vLLM, OpenAI).
  const bool stop_token = IsStopToken(*s, token);
  // Without stop strings the text decides nothing: it is detokenized when the event is
  // delivered, while the workers run the next step (Deliver).
  const bool text_later = !s->text->can_stop();
  std::string reason;
  if (stop_token) {
    reason = "stop";
  } else if (!text_later && s->text->Append(token, &e.text)) {
    reason = "stop";
  } else if (r.grammar_end()) {
    reason = "stop";  // the output completed its grammar: nothing may follow
  } else if (s->generated() >= s->max_tokens ||
             static_cast<int64_t>(s->tokens.size()) >= EffectiveMaxModelLen()) {
    reason = "length";
  }
  if (text_later) {
    // Finish (below) or the push adds this event next.
    out.texts.push_back(
        {out.events.size(), s->text.get(), stop_token ? -1 : token, !reason.empty()});
  }
  if (reason.empty()) {
    out.events.push_back({&s->sink, std::move(e)});
    return true;
  }
  if (!text_later) s->text->Finish(&e.text);
  e.finish_reason = reason;
  Finish(s, std::move(e), "", out);
  return false;
}

void ServingEngine::Finish(Sequence* s, GenerateEvent e, const std::string& failure_reason,
                           Outbox& out) {
  const Clock::time_point now = Clock::now();
  e.finished = true;
  e.usage.prompt_tokens = s->prompt_len;
  e.usage.completion_tokens = s->generated();
  e.usage.cached_tokens = std::max(s->cached_tokens, 0);
  if (!e.status.ok()) {
    (absl::IsCancelled(e.status) ? counters_.cancelled : counters_.failed) += 1;
  } else if (e.finish_reason == "length") {
    ++counters_.finished_length;
  } else {
    ++counters_.finished_stop;
  }
  if (observer_ != nullptr) {
    RequestTimings t;
    t.e2e = Seconds(now - s->arrival);
    t.queue = Seconds(s->first_scheduled.value_or(now) - s->arrival);
    if (s->first_token.has_value()) {
      t.has_first_token = true;
      t.ttft = Seconds(*s->first_token - s->arrival);
      t.prefill = Seconds(*s->first_token - s->first_scheduled.value_or(*s->first_token));
      t.decode = Seconds(now - *s->first_token);
    }
    t.prompt_tokens = s->prompt_len;
    t.generation_tokens = s->generated();
    t.request_id = s->request.request_id;
    if (s->speculate) {
      t.spec_drafts = s->spec_drafts;
      t.spec_draft_tokens = s->spec_draft_tokens;
      t.spec_accepted_tokens = s->spec_accepted_tokens;
    }
    if (!e.status.ok()) t.error = std::string(e.status.message());
    observer_->OnRequestFinished(t, e.finish_reason, failure_reason);
  }
  if (s->sampler_created) to_release_.push_back(s->seq_id);
  std::unique_ptr<Sequence> owned = scheduler_.Remove(s);
  out.events.push_back({&owned->sink, std::move(e)});
  out.finished.push_back(std::move(owned));
}

void ServingEngine::FailAll(const absl::Status& status, const std::string& failure_reason,
                            Outbox& out) {
  std::vector<Sequence*> all;
  for (const auto& s : scheduler_.running()) all.push_back(s.get());
  for (const auto& s : scheduler_.waiting()) all.push_back(s.get());
  FailEach(all, status, failure_reason, out);
  // A worker failure may have lost the workers' caches; an internal error leaves the
  // cached blocks' contents in doubt.
  blocks_->ResetPrefixCache();
}

void ServingEngine::FailChunks(const StepPlan& plan, const absl::Status& status, Outbox& out) {
  std::vector<Sequence*> seqs;
  for (const ScheduledChunk& c : plan.chunks) seqs.push_back(c.seq);
  FailEach(seqs, status, "internal", out);
}

void ServingEngine::FailEach(const std::vector<Sequence*>& seqs, const absl::Status& status,
                             const std::string& failure_reason, Outbox& out) {
  for (Sequence* s : seqs) {
    GenerateEvent e;
    e.finish_reason = "abort";
    e.status = status;
    Finish(s, std::move(e), failure_reason, out);
  }
}

void ServingEngine::Deliver(Outbox& out) {
  for (const PendingText& p : out.texts) {
    std::string* text = &out.events[p.event].event.text;
    if (p.token >= 0) p.text->Append(p.token, text);
    if (p.finish) p.text->Finish(text);
  }
  out.texts.clear();
  for (Delivery& d : out.events) (*d.sink)(std::move(d.event));
  out.events.clear();
  out.finished.clear();
}

}  // namespace tessera::serving
