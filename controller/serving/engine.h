// The serving engine as the API layers (REST gateway, gRPC service) see it: submit a
// tokenized request, receive its tokens as events, cancel it. Implemented by the scheduler
// (continuous batching over a StepRunner); the API layers never see steps or blocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera::serving {

struct Sampling {
  float temperature = 1.0f;  // 0: greedy
  int32_t top_k = 0;         // 0 or -1: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;
};

struct GenerateRequest {
  std::string request_id;              // for logs and metrics; unique per request
  std::vector<int32_t> prompt_tokens;  // already tokenized (chat template applied)
  Sampling sampling;
  int32_t max_tokens = 0;               // 0: up to the context length
  std::vector<std::string> stop;        // stop strings, matched on the detokenized text
  std::vector<int32_t> stop_token_ids;  // in addition to the model's end-of-generation ids
  bool ignore_eos = false;
  bool logprobs = false;     // log-probability of each generated token
  int32_t top_logprobs = 0;  // 0..20 alternatives per token
  // Absent: the engine's request timeout applies.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // Prefix caching: only requests with the same salt share cached KV blocks (as vLLM's
  // cache_salt), so tenants cannot learn each other's prompts from timing.
  std::string cache_salt;
  // Structured output: the GBNF grammar the generated text follows (structured_output.h
  // compiles a request's JSON schema, regex, choices or grammar to it); empty: none.
  // Generation then ends with "stop" where the grammar is complete.
  std::string grammar;
};

struct TokenLogprobs {
  int32_t token = -1;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // most likely first
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  // Prompt tokens whose KV came from the prefix cache instead of being prefilled.
  int32_t cached_tokens = 0;
};

// One event per step that produced something for the request. `text` is valid UTF-8
// (invalid byte sequences the model emits are replaced with U+FFFD); text held back
// because it may begin a stop string, or is an incomplete UTF-8 sequence, arrives with a
// later event. The last event has `finished` set.
struct GenerateEvent {
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<TokenLogprobs> logprobs;  // one per token id, when asked for
  bool finished = false;
  std::string finish_reason;  // "stop" (EOS / stop string / stop id), "length", "abort"
  Usage usage;                // on the finished event
  // Non-OK on the finished event when the request failed: UNAVAILABLE (workers died),
  // DEADLINE_EXCEEDED (request timeout), CANCELLED (the client went away), ...
  absl::Status status;
};

// Called on the engine's thread, in order, never after the finished event. Must not block
// (hand the event to the connection's own executor).
using EventSink = std::function<void(GenerateEvent)>;

class RequestHandle {
 public:
  virtual ~RequestHandle() = default;
  // Stops the request at the next step and frees its KV blocks; the sink then receives a
  // finished event with CANCELLED status (unless it had already finished). Idempotent.
  virtual void Cancel() = 0;
};

struct ModelInfo {
  std::string name;          // served model name
  std::string architecture;  // general.architecture
  std::string path;
  int64_t context_length = 0;
  int64_t max_model_len = 0;
  int32_t n_vocab = 0;
  int32_t tp = 1;
  std::string quantization;  // e.g. "Q4_K_M"
  int64_t created_unix = 0;
  std::vector<int32_t> eog_token_ids;
};

struct ChatMessage {
  std::string role;
  std::string content;
};

// What a chat request adds to the chat template's variables beyond roles and contents, as
// JSON text ("" for none): `vars`, an object whose keys become top-level variables (`tools`,
// chat_template_kwargs' keys; never replacing messages or add_generation_prompt);
// `message_fields`, per message (parallel to the messages, or empty) an object merged into
// that message (an assistant's `tool_calls`, a tool message's `tool_call_id`).
struct ChatTemplateExtras {
  std::string vars;
  std::vector<std::string> message_fields;
};

class Engine {
 public:
  virtual ~Engine() = default;

  // Queues a request. Errors, before any event: RESOURCE_EXHAUSTED when the waiting queue
  // is full; INVALID_ARGUMENT naming the limit when the prompt or prompt + max_tokens is
  // too long, or a parameter is out of range; UNAVAILABLE when the engine is not ready or
  // draining.
  virtual absl::StatusOr<std::unique_ptr<RequestHandle>> Submit(GenerateRequest request,
                                                                EventSink sink) = 0;

  virtual const ModelInfo& info() const = 0;
  virtual absl::StatusOr<std::vector<int32_t>> Tokenize(const std::string& text,
                                                        bool add_special) const = 0;
  virtual absl::StatusOr<std::string> Detokenize(const std::vector<int32_t>& ids) const = 0;
  // The model's chat template (or the configured override) applied to `messages`.
  virtual absl::StatusOr<std::string> RenderChat(const std::vector<ChatMessage>& messages,
                                                 bool add_generation_prompt) const = 0;
  // A chat prompt's token ids: the chat template applied to `messages`, then tokenized.
  // ServingEngine bounds it before the expensive work (max-chat-messages, max-prompt-bytes)
  // and parses special-token strings only in the template's own text, never in what came
  // from the messages (unless the deployment opted out). Errors: INVALID_ARGUMENT naming the
  // limit, FAILED_PRECONDITION without a template.
  // `extras` (tools, tool calls, template kwargs) reach the template where the engine
  // renders it (ServingEngine); this default ignores them.
  virtual absl::StatusOr<std::vector<int32_t>> ChatPromptTokens(
      const std::vector<ChatMessage>& messages, bool add_generation_prompt,
      const ChatTemplateExtras& extras = {}) const {
    absl::StatusOr<std::string> text = RenderChat(messages, add_generation_prompt);
    if (!text.ok()) return text.status();
    return Tokenize(*text, /*add_special=*/false);
  }
  // A completion prompt's token ids, BOS added as the model wants it when `add_special`.
  // Special-token strings in `text` become special tokens only with `parse_special` (or when
  // the deployment opted out); otherwise they are plain text. ServingEngine bounds the
  // text's size first.
  virtual absl::StatusOr<std::vector<int32_t>> PromptTokens(const std::string& text,
                                                            bool add_special,
                                                            bool parse_special) const {
    (void)parse_special;
    return Tokenize(text, add_special);
  }
  // The text of one token as the detokenizer renders it (for logprobs' "token" fields).
  virtual std::string TokenText(int32_t id) const = 0;
  // The id of the token whose text is `text` when it is a special token (any type but normal
  // and byte: control, user-defined, ...), which grammars must name by id; nullopt otherwise.
  virtual std::optional<int32_t> SpecialTokenId(std::string_view text) const {
    (void)text;
    return std::nullopt;
  }

  virtual bool ready() const = 0;
  // Stop admitting requests (Submit answers UNAVAILABLE); running ones go on.
  virtual void StartDrain() = 0;
  // Forgets every cached prefix (POST /reset_prefix_cache): later requests prefill in full
  // until the cache fills again. Requests in flight are unaffected. False when this engine
  // has no prefix cache.
  virtual bool ResetPrefixCache() { return false; }
  // Requests running or waiting.
  virtual int InFlight() const = 0;
};

}  // namespace tessera::serving
