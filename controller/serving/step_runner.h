// What the scheduler drives: something that runs one batched step over the model's
// workers (the worker group of tesserad, or an in-process executor in tests and tools).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::serving {

class StepRunner {
 public:
  virtual ~StepRunner() = default;

  // Runs one step on every rank and returns rank 0's result (sampled tokens, log-probs,
  // requested logits), its SequenceResults in the request's order. UNAVAILABLE when the
  // workers are down or died during the step (every sequence of the step is then lost:
  // the caller fails its requests); INVALID_ARGUMENT when the step itself is malformed.
  virtual absl::StatusOr<tessera::v1::StepResult> RunStep(const tessera::v1::StepRequest& step) = 0;

  // RunStep in two halves, so that the caller works while the ranks compute: StartStep
  // hands the step to the ranks, FinishStep waits for its result (what RunStep returns).
  // One step at a time: every successful StartStep is followed by one FinishStep. A
  // StartStep error is the step's error (FinishStep is then not called). The defaults run
  // the whole step in FinishStep.
  virtual absl::Status StartStep(const tessera::v1::StepRequest& step) {
    started_ = step;
    return absl::OkStatus();
  }
  virtual absl::StatusOr<tessera::v1::StepResult> FinishStep() {
    tessera::v1::StepRequest step = *std::exchange(started_, std::nullopt);
    return RunStep(step);
  }

  // KV-cache geometry every rank agreed on when it loaded.
  virtual int block_size() const = 0;
  virtual int n_blocks() const = 0;
  // The workers are loaded and answering.
  virtual bool ready() const = 0;
  // Changes whenever the workers' KV caches lose what they held (the group restarted), so
  // that the engine forgets its cached prefixes.
  virtual uint64_t cache_epoch() const { return 0; }

 private:
  std::optional<tessera::v1::StepRequest> started_;  // the default StartStep's step
};

}  // namespace tessera::serving
