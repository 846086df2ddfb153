// One rank's side of a step: runs a StepRequest of the control protocol on this rank's
// executor and, on rank 0, samples with per-sequence samplers that live until the
// controller releases the sequence. Used by tessera-worker, and in-process by tools and
// tests (TP = 1 without a communicator).
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "absl/status/statusor.h"
#include "tessera/v1/worker.pb.h"
#include "worker/executor/executor.h"
#include "worker/sampling/sampling.h"

namespace tessera::worker {

class StepEngine {
 public:
  // `executor` runs this rank's shard; `rank` 0 samples and fills the result's sequences.
  StepEngine(std::unique_ptr<executor::Executor> executor, int rank);

  // Runs the step. Rank 0's result lists the sequences in request order with the sampled
  // token (when asked), its log-probabilities and the requested logits; other ranks return
  // an empty list. INVALID_ARGUMENT for a malformed step (bad sampling parameters, tokens
  // outside the vocabulary, positions beyond the block table); nothing is written then.
  absl::StatusOr<tessera::v1::StepResult> Run(const tessera::v1::StepRequest& step);

  executor::Executor& executor() { return *executor_; }
  int rank() const { return rank_; }
  size_t live_samplers() const { return samplers_.size(); }

 private:
  std::unique_ptr<executor::Executor> executor_;
  int rank_;
  std::map<uint64_t, sampling::Sampler> samplers_;
};

// The protocol's sampling parameters as the sampler takes them.
sampling::SamplingParams FromProto(const tessera::v1::StepSampling& p);

}  // namespace tessera::worker
