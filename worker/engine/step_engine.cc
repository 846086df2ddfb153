#include "worker/engine/step_engine.h"

#include <algorithm>
#include <future>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/util/status_macros.h"

namespace tessera::worker {

namespace v1 = tessera::v1;

sampling::SamplingParams FromProto(const v1::StepSampling& p) {
  sampling::SamplingParams s;
  s.temperature = p.temperature();
  s.top_k = p.top_k();
  // proto3 zero means "not given" for the fields whose neutral value is not zero.
  s.top_p = p.top_p() == 0.0f ? 1.0f : p.top_p();
  s.min_p = p.min_p();
  s.repetition_penalty = p.repetition_penalty() == 0.0f ? 1.0f : p.repetition_penalty();
  s.presence_penalty = p.presence_penalty();
  s.frequency_penalty = p.frequency_penalty();
  if (p.has_seed()) s.seed = p.seed();
  s.top_logprobs = p.top_logprobs();
  s.logprobs_mode =
      p.logprobs_processed() ? sampling::LogprobsMode::kProcessed : sampling::LogprobsMode::kRaw;
  s.stop_token_ids.assign(p.stop_token_ids().begin(), p.stop_token_ids().end());
  return s;
}

StepEngine::StepEngine(std::unique_ptr<executor::Executor> executor, int rank)
    : executor_(std::move(executor)),
      rank_(rank),
      // Only rank 0 compiles grammars: the trie is started there, or now when nothing did.
      grammars_([this] {
        StartVocabularyTrie();
        return vocab_trie_.get();
      }) {}

void StepEngine::StartVocabularyTrie() {
  if (vocab_trie_.valid()) return;
  vocab_trie_ = std::async(std::launch::async, [this] {
                  return VocabularyTrie(executor_->file().metadata());
                }).share();
}

void StepEngine::PrepareStructuredOutput() {
  if (rank_ == 0) StartVocabularyTrie();
}

sampling::SampleResult StepEngine::SampleOne(SequenceState& st, absl::Span<const float> logits,
                                             bool* grammar_end) {
  *grammar_end = false;
  if (st.matcher == nullptr) return st.sampler.Sample(logits);
  grammar::Matcher& m = *st.matcher;
  const size_t logit_words = (logits.size() + 63) / 64;
  st.mask.assign(std::max(logit_words, m.compiled().vocab().mask_words()), 0);
  m.FillMask(absl::MakeSpan(st.mask));
  // Ids the head does not have (a tokenizer larger than the head) cannot be sampled.
  st.mask.resize(logit_words);
  if (logits.size() % 64 != 0) st.mask.back() &= (uint64_t{1} << (logits.size() % 64)) - 1;
  const std::vector<int32_t>& stops = st.sampler.params().stop_token_ids;
  bool any = false;
  for (uint64_t w : st.mask) any = any || w != 0;
  // The stop tokens are allowed where the grammar may end; also where it admits no token of
  // this vocabulary at all (a grammar asking for bytes no token spells), so the sequence
  // ends instead of sampling outside it.
  if (m.CanEnd() || !any) {
    for (int32_t id : stops) {
      if (id >= 0 && static_cast<size_t>(id) < logits.size()) {
        st.mask[id / 64] |= uint64_t{1} << (id % 64);
        any = true;
      }
    }
  }
  if (!any) {
    // Nothing can follow and no stop token exists (ignore_eos): end with an unmasked token.
    *grammar_end = true;
    return st.sampler.Sample(logits);
  }
  sampling::SampleResult r = st.sampler.Sample(logits, st.mask);
  if (!r.end_of_generation) {
    // The mask allowed it, so the matcher accepts it (a stop id that is an ordinary token
    // allowed by the grammar is accepted as well; it ended the sequence anyway).
    m.AcceptToken(static_cast<uint32_t>(r.token));
    *grammar_end = m.MustEnd();
  }
  return r;
}

absl::StatusOr<v1::StepResult> StepEngine::Run(const v1::StepRequest& step) {
  for (uint64_t id : step.release_seq_ids()) {
    sequences_.erase(id);
    mtp_.erase(id);
  }

  v1::StepResult result;
  result.set_step_id(step.step_id());
  // New samplers are made before the step runs, so that bad parameters leave the cache
  // untouched; they are kept only when the step succeeds.
  std::map<uint64_t, SequenceState> fresh;
  if (rank_ == 0) {
    for (const v1::StepSequence& s : step.seqs()) {
      if (!s.new_sampler()) {
        if (s.sample() && !sequences_.contains(s.seq_id())) {
          return absl::InvalidArgumentError(absl::StrCat(
              "step ", step.step_id(), ": sequence ", s.seq_id(),
              " asks for a token but has no sampler (its first step must carry new_sampler)"));
        }
        continue;
      }
      absl::StatusOr<sampling::Sampler> sampler =
          sampling::Sampler::Create(FromProto(s.sampling()));
      if (!sampler.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequence ", s.seq_id(), ": ", sampler.status().message()));
      }
      sampler->AddPromptTokens(
          std::vector<int32_t>(s.penalty_prompt().begin(), s.penalty_prompt().end()));
      std::unique_ptr<grammar::Matcher> matcher;
      if (!s.sampling().grammar().empty()) {
        absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> g =
            grammars_.Get(s.sampling().grammar());
        if (!g.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("sequence ", s.seq_id(), ": grammar: ", g.status().message()));
        }
        matcher = std::make_unique<grammar::Matcher>(*std::move(g));
      }
      fresh.insert_or_assign(s.seq_id(),
                             SequenceState{std::move(*sampler), std::move(matcher), {}});
    }
  }

