// Where the offline commands (generate, eval-logits) run their steps: in this process (one
// executor, the default) or, with --tp N, through a worker group of N tessera-worker
// processes exactly as tesserad runs them; on CPU cores (the default) or, with --device
// cuda[:N], on GPUs (rank r of --tp T on GPU N + r, NCCL between them).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/shard_plan.h"
#include "controller/serving/engine.h"
#include "controller/serving/step_runner.h"
#include "tools/commands.h"
#include "worker/executor/executor.h"

namespace tessera::cli {

struct BackendOptions {
  int tp = 0;  // 0: in this process; N >= 1: N worker processes (Gloo between them)
  std::string worker_binary;
  int gpu = -1;          // --device: -1 CPU, else the (first) CUDA device
  bool verbose = false;  // --verbose: print the kernels chosen (workers log theirs anyway)
  // --expert-parallel / --no-expert-parallel with --tp (model::PlanOptions::experts).
  model::ExpertParallel expert_parallel = model::ExpertParallel::kAuto;
};

// Parses --tp N, --worker-binary PATH, --device cpu|cuda|cuda:N, --expert-parallel,
// --no-expert-parallel and --verbose at args[i] (see ParseExecutorFlag).
int ParseBackendFlag(const Args& args, size_t i, BackendOptions& o, const char* command);

// Opens the model with `exec` (its kv_tokens sizes the cache) on the chosen backend. With
// backend.verbose, an in-process CPU executor prints its kernel choices to stderr; `verbose`
// prints the worker processes' log lines.
// FailedPrecondition for a GPU in a build without the CUDA backend.
absl::StatusOr<std::unique_ptr<serving::StepRunner>> OpenStepRunner(
    const std::string& model, const executor::ExecutorOptions& exec, const BackendOptions& backend,
    bool verbose);

// A request's sampling parameters as the step protocol carries them, with the tokens that
// end generation (the worker's sampler reports them as end_of_generation). Log-probabilities
// are the model's own (raw), as the daemon reports them.
tessera::v1::StepSampling ToStepSampling(const serving::Sampling& sampling,
                                         const std::vector<int32_t>& stop_token_ids);

}  // namespace tessera::cli
