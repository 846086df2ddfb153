#include "controller/grpc/request_convert.h"

#include "absl/strings/str_cat.h"
#include "controller/serving/request_validation.h"
#include "controller/serving/structured_output.h"

namespace tessera::grpc_api {
namespace {

absl::Status CheckPromptIds(const std::vector<int32_t>& ids, int32_t n_vocab) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || (n_vocab > 0 && ids[i] >= n_vocab)) {
      return serving::InvalidField("token_ids",
                                   absl::StrCat("token_ids[", i, "]: token id ", ids[i],
                                                " outside the vocabulary [0, ", n_vocab, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckModelName(const std::string& requested, const serving::ModelInfo& info) {
  if (absl::Status s = serving::ValidateModelName(requested); !s.ok()) return s;
  if (requested.empty() || requested == info.name) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat(
      "model '", requested, "' is not served here (this server serves '", info.name, "')"));
}

serving::Sampling ToSampling(const tessera::v1::SamplingParams& p) {
  serving::Sampling s;
  if (p.has_temperature()) s.temperature = p.temperature();
  if (p.has_top_k()) s.top_k = p.top_k();
  if (p.has_top_p()) s.top_p = p.top_p();
  if (p.has_min_p()) s.min_p = p.min_p();
  if (p.has_repetition_penalty()) s.repetition_penalty = p.repetition_penalty();
  if (p.has_presence_penalty()) s.presence_penalty = p.presence_penalty();
  if (p.has_frequency_penalty()) s.frequency_penalty = p.frequency_penalty();
  if (p.has_seed()) s.seed = p.seed();
  return s;
}

serving::StructuredOutput ToStructuredOutput(const tessera::v1::StructuredOutput& p) {
  using Kind = serving::StructuredOutput::Kind;
  using P = tessera::v1::StructuredOutput;
  serving::StructuredOutput so;
  so.compact_json = p.compact_json();
  const std::string base = "options.structured_output.";
  switch (p.constraint_case()) {
    case P::kJsonSchema:
      so.kind = Kind::kJsonSchema;
      so.field = base + "json_schema";
      so.text = p.json_schema();
      break;
    case P::kJsonObject:
      if (p.json_object()) {
        so.kind = Kind::kJsonObject;
        so.field = base + "json_object";
      }
      break;
    case P::kRegex:
      so.kind = Kind::kRegex;
      so.field = base + "regex";
      so.text = p.regex();
      break;
    case P::kChoice:
      so.kind = Kind::kChoice;
      so.field = base + "choice";
      so.choices.assign(p.choice().choices().begin(), p.choice().choices().end());
      break;
    case P::kGrammar:
      so.kind = Kind::kGrammar;
      so.field = base + "grammar";
      so.text = p.grammar();
      break;
    case P::CONSTRAINT_NOT_SET:
      break;
  }
  return so;
}

absl::StatusOr<serving::GenerateRequest> ToEngineRequest(
    const std::string& request_id, const tessera::v1::SamplingParams& sampling,
    const tessera::v1::GenerationOptions& o, const serving::Engine& engine) {
  serving::GenerateRequest request;
  request.request_id = request_id;
  request.sampling = ToSampling(sampling);
  request.max_tokens = o.max_tokens();
  request.stop.assign(o.stop().begin(), o.stop().end());
  request.stop_token_ids.assign(o.stop_token_ids().begin(), o.stop_token_ids().end());
  request.ignore_eos = o.ignore_eos();
  request.logprobs = o.logprobs() || o.top_logprobs() > 0;
  request.top_logprobs = o.top_logprobs();
  request.cache_salt = o.cache_salt();
  if (absl::Status s = serving::ValidateRequestOptions(request, engine.info().n_vocab); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> grammar =
      serving::CompileStructuredOutput(ToStructuredOutput(o.structured_output()));
  if (!grammar.ok()) return grammar.status();
  request.grammar = *std::move(grammar);
  return request;
}

absl::StatusOr<std::vector<int32_t>> PromptTokens(const tessera::v1::GenerateRequest& request,
                                                  const serving::Engine& engine) {
  std::vector<int32_t> ids;
  switch (request.prompt_case()) {
    case tessera::v1::GenerateRequest::kText: {
      const bool add_special =
          request.has_add_special_tokens() ? request.add_special_tokens() : true;
      absl::StatusOr<std::vector<int32_t>> tokens =
          engine.PromptTokens(request.text(), add_special, request.parse_special_tokens());
      if (!tokens.ok()) return tokens.status();
      ids = *std::move(tokens);
      break;
    }
    case tessera::v1::GenerateRequest::kTokenIds:
      ids.assign(request.token_ids().ids().begin(), request.token_ids().ids().end());
      if (absl::Status s = CheckPromptIds(ids, engine.info().n_vocab); !s.ok()) return s;
      break;
    case tessera::v1::GenerateRequest::PROMPT_NOT_SET:
      return absl::InvalidArgumentError("prompt: expected `text` or `token_ids`");
  }
  if (ids.empty()) return absl::InvalidArgumentError("prompt: expected at least one token");
  return ids;
}

absl::StatusOr<std::vector<int32_t>> ChatPromptTokens(const tessera::v1::ChatRequest& request,
                                                      const serving::Engine& engine) {
  std::vector<serving::ChatMessage> messages;
  messages.reserve(request.messages_size());
  for (const tessera::v1::ChatMessage& m : request.messages()) {
    messages.push_back({m.role(), m.content()});
  }
  if (absl::Status s = serving::ValidateChatMessages(messages); !s.ok()) return s;
  absl::StatusOr<std::vector<int32_t>> ids = engine.ChatPromptTokens(messages, true);
  if (!ids.ok()) return ids.status();
  if (ids->empty()) return absl::InvalidArgumentError("messages: rendered to an empty prompt");
  return ids;
}

}  // namespace tessera::grpc_api
