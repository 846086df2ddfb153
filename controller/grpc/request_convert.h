// tessera.v1 request messages to the engine's GenerateRequest: defaults for absent fields,
// range checks that name the field, prompt tokenization (text, token ids or chat messages).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "controller/serving/engine.h"
#include "tessera/v1/inference.pb.h"

namespace tessera::grpc_api {

// OK when `requested` is empty or names the served model; NOT_FOUND otherwise.
absl::Status CheckModelName(const std::string& requested, const serving::ModelInfo& info);

// Sampling parameters with the documented defaults for absent fields. INVALID_ARGUMENT
// naming the field when one is out of range (temperature < 0, top_p outside (0, 1], ...).
absl::StatusOr<serving::Sampling> ToSampling(const tessera::v1::SamplingParams& params);

// max_tokens, stop strings and ids, ignore_eos, logprobs into `request`. top_logprobs > 0
// implies logprobs.
absl::Status ApplyOptions(const tessera::v1::GenerationOptions& options,
                          serving::GenerateRequest* request);

// The prompt of a Generate call as token ids: the text tokenized (with BOS unless
// add_special_tokens is false) or the ids checked against the vocabulary.
absl::StatusOr<std::vector<int32_t>> PromptTokens(const tessera::v1::GenerateRequest& request,
                                                  const serving::Engine& engine);

// The prompt of a Chat call: the messages rendered by the model's template with the
// generation prompt, then tokenized.
absl::StatusOr<std::vector<int32_t>> ChatPromptTokens(const tessera::v1::ChatRequest& request,
                                                      const serving::Engine& engine);

}  // namespace tessera::grpc_api
