// tessera.v1 request messages to the engine's GenerateRequest: defaults for absent fields and
// prompt tokenization (text, token ids or chat messages). The checks of what a client asked
// for are serving's (controller/serving/request_validation.h), shared with the REST gateway
// and `tessera generate`; every error is INVALID_ARGUMENT naming the field.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "controller/serving/engine.h"
#include "controller/serving/structured_output.h"
#include "tessera/v1/inference.pb.h"

namespace tessera::grpc_api {

// OK when `requested` is empty or names the served model; INVALID_ARGUMENT when the name is
// too long or holds control characters (serving::ValidateModelName), NOT_FOUND otherwise.
absl::Status CheckModelName(const std::string& requested, const serving::ModelInfo& info);

// Sampling parameters with the documented defaults for absent fields (not range-checked).
serving::Sampling ToSampling(const tessera::v1::SamplingParams& params);
// GenerationOptions.structured_output as serving takes it (errors name
// "options.structured_output.<kind>").
serving::StructuredOutput ToStructuredOutput(const tessera::v1::StructuredOutput& p);

// The engine request a Generate or Chat call describes, less the prompt: request_id,
// sampling, max_tokens, stop strings and ids, ignore_eos, logprobs (top_logprobs > 0 implies
// logprobs), checked by serving::ValidateRequestOptions against `engine`'s vocabulary.
absl::StatusOr<serving::GenerateRequest> ToEngineRequest(
    const std::string& request_id, const tessera::v1::SamplingParams& sampling,
    const tessera::v1::GenerationOptions& options, const serving::Engine& engine);

// The prompt of a Generate call as token ids: the text tokenized (with BOS unless
// add_special_tokens is false) or the ids checked against the vocabulary.
absl::StatusOr<std::vector<int32_t>> PromptTokens(const tessera::v1::GenerateRequest& request,
                                                  const serving::Engine& engine);

// The prompt of a Chat call: the messages checked (serving::ValidateChatMessages), then
// rendered by the model's template with the generation prompt and tokenized as the REST
// gateway does it (serving::Engine::ChatPromptTokens).
absl::StatusOr<std::vector<int32_t>> ChatPromptTokens(const tessera::v1::ChatRequest& request,
                                                      const serving::Engine& engine);

}  // namespace tessera::grpc_api