  // A step without sequences only releases samplers (and measures the control plane).
  if (step.seqs_size() == 0) return result;
  std::vector<executor::SequenceInput> inputs(step.seqs_size());
  bool any_mtp = false;
  for (int i = 0; i < step.seqs_size(); ++i) {
    const v1::StepSequence& s = step.seqs(i);
    inputs[i].tokens.assign(s.tokens().begin(), s.tokens().end());
    inputs[i].start_pos = s.start_pos();
    inputs[i].block_table.assign(s.block_table().begin(), s.block_table().end());
    // Drafts are verified on the rows of the tokens before them (and the last one's).
    inputs[i].all_logits = s.return_logits() || s.num_drafts() > 0;
    // Verified rows must get the logits one-token steps would: the same kernels per row.
    inputs[i].rows_as_decodes = s.num_drafts() > 0;
    inputs[i].prefill = s.prefill();
    // MTP sequences: every row's hidden state, for the MTP block's rows.
    inputs[i].all_hidden = s.mtp();
    any_mtp = any_mtp || s.mtp();
    if (s.num_drafts() < 0 || s.num_drafts() >= s.tokens_size() ||
        (s.num_drafts() > 0 && (!s.sample() || s.return_logits()))) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", step.step_id(), ": sequence ", s.seq_id(), " has ", s.num_drafts(),
                       " drafts among ", s.tokens_size(),
                       " tokens (drafts need sample, no return_logits, and a token before them)"));
    }
  }
  if (any_mtp && !executor_->has_mtp()) {
    return absl::FailedPreconditionError(
        absl::StrCat("step ", step.step_id(),
                     ": a sequence asks for MTP drafts but this worker did not load "
                     "the model's MTP block (WorkerSetup.load_mtp)"));
  }
  // Rank 0 on a GPU: a sequence whose next token needs no more than the device sampler's
  // chain (no penalties, grammar, alternatives, drafts, MTP or returned logits) is sampled
  // where its logits are; only its token and log-probability come back.
  std::vector<executor::SampledToken> device_sampled;
  bool any_device = false;
  if (rank_ == 0 && executor_->samples_on_device()) {
    for (int i = 0; i < step.seqs_size(); ++i) {
      const v1::StepSequence& s = step.seqs(i);
      if (!s.sample() || s.num_drafts() > 0 || s.return_logits() || s.mtp()) continue;
      auto fresh_it = fresh.find(s.seq_id());
      SequenceState& st = fresh_it != fresh.end() ? fresh_it->second : sequences_.at(s.seq_id());
      if (st.matcher != nullptr) continue;
      const std::optional<sampling::DeviceDraw> d = st.sampler.NextDeviceDraw();
      if (!d.has_value()) continue;
      inputs[i].device_sample = executor::DeviceSampling{.temperature = d->temperature,
                                                         .top_k = d->top_k,
                                                         .top_p = d->top_p,
                                                         .min_p = d->min_p,
                                                         .uniform = d->uniform};
      any_device = true;
    }
  }
  std::vector<std::vector<float>> hidden;
  absl::StatusOr<std::vector<std::vector<float>>> logits = executor_->Step(
      inputs, nullptr, any_mtp ? &hidden : nullptr, any_device ? &device_sampled : nullptr);
  if (!logits.ok()) return logits.status();
  // Per sequence: drafts kept and the token after them (rank 0 decides; MTP needs them on
  // every rank).
  std::vector<int32_t> outcome(2 * step.seqs_size(), 0);
  if (rank_ != 0) {
    if (any_mtp) TESSERA_RETURN_IF_ERROR(RunMtp(step, hidden, outcome, nullptr));
    return result;
  }

  for (auto& [id, state] : fresh) sequences_.insert_or_assign(id, std::move(state));
  const int64_t n_vocab = executor_->hparams().n_vocab;
  // Each sequence has its own sampler and matcher (its own random stream and scratch), so
  // the sequences are sampled in parallel with the same results as one after the other.
  std::vector<sampling::SampleResult> sampled(step.seqs_size());
  std::vector<char> grammar_end(step.seqs_size(), 0);
  // Per sequence with drafts: the results of the drafts kept.
  std::vector<std::vector<std::pair<sampling::SampleResult, bool>>> kept(step.seqs_size());
  executor_->thread_pool().ParallelFor(step.seqs_size(), [&](int64_t i, int) {
    const v1::StepSequence& s = step.seqs(static_cast<int>(i));
    if (!s.sample()) return;
    const std::vector<float>& rows = (*logits)[i];
    SequenceState& state = sequences_.at(s.seq_id());
    if (any_device && device_sampled[i].token >= 0) {
      sampled[i] =
          state.sampler.AcceptDeviceSample(device_sampled[i].token, device_sampled[i].logprob);
      return;
    }
    // Row r predicts the token after tokens[first + r]; the drafts are tokens[first + 1..].
    const int drafts = s.num_drafts();
    const int first = s.tokens_size() - 1 - drafts;
    const int64_t n_rows = static_cast<int64_t>(rows.size()) / n_vocab;
    for (int r = 0;; ++r) {
      const int64_t row = n_rows - 1 - drafts + r;
      absl::Span<const float> logits_row(rows.data() + row * n_vocab, n_vocab);
      bool end = false;
      sampling::SampleResult result = SampleOne(state, logits_row, &end);
      const bool keep = r < drafts && !end && !result.end_of_generation &&
                        result.token == s.tokens(first + 1 + r);
      if (!keep) {
        sampled[i] = std::move(result);
        grammar_end[i] = end;
        break;
      }
      kept[i].emplace_back(std::move(result), end);
    }
  });
  for (const executor::SampledToken& t : device_sampled) device_samples_ += t.token >= 0 ? 1 : 0;
  for (int i = 0; i < step.seqs_size(); ++i) {
    const v1::StepSequence& s = step.seqs(i);
    const std::vector<float>& rows = (*logits)[i];
    v1::SequenceResult* out = result.add_seqs();
    out->set_seq_id(s.seq_id());
    out->set_token(-1);
    if (s.return_logits()) {
      out->mutable_logits()->Assign(rows.begin(), rows.end());
      out->set_logits_rows(static_cast<int32_t>(rows.size() / n_vocab));
    }
    if (!s.sample()) continue;
    auto fill = [](v1::SequenceResult* o, const sampling::SampleResult& r, bool end) {
      o->set_token(r.token);
      o->set_logprob(r.logprob);
      o->set_end_of_generation(r.end_of_generation);
      o->set_grammar_end(end);
      for (const sampling::TokenLogprob& t : r.top_logprobs) {
        v1::StepTokenLogprob* tl = o->add_top_logprobs();
        tl->set_token(t.token);
        tl->set_logprob(t.logprob);
      }
    };
    for (const auto& [r, end] : kept[i]) {
      v1::SequenceResult* d = out->add_accepted_drafts();
      d->set_seq_id(s.seq_id());
      fill(d, r, end);
    }
    fill(out, sampled[i], grammar_end[i] != 0);
    outcome[2 * i] = static_cast<int32_t>(kept[i].size());
    outcome[2 * i + 1] = sampled[i].token;
  }
  if (any_mtp) TESSERA_RETURN_IF_ERROR(RunMtp(step, hidden, outcome, &result));
  return result;
}

