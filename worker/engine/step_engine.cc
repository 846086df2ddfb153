#include "worker/engine/step_engine.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

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
    : executor_(std::move(executor)), rank_(rank) {}

absl::StatusOr<v1::StepResult> StepEngine::Run(const v1::StepRequest& step) {
  for (uint64_t id : step.release_seq_ids()) samplers_.erase(id);

  v1::StepResult result;
  result.set_step_id(step.step_id());
  // New samplers are made before the step runs, so that bad parameters leave the cache
  // untouched; they are kept only when the step succeeds.
  std::map<uint64_t, sampling::Sampler> fresh;
  if (rank_ == 0) {
    for (const v1::StepSequence& s : step.seqs()) {
      if (!s.new_sampler()) {
        if (s.sample() && !samplers_.contains(s.seq_id())) {
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
      fresh.insert_or_assign(s.seq_id(), std::move(*sampler));
    }
  }

  // A step without sequences only releases samplers (and measures the control plane).
  if (step.seqs_size() == 0) return result;
  std::vector<executor::SequenceInput> inputs(step.seqs_size());
  for (int i = 0; i < step.seqs_size(); ++i) {
    const v1::StepSequence& s = step.seqs(i);
    inputs[i].tokens.assign(s.tokens().begin(), s.tokens().end());
    inputs[i].start_pos = s.start_pos();
    inputs[i].block_table.assign(s.block_table().begin(), s.block_table().end());
    inputs[i].all_logits = s.return_logits();
  }
  absl::StatusOr<std::vector<std::vector<float>>> logits = executor_->Step(inputs);
  if (!logits.ok()) return logits.status();
  if (rank_ != 0) return result;

  for (auto& [id, sampler] : fresh) samplers_.insert_or_assign(id, std::move(sampler));
  const int64_t n_vocab = executor_->hparams().n_vocab;
  // Each sequence has its own sampler (its own random stream and scratch), so the
  // sequences are sampled in parallel with the same results as one after the other.
  std::vector<sampling::SampleResult> sampled(step.seqs_size());
  executor_->thread_pool().ParallelFor(step.seqs_size(), [&](int64_t i, int) {
    const v1::StepSequence& s = step.seqs(static_cast<int>(i));
    if (!s.sample()) return;
    const std::vector<float>& rows = (*logits)[i];
    absl::Span<const float> last(rows.data() + rows.size() - n_vocab, n_vocab);
    sampled[i] = samplers_.at(s.seq_id()).Sample(last);
  });
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
    const sampling::SampleResult& r = sampled[i];
    out->set_token(r.token);
    out->set_logprob(r.logprob);
    out->set_end_of_generation(r.end_of_generation);
    for (const sampling::TokenLogprob& t : r.top_logprobs) {
      v1::StepTokenLogprob* tl = out->add_top_logprobs();
      tl->set_token(t.token);
      tl->set_logprob(t.logprob);
    }
  }
  return result;
}

}  // namespace tessera::worker
