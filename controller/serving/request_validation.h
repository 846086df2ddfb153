// What a client may ask for, checked in one place for every front end: the REST gateway,
// the gRPC service and `tessera generate` call these functions (and the engine calls
// ValidateRequest again at Submit), so a parameter has one range and one error message
// wherever it comes from.
//
// Every rejection is INVALID_ARGUMENT whose message starts with the request field it is
// about ("temperature: expected a value in [0, 2] (0 = greedy), got 3") and whose field
// name travels with the status (FieldOf), so the REST gateway can name it in OpenAI's
// `param`. The sampling ranges lie within what the worker's sampler accepts
// (worker/sampling/sampling.h SamplingParams::Validate; the controller does not include
// worker code), so a request that passes never fails a step.
//
// Strings a client sends that are logged or echoed back (request_id, the model name, stop
// strings, chat roles) are bounded here, and an error never quotes more than a short,
// printable prefix of what was sent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "controller/serving/engine.h"

namespace tessera::serving {

// Largest top_logprobs the sampler lists (OpenAI's limit too).
inline constexpr int32_t kMaxTopLogprobs = 20;
// request_id: printable ASCII without spaces (it is a key in every log line of the request
// and is echoed in every chunk).
inline constexpr size_t kMaxRequestIdBytes = 256;
// The model a request names (echoed in the not-found error).
inline constexpr size_t kMaxModelNameBytes = 256;
// Stop strings: how many, and how long each (the output holds back text that may begin one).
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 256;
// cache_salt (prefix caching; kept with every cached first block of the request's prompt).
inline constexpr size_t kMaxCacheSaltBytes = 1024;

// INVALID_ARGUMENT about request field `field` ("temperature", "messages[2].role"); the
// message should start with the field's name.
absl::Status InvalidField(absl::string_view field, absl::string_view message);
// The field an InvalidField status is about; "" for any other status.
std::string FieldOf(const absl::Status& status);

// temperature in [0, 2], top_k >= -1, top_p in (0, 1], min_p in [0, 1], repetition_penalty
// in (0, 10], presence_penalty and frequency_penalty in [-2, 2]. The error names the
// parameter, its range and the value given; NaN and infinities are out of every range.
absl::Status ValidateSampling(const Sampling& sampling);

// "" (the server makes one) or 1..kMaxRequestIdBytes bytes of printable ASCII without
// spaces (0x21-0x7E).
absl::Status ValidateRequestId(absl::string_view request_id);

// "" (the served model) or at most kMaxModelNameBytes bytes without control characters.
absl::Status ValidateModelName(absl::string_view model);

// At most kMaxStopStrings strings of at most kMaxStopStringBytes bytes each; empty strings
// are allowed (they never match). Errors name `stop[i]` or `stop`.
absl::Status ValidateStopStrings(const std::vector<std::string>& stop);

// The chat roles a request may use: system, developer, user, assistant, tool (and OpenAI's
// deprecated function). Anything else, "" included, is an error naming `field`
// ("messages[2].role").
absl::Status ValidateChatRole(absl::string_view role, absl::string_view field);

// At least one message, each with a known role (see ValidateChatRole).
absl::Status ValidateChatMessages(const std::vector<ChatMessage>& messages);

// Whether a request carrying these `authorization` values (HTTP `Authorization` headers or
// gRPC `authorization` metadata, in the order sent) may use an API protected by `api_key`.
// True when `api_key` is empty. Otherwise exactly one value must be present, and it must be
// `Bearer KEY`: the scheme in any case, one space, then the key byte for byte (no other
// whitespace). The comparison takes the same time wherever the first difference is, so
// response timing does not leak a prefix of the key.
bool AuthorizationAllows(const std::vector<absl::string_view>& values, absl::string_view api_key);

// The options a client sets on a request, checked without the deployment's limits:
// request_id, sampling, max_tokens >= 0, top_logprobs in [0, 20], stop strings, a
// cache_salt of at most kMaxCacheSaltBytes bytes, and
// stop_token_ids >= 0 and, when n_vocab > 0, below it (the error names the vocabulary
// size). The prompt is not looked at.
absl::Status ValidateRequestOptions(const GenerateRequest& request, int32_t n_vocab);

struct RequestLimits {
  int64_t max_prompt_tokens = 0;  // > 0
  int64_t max_model_len = 0;      // > 0: prompt + generated tokens
  int32_t n_vocab = 0;            // > 0: token ids must be below it
  // For requests without max_tokens, clamped to the room the prompt leaves; 0: all of it.
  int32_t default_max_tokens = 0;
};

// Checks everything but the queue and the engine's state; returns the number of tokens the
// request may generate (its max_tokens, else the default or the room left before
// max_model_len, whichever is smaller).
// InvalidArgument: empty prompt, token ids outside the vocabulary, a prompt longer than
// max_prompt_tokens or prompt + max_tokens beyond max_model_len (naming the limit and the
// numbers), and whatever ValidateRequestOptions refuses.
absl::StatusOr<int32_t> ValidateRequest(const GenerateRequest& request,
                                        const RequestLimits& limits);

}  // namespace tessera::serving