absl::Status StepEngine::RunMtp(const v1::StepRequest& step,
                                const std::vector<std::vector<float>>& hidden,
                                std::vector<int32_t>& outcome, v1::StepResult* result) {
  TESSERA_RETURN_IF_ERROR(
      executor_->BroadcastFromRank0(outcome.data(), outcome.size() * sizeof(int32_t)));
  const int64_t d = executor_->hparams().n_embd, V = executor_->hparams().n_vocab;
  // The MTP rows of this step: each known position with the token after it.
  std::vector<executor::SequenceInput> rows;
  std::vector<int> seq_index;
  for (int i = 0; i < step.seqs_size(); ++i) {
    const v1::StepSequence& s = step.seqs(i);
    if (!s.mtp()) continue;
    MtpState& st = mtp_[s.seq_id()];
    if (s.start_pos() == 0) st = MtpState{};
    const int n = s.tokens_size();
    const int first = n - 1 - s.num_drafts();  // the last token that is not a draft
    // The last row whose state is valid: after the kept drafts when sampled.
    const int last = s.sample() ? first + outcome[2 * i] : n - 1;
    executor::SequenceInput m;
    m.block_table.assign(s.block_table().begin(), s.block_table().end());
    m.start_pos = s.start_pos();
    if (st.pending_pos >= 0 && st.pending_pos == s.start_pos() - 1) {
      m.start_pos = st.pending_pos;
      m.tokens.push_back(s.tokens(0));
      m.mtp_hidden = st.pending_hidden;
    }
    st.pending_pos = -1;
    for (int r = 0; r <= last; ++r) {
      const float* h = hidden[i].data() + static_cast<int64_t>(r) * d;
      if (r == last && !s.sample()) {
        // A prompt chunk's last position waits for the next chunk's first token.
        st.pending_pos = s.start_pos() + r;
        st.pending_hidden.assign(h, h + d);
        break;
      }
      m.tokens.push_back(r < last ? s.tokens(r + 1) : outcome[2 * i + 1]);
      m.mtp_hidden.insert(m.mtp_hidden.end(), h, h + d);
    }
    if (m.tokens.empty()) continue;
    rows.push_back(std::move(m));
    seq_index.push_back(i);
  }
  if (rows.empty()) return absl::OkStatus();
  // Greedy drafts: the MTP head's argmax after the last row, then fed back (its token and its
  // own normalized state, one position on) while the sequence wants more and its blocks hold
  // the position. Every rank computes the same argmax from the same gathered logits.
  std::vector<std::vector<int32_t>> drafts(rows.size());
  std::vector<size_t> owner(rows.size());  // each row's entry of drafts
  std::iota(owner.begin(), owner.end(), 0);
  const int64_t slots = executor_->block_size();
  for (;;) {
    std::vector<std::vector<float>> h;
    absl::StatusOr<std::vector<std::vector<float>>> l = executor_->MtpStep(rows, &h);
    if (!l.ok()) return l.status();
    std::vector<executor::SequenceInput> next;
    std::vector<size_t> next_owner;
    for (size_t j = 0; j < rows.size(); ++j) {
      const size_t o = owner[j];
      const v1::StepSequence& s = step.seqs(seq_index[o]);
      if (!s.sample() || static_cast<int>(drafts[o].size()) >= s.mtp_draft_tokens()) continue;
      const float* row = (*l)[j].data() + (*l)[j].size() - V;
      const int32_t token = static_cast<int32_t>(std::max_element(row, row + V) - row);
      drafts[o].push_back(token);
      const int64_t pos = rows[j].start_pos + static_cast<int64_t>(rows[j].tokens.size());
      if (static_cast<int>(drafts[o].size()) >= s.mtp_draft_tokens() ||
          pos >= static_cast<int64_t>(rows[j].block_table.size()) * slots) {
        continue;
      }
      executor::SequenceInput f;
      f.tokens = {token};
      f.start_pos = pos;
      f.block_table = rows[j].block_table;
      f.mtp_hidden = h[j];
      next.push_back(std::move(f));
      next_owner.push_back(o);
    }
    if (next.empty()) break;
    rows = std::move(next);
    owner = std::move(next_owner);
  }
  if (result != nullptr) {
    for (size_t j = 0; j < drafts.size(); ++j) {
      result->mutable_seqs(seq_index[j])
          ->mutable_mtp_drafts()
          ->Assign(drafts[j].begin(), drafts[j].end());
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker
