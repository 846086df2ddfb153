// OpenAI response objects: the pieces of chat.completion / chat.completion.chunk /
// text_completion bodies that the non-streaming and streaming paths share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/chat/tool_calls.h"
#include "controller/serving/engine.h"
#include "nlohmann/json.hpp"

namespace tessera::http {

// What every response object of one request repeats.
struct ResponseHeader {
  std::string id;      // "chatcmpl-..." or "cmpl-..."
  std::string object;  // "chat.completion", "chat.completion.chunk", "text_completion"
  int64_t created = 0;
  std::string model;
  std::string system_fingerprint;  // omitted when empty
};

// {id, object, created, model[, system_fingerprint], choices: []}.
nlohmann::json ResponseObject(const ResponseHeader& header);

// {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details: {cached_tokens}}:
// cached_tokens are the prompt tokens the prefix cache served (OpenAI's field).
// `reasoning_tokens` >= 0 adds completion_tokens_details.reasoning_tokens.
nlohmann::json UsageJson(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens,
                         int64_t reasoning_tokens = -1);

// The UTF-8 bytes of a token's text as a JSON list of integers (OpenAI's `bytes`): the raw
// bytes, so that a client can reassemble characters split across tokens.
nlohmann::json TokenBytes(const std::string& text);

// Chat logprobs entries {token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]},
// one per token, for `choices[].logprobs.content`.
nlohmann::json ChatLogprobEntries(const std::vector<serving::TokenLogprobs>& logprobs,
                                  int32_t top_logprobs, const serving::Engine& engine);

// Completions logprobs, {tokens, token_logprobs, top_logprobs, text_offset}, built up as
// tokens arrive. Offsets count bytes of the completion text from its start.
class CompletionLogprobs {
 public:
  explicit CompletionLogprobs(int32_t top_logprobs) : top_logprobs_(top_logprobs) {}
  void Append(const std::vector<serving::TokenLogprobs>& logprobs, const serving::Engine& engine);
  nlohmann::json ToJson() const;
  // Starts a new piece (for streaming: each chunk carries only its own tokens) while the
  // offsets go on counting.
  void ClearKeepingOffset();

 private:
  int32_t top_logprobs_;
  nlohmann::json tokens_ = nlohmann::json::array();
  nlohmann::json token_logprobs_ = nlohmann::json::array();
  nlohmann::json top_ = nlohmann::json::array();
  nlohmann::json text_offset_ = nlohmann::json::array();
  int64_t offset_ = 0;
};

// A whole chat output as OpenAI's `message`: {role: "assistant", content (null when empty and
// there are tool calls), reasoning_content (only when non-empty), tool_calls: [{id, type:
// "function", function: {name, arguments}}] (only when there are some), refusal: null}.
nlohmann::json ChatMessageJson(const chat::ParsedChatOutput& output);

// A streamed piece as OpenAI's `delta`: reasoning_content, content and tool_calls [{index,
// id, type: "function", function: {name, arguments}}], each only when non-empty.
nlohmann::json ChatDeltaJson(const chat::ChatOutputDelta& delta);

// "chatcmpl-" / "cmpl-" followed by 24 random alphanumerics.
std::string NewResponseId(const std::string& prefix);

}  // namespace tessera::http
