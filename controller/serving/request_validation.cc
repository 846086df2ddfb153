#include "controller/serving/request_validation.h"

#include <algorithm>
#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"

namespace tessera::serving {
namespace {

// The status payload that carries the field's name.
constexpr char kFieldPayload[] = "tessera.dev/field";

// Longest prefix of a client's string an error quotes.
constexpr size_t kQuoteBytes = 32;

constexpr std::array<absl::string_view, 6> kChatRoles = {"system",    "developer", "user",
                                                         "assistant", "tool",      "function"};

absl::Status OutOfRange(absl::string_view field, absl::string_view range, double value) {
  return InvalidField(field, absl::StrCat(field, ": expected ", range, ", got ", value));
}

// `text` quoted for an error message: at most kQuoteBytes bytes, cut at a character
// boundary, with control characters shown as '?', and "..." when cut.
std::string Quote(absl::string_view text) {
  size_t end = std::min(text.size(), kQuoteBytes);
  if (end < text.size()) {
    // Back up to the start of a UTF-8 sequence so that the quote stays valid text.
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  }
  std::string out = "'";
  for (char c : text.substr(0, end)) {
    const unsigned char u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7F ? '?' : c;
  }
  out += end < text.size() ? "...'" : "'";
  return out;
}

// Compares every byte of the longer string whatever the contents, so the time taken says
// nothing about where `given` first differs from `expected` (only its length may show).
bool ConstantTimeEquals(absl::string_view given, absl::string_view expected) {
  const size_t n = std::max(given.size(), expected.size());
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    const unsigned char b = i < expected.size() ? static_cast<unsigned char>(expected[i]) : 0;
    diff |= a ^ b;
  }
  return diff == 0;
}

}  // namespace

absl::Status InvalidField(absl::string_view field, absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kFieldPayload, absl::Cord(field));
  return status;
}

std::string FieldOf(const absl::Status& status) {
  absl::optional<absl::Cord> field = status.GetPayload(kFieldPayload);
  return field.has_value() ? std::string(*field) : std::string();
}

absl::Status ValidateSampling(const Sampling& s) {
  // Written as !(in range) so that NaN fails every check.
  if (!(s.temperature >= 0 && s.temperature <= 2)) {
    return OutOfRange("temperature", "a value in [0, 2] (0 = greedy)", s.temperature);
  }
  if (s.top_k < -1) return OutOfRange("top_k", "a value >= -1 (0 or -1 = off)", s.top_k);
  if (!(s.top_p > 0 && s.top_p <= 1)) return OutOfRange("top_p", "a value in (0, 1]", s.top_p);
  if (!(s.min_p >= 0 && s.min_p <= 1)) return OutOfRange("min_p", "a value in [0, 1]", s.min_p);
  if (!(s.repetition_penalty > 0 && s.repetition_penalty <= 10)) {
    return OutOfRange("repetition_penalty", "a value in (0, 10] (1 = off)", s.repetition_penalty);
  }
  if (!(s.presence_penalty >= -2 && s.presence_penalty <= 2)) {
    return OutOfRange("presence_penalty", "a value in [-2, 2]", s.presence_penalty);
  }
  if (!(s.frequency_penalty >= -2 && s.frequency_penalty <= 2)) {
    return OutOfRange("frequency_penalty", "a value in [-2, 2]", s.frequency_penalty);
  }
  return absl::OkStatus();
}

