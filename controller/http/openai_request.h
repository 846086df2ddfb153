// The body of an OpenAI `POST /v1/chat/completions` or `POST /v1/completions`, parsed and
// checked. Every rejection is INVALID_ARGUMENT naming the field (see InvalidParam), so the
// client sees a 400 whose `param` says what to fix. The JSON types are checked here; the
// ranges of what generation uses (sampling parameters, top_logprobs, stop strings, the model
// name's length, chat roles) are serving's (controller/serving/request_validation.h), shared
// with the gRPC API and `tessera generate`. Fields OpenAI defines that do not
// change generation here (`user`, `logit_bias` absent, ...) are accepted; unknown fields are
// ignored, as vLLM does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/serving/engine.h"
#include "controller/serving/structured_output.h"
#include "controller/serving/tool_calling.h"
#include "nlohmann/json.hpp"

namespace tessera::http {

enum class Endpoint { kChatCompletions, kCompletions };

struct CompletionParams {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string model;  // "" when the request named none
  // Chat: the conversation. Completions: the prompt as text, or as token ids.
  std::vector<serving::ChatMessage> messages;
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_tokens;
  // Completions: special-token strings in prompt_text become special tokens (off: plain
  // text, so that text pasted into a prompt cannot forge control tokens).
  bool parse_special_tokens = false;

  serving::Sampling sampling;
  int32_t max_tokens = 0;  // 0: the engine's limit
  std::vector<std::string> stop;
  int n = 1;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string user;
  // Prefix caching: only requests with the same salt share cached KV blocks (vLLM's field).
  std::string cache_salt;
  // Structured output, from whichever field asked for it (see ReadStructuredOutput in the
  // .cc: response_format, vLLM's structured_outputs and guided_*, llama-server's grammar and
  // json_schema), and the GBNF grammar it compiles to ("" when none).
  serving::StructuredOutput structured_output;
  std::string grammar;

  // Tool calling (chat): `tools`, `tool_choice`, `parallel_tool_calls`,
  // `chat_template_kwargs` and the messages' `tool_calls` / `tool_call_id` / `name`.
  serving::ToolCalling tool_calling;
};

// Most choices one request may ask for with `n`.
inline constexpr int kMaxChoices = 16;

// Parses `body` (the raw request bytes). A body that is not a JSON object is
// INVALID_ARGUMENT with OpenAI's wording.
absl::StatusOr<CompletionParams> ParseCompletionRequest(const std::string& body, Endpoint endpoint);

}  // namespace tessera::http
