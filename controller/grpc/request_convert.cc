#include "controller/grpc/request_convert.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera::grpc_api {
namespace {

constexpr int32_t kMaxTopLogprobs = 20;

absl::Status OutOfRange(const char* field, const char* expected, double value) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": expected ", expected, ", got ", value));
}

absl::Status CheckTokenIds(const std::vector<int32_t>& ids, int32_t n_vocab, const char* field) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || (n_vocab > 0 && ids[i] >= n_vocab)) {
      return absl::InvalidArgumentError(absl::StrCat(field, "[", i, "]: token id ", ids[i],
                                                     " outside the vocabulary [0, ", n_vocab, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckModelName(const std::string& requested, const serving::ModelInfo& info) {
  if (requested.empty() || requested == info.name) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat(
      "model '", requested, "' is not served here (this server serves '", info.name, "')"));
}

absl::StatusOr<serving::Sampling> ToSampling(const tessera::v1::SamplingParams& p) {
  serving::Sampling s;
  if (p.has_temperature()) s.temperature = p.temperature();
  if (p.has_top_k()) s.top_k = p.top_k();
  if (p.has_top_p()) s.top_p = p.top_p();
  if (p.has_min_p()) s.min_p = p.min_p();
  if (p.has_repetition_penalty()) s.repetition_penalty = p.repetition_penalty();
  if (p.has_presence_penalty()) s.presence_penalty = p.presence_penalty();
  if (p.has_frequency_penalty()) s.frequency_penalty = p.frequency_penalty();
  if (p.has_seed()) s.seed = p.seed();
  // `!(x >= 0)` also catches NaN.
  if (!(s.temperature >= 0)) return OutOfRange("temperature", ">= 0", s.temperature);
  if (s.top_k < -1) return OutOfRange("top_k", ">= -1", s.top_k);
  if (!(s.top_p > 0 && s.top_p <= 1)) return OutOfRange("top_p", "in (0, 1]", s.top_p);
  if (!(s.min_p >= 0 && s.min_p <= 1)) return OutOfRange("min_p", "in [0, 1]", s.min_p);
  if (!(s.repetition_penalty > 0 && std::isfinite(s.repetition_penalty))) {
    return OutOfRange("repetition_penalty", "> 0", s.repetition_penalty);
  }
  if (!(std::fabs(s.presence_penalty) <= 2)) {
    return OutOfRange("presence_penalty", "in [-2, 2]", s.presence_penalty);
  }
  if (!(std::fabs(s.frequency_penalty) <= 2)) {
    return OutOfRange("frequency_penalty", "in [-2, 2]", s.frequency_penalty);
  }
  return s;
}

absl::Status ApplyOptions(const tessera::v1::GenerationOptions& o,
                          serving::GenerateRequest* request) {
  if (o.max_tokens() < 0) return OutOfRange("max_tokens", ">= 0", o.max_tokens());
  if (o.top_logprobs() < 0 || o.top_logprobs() > kMaxTopLogprobs) {
    return OutOfRange("top_logprobs", "in [0, 20]", o.top_logprobs());
  }
  for (int i = 0; i < o.stop_size(); ++i) {
    if (o.stop(i).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("stop[", i, "]: expected a non-empty string"));
    }
  }
  request->max_tokens = o.max_tokens();
  request->stop.assign(o.stop().begin(), o.stop().end());
  request->stop_token_ids.assign(o.stop_token_ids().begin(), o.stop_token_ids().end());
  if (absl::Status s = CheckTokenIds(request->stop_token_ids, 0, "stop_token_ids"); !s.ok()) {
    return s;
  }
  request->ignore_eos = o.ignore_eos();
  request->logprobs = o.logprobs() || o.top_logprobs() > 0;
  request->top_logprobs = o.top_logprobs();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> PromptTokens(const tessera::v1::GenerateRequest& request,
                                                  const serving::Engine& engine) {
  std::vector<int32_t> ids;
  switch (request.prompt_case()) {
    case tessera::v1::GenerateRequest::kText: {
      const bool add_special =
          request.has_add_special_tokens() ? request.add_special_tokens() : true;
      absl::StatusOr<std::vector<int32_t>> tokens = engine.Tokenize(request.text(), add_special);
      if (!tokens.ok()) return tokens.status();
      ids = *std::move(tokens);
      break;
    }
    case tessera::v1::GenerateRequest::kTokenIds:
      ids.assign(request.token_ids().ids().begin(), request.token_ids().ids().end());
      if (absl::Status s = CheckTokenIds(ids, engine.info().n_vocab, "token_ids"); !s.ok()) {
        return s;
      }
      break;
    case tessera::v1::GenerateRequest::PROMPT_NOT_SET:
      return absl::InvalidArgumentError("prompt: expected `text` or `token_ids`");
  }
  if (ids.empty()) return absl::InvalidArgumentError("prompt: expected at least one token");
  return ids;
}

absl::StatusOr<std::vector<int32_t>> ChatPromptTokens(const tessera::v1::ChatRequest& request,
                                                      const serving::Engine& engine) {
  if (request.messages().empty()) {
    return absl::InvalidArgumentError("messages: expected at least one message");
  }
  std::vector<serving::ChatMessage> messages;
  messages.reserve(request.messages_size());
  for (int i = 0; i < request.messages_size(); ++i) {
    const tessera::v1::ChatMessage& m = request.messages(i);
    if (m.role().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("messages[", i, "].role: expected a role"));
    }
    messages.push_back({m.role(), m.content()});
  }
  absl::StatusOr<std::string> rendered = engine.RenderChat(messages, true);
  if (!rendered.ok()) return rendered.status();
  // As `tessera generate --chat` does: BOS is asked for, and the tokenizer drops the one a
  // template already wrote.
  absl::StatusOr<std::vector<int32_t>> ids = engine.Tokenize(*rendered, true);
  if (!ids.ok()) return ids.status();
  if (ids->empty()) return absl::InvalidArgumentError("messages: rendered to an empty prompt");
  return ids;
}

}  // namespace tessera::grpc_api
