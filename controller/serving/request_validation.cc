#include "controller/serving/request_validation.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace tessera::serving {
namespace {

absl::Status OutOfRange(const char* name, const std::string& range, double value) {
  return absl::InvalidArgumentError(
      absl::StrCat("sampling parameter ", name, ": expected ", range, ", got ", value));
}

}  // namespace

absl::Status ValidateSampling(const Sampling& s) {
  // Written as !(in range) so that NaN fails every check.
  if (!(s.temperature >= 0 && std::isfinite(s.temperature))) {
    return OutOfRange("temperature", "a finite value >= 0 (0 = greedy)", s.temperature);
  }
  if (s.top_k < -1) return OutOfRange("top_k", "a value >= -1 (0 or -1 = off)", s.top_k);
  if (!(s.top_p > 0 && s.top_p <= 1)) return OutOfRange("top_p", "a value in (0, 1]", s.top_p);
  if (!(s.min_p >= 0 && s.min_p <= 1)) return OutOfRange("min_p", "a value in [0, 1]", s.min_p);
  if (!(s.repetition_penalty > 0 && std::isfinite(s.repetition_penalty))) {
    return OutOfRange("repetition_penalty", "a finite value > 0 (1 = off)", s.repetition_penalty);
  }
  if (!(s.presence_penalty >= -2 && s.presence_penalty <= 2)) {
    return OutOfRange("presence_penalty", "a value in [-2, 2]", s.presence_penalty);
  }
  if (!(s.frequency_penalty >= -2 && s.frequency_penalty <= 2)) {
    return OutOfRange("frequency_penalty", "a value in [-2, 2]", s.frequency_penalty);
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> ValidateRequest(const GenerateRequest& r, const RequestLimits& limits) {
  const int64_t prompt = static_cast<int64_t>(r.prompt_tokens.size());
  if (prompt == 0) return absl::InvalidArgumentError("the prompt is empty (no tokens)");
  for (size_t i = 0; i < r.prompt_tokens.size(); ++i) {
    const int32_t id = r.prompt_tokens[i];
    if (id < 0 || id >= limits.n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt token ", i, " is id ", id, ", outside the vocabulary [0, ", limits.n_vocab, ")"));
    }
  }
  if (prompt > limits.max_prompt_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("the prompt has ", prompt, " tokens, more than the maximum prompt length ",
                     "(max-prompt-tokens) of ", limits.max_prompt_tokens,
                     " tokens. Please reduce the length of the prompt."));
  }
  if (r.max_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_tokens: expected a value >= 0 (0 = up to the context length), got ", r.max_tokens));
  }
  // As vLLM words it, so that clients that parse the message keep working. Without an
  // explicit max_tokens the request needs room for one token, and the default is clamped.
  const int64_t asked = r.max_tokens > 0 ? r.max_tokens : 1;
  if (prompt + asked > limits.max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "This model's maximum context length (max-model-len) is ", limits.max_model_len,
        " tokens. However, you requested ", prompt + asked, " tokens (", prompt, " in the prompt, ",
        asked, " in the completion). Please reduce the length of the prompt or completion."));
  }
  if (r.top_logprobs < 0 || r.top_logprobs > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(absl::StrCat("top_logprobs: expected a value in [0, ",
                                                   kMaxTopLogprobs, "], got ", r.top_logprobs));
  }
  for (int32_t id : r.stop_token_ids) {
    if (id < 0 || id >= limits.n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stop_token_ids: id ", id, " is outside the vocabulary [0, ", limits.n_vocab, ")"));
    }
  }
  if (absl::Status s = ValidateSampling(r.sampling); !s.ok()) return s;
  if (r.max_tokens > 0) return r.max_tokens;
  const int64_t room = limits.max_model_len - prompt;
  return static_cast<int32_t>(
      limits.default_max_tokens > 0 ? std::min<int64_t>(limits.default_max_tokens, room) : room);
}

}  // namespace tessera::serving
