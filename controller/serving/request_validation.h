// Submit-time checks of a GenerateRequest: the limits of the deployment and the sampler's
// parameter ranges. The ranges are those of the worker's sampler
// (worker/sampling/sampling.h SamplingParams::Validate), restated here because the
// controller does not include worker code; a request that passes never fails a step.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "controller/serving/engine.h"

namespace tessera::serving {

// Largest top_logprobs the sampler lists (OpenAI's limit too).
inline constexpr int32_t kMaxTopLogprobs = 20;

struct RequestLimits {
  int64_t max_prompt_tokens = 0;  // > 0
  int64_t max_model_len = 0;      // > 0: prompt + generated tokens
  int32_t n_vocab = 0;            // > 0: token ids must be below it
  // For requests without max_tokens, clamped to the room the prompt leaves; 0: all of it.
  int32_t default_max_tokens = 0;
};

// InvalidArgument naming the parameter, its range and the value given (NaN is out of every
// range).
absl::Status ValidateSampling(const Sampling& sampling);

// Checks everything but the queue and the engine's state; returns the number of tokens the
// request may generate (its max_tokens, else the default or the room left before
// max_model_len, whichever is smaller).
// InvalidArgument: empty prompt, token ids outside the vocabulary, a prompt longer than
// max_prompt_tokens or prompt + max_tokens beyond max_model_len (naming the limit and the
// numbers), negative max_tokens, top_logprobs outside [0, 20], bad sampling parameters.
absl::StatusOr<int32_t> ValidateRequest(const GenerateRequest& request,
                                        const RequestLimits& limits);

}  // namespace tessera::serving
