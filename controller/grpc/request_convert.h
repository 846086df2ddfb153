// tessera.v1 request messages to the engine's GenerateRequest: defaults for absent fields and
// prompt tokenization (text, token ids or chat messages). The checks of what a client asked
// for are serving's (controller/serving/request_validation.h), shared with the REST gateway
// and `tessera generate`; every error is INVALID_ARGUMENT naming the field.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/chat/tool_calls.h"
#include "controller/serving/engine.h"
#include "controller/serving/structured_output.h"
#include "controller/serving/tool_calling.h"
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

// A Chat call's conversation and tool-calling fields as serving takes them, in the shapes
// of OpenAI's chat API (serving::ToolCalling): `tools` as OpenAI's tools array (parameters_json
// parsed, key order kept), the choice ("auto", "none", "required", or "function" with
// tool_choice_function), the messages' tool_calls / tool_call_id / name / reasoning_content
// as message fields, chat_template_kwargs_json parsed. Checked: the roles
// (serving::ValidateChatMessages), serving::CheckTools and CheckToolChoice, JSON texts that
// must be objects, and fields in messages of the wrong role; INVALID_ARGUMENT naming the
// request's field ("tools[0].function.parameters_json", "messages[2].tool_calls[0].function
// .arguments", "tool_choice_function").
struct ChatInput {
  std::vector<serving::ChatMessage> messages;
  serving::ToolCalling tool_calling;
};
absl::StatusOr<ChatInput> ToChatInput(const tessera::v1::ChatRequest& request);

// The prompt of a Chat call: the messages rendered by the model's template with the
// generation prompt and the tool-calling extras (serving::TemplateExtras), tokenized as the
// REST gateway does it (serving::Engine::ChatPromptTokens).
absl::StatusOr<std::vector<int32_t>> ChatPromptTokens(const ChatInput& chat,
                                                      const serving::Engine& engine);

// What a Generate or Chat call hands the engine, and for Chat how its output is parsed into
// reasoning, content and tool calls (nullopt: the output is all text).
struct PreparedCall {
  serving::GenerateRequest request;
  std::optional<chat::ChatOutputOptions> output;
};

// A Generate call: ToEngineRequest and PromptTokens, after the model name is checked.
absl::StatusOr<PreparedCall> PrepareGenerate(const tessera::v1::GenerateRequest& request,
                                             const serving::Engine& engine);

// A Chat call: ToEngineRequest, ToChatInput, ChatPromptTokens, then serving::PlanChatOutput
// under the daemon's `settings`: a forced call's grammar becomes the request's grammar
// (INVALID_ARGUMENT naming tool_choice when options.structured_output also constrains the
// output), and the parse options come back in PreparedCall::output.
absl::StatusOr<PreparedCall> PrepareChat(const tessera::v1::ChatRequest& request,
                                         const serving::Engine& engine,
                                         const serving::ChatOutputSettings& settings);

}  // namespace tessera::grpc_api