absl::Status ValidateRequestId(absl::string_view id) {
  if (id.size() > kMaxRequestIdBytes) {
    return InvalidField("request_id", absl::StrCat("request_id: expected at most ",
                                                   kMaxRequestIdBytes, " bytes, got ", id.size()));
  }
  for (size_t i = 0; i < id.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    if (c < 0x21 || c > 0x7E) {
      return InvalidField("request_id",
                          absl::StrCat("request_id: expected printable ASCII without spaces "
                                       "(0x21-0x7E), byte ",
                                       i, " is 0x", absl::Hex(c, absl::kZeroPad2)));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateModelName(absl::string_view model) {
  if (model.size() > kMaxModelNameBytes) {
    return InvalidField("model", absl::StrCat("model: expected a name of at most ",
                                              kMaxModelNameBytes, " bytes, got ", model.size()));
  }
  for (size_t i = 0; i < model.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(model[i]);
    if (c < 0x20 || c == 0x7F) {
      return InvalidField("model", absl::StrCat("model: expected a name without control "
                                                "characters, byte ",
                                                i, " is 0x", absl::Hex(c, absl::kZeroPad2)));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateStopStrings(const std::vector<std::string>& stop) {
  if (stop.size() > kMaxStopStrings) {
    return InvalidField("stop", absl::StrCat("stop: expected at most ", kMaxStopStrings,
                                             " stop strings, got ", stop.size()));
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].size() > kMaxStopStringBytes) {
      const std::string field = absl::StrCat("stop[", i, "]");
      return InvalidField(field, absl::StrCat(field, ": expected at most ", kMaxStopStringBytes,
                                              " bytes, got ", stop[i].size()));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateChatRole(absl::string_view role, absl::string_view field) {
  if (std::find(kChatRoles.begin(), kChatRoles.end(), role) != kChatRoles.end()) {
    return absl::OkStatus();
  }
  return InvalidField(field, absl::StrCat(field, ": expected system, developer, user, assistant ",
                                          "or tool, got ", Quote(role)));
}

absl::Status ValidateChatMessages(const std::vector<ChatMessage>& messages) {
  if (messages.empty()) {
    return InvalidField("messages", "messages: expected at least one message");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    absl::Status role = ValidateChatRole(messages[i].role, absl::StrCat("messages[", i, "].role"));
    if (!role.ok()) return role;
  }
  return absl::OkStatus();
}

bool AuthorizationAllows(const std::vector<absl::string_view>& values, absl::string_view api_key) {
  if (api_key.empty()) return true;
  if (values.size() != 1) return false;
  constexpr absl::string_view kScheme = "bearer ";
  const absl::string_view value = values.front();
  if (value.size() < kScheme.size() ||
      absl::AsciiStrToLower(value.substr(0, kScheme.size())) != kScheme) {
    return false;
  }
  return ConstantTimeEquals(value.substr(kScheme.size()), api_key);
}

absl::Status ValidateRequestOptions(const GenerateRequest& r, int32_t n_vocab) {
  if (absl::Status s = ValidateRequestId(r.request_id); !s.ok()) return s;
  if (absl::Status s = ValidateSampling(r.sampling); !s.ok()) return s;
  if (r.max_tokens < 0) {
    return OutOfRange("max_tokens", "a value >= 0 (0 = up to the context length)", r.max_tokens);
  }
  if (r.top_logprobs < 0 || r.top_logprobs > kMaxTopLogprobs) {
    return OutOfRange("top_logprobs", absl::StrCat("a value in [0, ", kMaxTopLogprobs, "]"),
                      r.top_logprobs);
  }
  if (absl::Status s = ValidateStopStrings(r.stop); !s.ok()) return s;
  if (r.cache_salt.size() > kMaxCacheSaltBytes) {
    return InvalidField("cache_salt",
                        absl::StrCat("cache_salt: expected at most ", kMaxCacheSaltBytes,
                                     " bytes, got ", r.cache_salt.size()));
  }
  for (size_t i = 0; i < r.stop_token_ids.size(); ++i) {
    const int32_t id = r.stop_token_ids[i];
    if (id >= 0 && (n_vocab <= 0 || id < n_vocab)) continue;
    const std::string field = absl::StrCat("stop_token_ids[", i, "]");
    return InvalidField(field, n_vocab > 0
                                   ? absl::StrCat(field, ": token id ", id,
                                                  " is outside the vocabulary [0, ", n_vocab, ")")
                                   : absl::StrCat(field, ": expected a token id >= 0, got ", id));
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> ValidateRequest(const GenerateRequest& r, const RequestLimits& limits) {
  if (absl::Status s = ValidateRequestOptions(r, limits.n_vocab); !s.ok()) return s;
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
  // As vLLM words it, so that clients that parse the message keep working. Without an
  // explicit max_tokens the request needs room for one token, and the default is clamped.
  const int64_t asked = r.max_tokens > 0 ? r.max_tokens : 1;
  if (prompt + asked > limits.max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "This model's maximum context length (max-model-len) is ", limits.max_model_len,
        " tokens. However, you requested ", prompt + asked, " tokens (", prompt, " in the prompt, ",
        asked, " in the completion). Please reduce the length of the prompt or completion."));
  }
  if (r.max_tokens > 0) return r.max_tokens;
  const int64_t room = limits.max_model_len - prompt;
  return static_cast<int32_t>(
      limits.default_max_tokens > 0 ? std::min<int64_t>(limits.default_max_tokens, room) : room);
}

}  // namespace tessera::serving
