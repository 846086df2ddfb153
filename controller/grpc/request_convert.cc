#include "controller/grpc/request_convert.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "controller/serving/request_validation.h"
#include "controller/serving/structured_output.h"

namespace tessera::grpc_api {
namespace {

using ojson = nlohmann::ordered_json;

// `text` parsed as a JSON object (key order kept); null when empty. INVALID_ARGUMENT naming
// `field` when it is not JSON, or not an object.
absl::StatusOr<ojson> JsonObjectField(const std::string& text, const std::string& field,
                                      const char* what) {
  if (text.empty()) return ojson(nullptr);
  ojson value;
  try {
    value = ojson::parse(text);
  } catch (const ojson::parse_error& e) {
    // The byte, not the parser's message: that quotes the input, which may be huge.
    return serving::InvalidField(
        field,
        absl::StrCat(field, ": expected ", what,
                     " as JSON text, got invalid JSON (a syntax error at byte ", e.byte, ")"));
  }
  if (!value.is_object()) {
    return serving::InvalidField(
        field,
        absl::StrCat(field, ": expected ", what, " as JSON text, got a JSON ", value.type_name()));
  }
  return value;
}

// serving's tool checks name OpenAI's fields; a Chat call names the request's own where they
// differ (parameters_json, tool_choice_function).
absl::Status InRequestTerms(absl::Status status) {
  if (status.ok()) return status;
  const std::string field = serving::FieldOf(status);
  std::string ours = field;
  if (absl::EndsWith(field, ".function.parameters")) {
    ours += "_json";
  } else if (field == "tool_choice.function.name") {
    ours = "tool_choice_function";
  }
  if (ours == field) return status;
  return serving::InvalidField(ours, absl::StrCat(ours, ": ", status.message()));
}

absl::StatusOr<ojson> ToolsJson(const tessera::v1::ChatRequest& request) {
  if (request.tools().empty()) return ojson(nullptr);
  ojson tools = ojson::array();
  for (int i = 0; i < request.tools_size(); ++i) {
    const tessera::v1::Tool& tool = request.tools(i);
    const tessera::v1::FunctionDefinition& fn = tool.function();
    ojson function = {{"name", fn.name()}};
    if (!fn.description().empty()) function["description"] = fn.description();
    const std::string field = absl::StrCat("tools[", i, "].function.parameters_json");
    absl::StatusOr<ojson> parameters =
        JsonObjectField(fn.parameters_json(), field, "a JSON Schema object");
    if (!parameters.ok()) return parameters.status();
    if (!parameters->is_null()) function["parameters"] = *std::move(parameters);
    tools.push_back({{"type", tool.type().empty() ? "function" : tool.type()},
                     {"function", std::move(function)}});
  }
  if (absl::Status s = serving::CheckTools(tools); !s.ok()) return InRequestTerms(s);
  return tools;
}

absl::Status ReadToolChoice(const tessera::v1::ChatRequest& request, serving::ToolCalling* tc) {
  const std::string& choice = request.tool_choice();
  const std::string& function = request.tool_choice_function();
  if (!function.empty()) {
    if (!choice.empty() && choice != "function") {
      return serving::InvalidField(
          "tool_choice", absl::StrCat("tool_choice: expected empty (or \"function\") with "
                                      "tool_choice_function, got '",
                                      choice, "'"));
    }
    tc->choice = "function";
    tc->function = function;
  } else if (choice == "function") {
    return serving::InvalidField(
        "tool_choice_function",
        "tool_choice_function: expected the function's name with tool_choice \"function\"");
  } else if (choice.empty() || choice == "auto" || choice == "none" || choice == "required") {
    tc->choice = choice.empty() ? "auto" : choice;
  } else {
    return serving::InvalidField(
        "tool_choice",
        absl::StrCat("tool_choice: expected auto, none, required (or a function named by "
                     "tool_choice_function), got '",
                     choice, "'"));
  }
  return InRequestTerms(serving::CheckToolChoice(*tc));
}

// An assistant message's tool_calls as OpenAI writes them ([{id, type, function: {name,
// arguments}}], arguments as JSON text).
absl::StatusOr<ojson> ToolCallsJson(const tessera::v1::ChatMessage& m, const std::string& path) {
  ojson calls = ojson::array();
  for (int j = 0; j < m.tool_calls_size(); ++j) {
    const tessera::v1::ToolCall& call = m.tool_calls(j);
    const std::string p = absl::StrCat(path, ".tool_calls[", j, "]");
    if (!call.type().empty() && call.type() != "function") {
      return serving::InvalidField(
          p + ".type", absl::StrCat(p, ".type: expected \"function\", got '", call.type(), "'"));
    }
    if (call.function().name().empty()) {
      return serving::InvalidField(p + ".function.name",
                                   absl::StrCat(p, ".function.name: expected a function name"));
    }
    const std::string& arguments = call.function().arguments();
    absl::StatusOr<ojson> parsed =
        JsonObjectField(arguments, p + ".function.arguments", "a JSON object");
    if (!parsed.ok()) return parsed.status();
    calls.push_back({{"id", call.id()},
                     {"type", "function"},
                     {"function",
                      {{"name", call.function().name()},
                       {"arguments", arguments.empty() ? std::string("{}") : arguments}}}});
  }
  return calls;
}

// A message's fields beyond role and content (null when none), checked against its role.
absl::StatusOr<ojson> MessageExtras(const tessera::v1::ChatMessage& m, size_t index) {
  const std::string path = absl::StrCat("messages[", index, "]");
  const bool assistant = m.role() == "assistant";
  auto only_in = [&](const char* field, const char* role) {
    return serving::InvalidField(absl::StrCat(path, ".", field),
                                 absl::StrCat(path, ".", field, ": only allowed in ", role,
                                              " messages, this is a ", m.role(), " message"));
  };
  ojson extras = nullptr;
  if (!m.tool_calls().empty()) {
    if (!assistant) return only_in("tool_calls", "assistant");
    absl::StatusOr<ojson> calls = ToolCallsJson(m, path);
    if (!calls.ok()) return calls.status();
    extras = {{"tool_calls", *std::move(calls)}};
  }
  if (!m.tool_call_id().empty()) {
    if (m.role() != "tool") return only_in("tool_call_id", "tool");
    if (extras.is_null()) extras = ojson::object();
    extras["tool_call_id"] = m.tool_call_id();
  }
  if (!m.name().empty()) {
    if (extras.is_null()) extras = ojson::object();
    extras["name"] = m.name();
  }
  if (!m.reasoning_content().empty()) {
    if (!assistant) return only_in("reasoning_content", "assistant");
    if (extras.is_null()) extras = ojson::object();
    extras["reasoning_content"] = m.reasoning_content();
  }
  return extras;
}

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

absl::StatusOr<ChatInput> ToChatInput(const tessera::v1::ChatRequest& request) {
  ChatInput chat;
  chat.messages.reserve(request.messages_size());
  for (const tessera::v1::ChatMessage& m : request.messages()) {
    chat.messages.push_back({m.role(), m.content()});
  }
  if (absl::Status s = serving::ValidateChatMessages(chat.messages); !s.ok()) return s;
  serving::ToolCalling& tc = chat.tool_calling;
  bool any_extras = false;
  for (int i = 0; i < request.messages_size(); ++i) {
    absl::StatusOr<ojson> extras = MessageExtras(request.messages(i), i);
    if (!extras.ok()) return extras.status();
    any_extras = any_extras || !extras->is_null();
    tc.message_extras.push_back(*std::move(extras));
  }
  if (!any_extras) tc.message_extras.clear();
  absl::StatusOr<ojson> tools = ToolsJson(request);
  if (!tools.ok()) return tools.status();
  tc.tools = *std::move(tools);
  if (absl::Status s = ReadToolChoice(request, &tc); !s.ok()) return s;
  tc.parallel = request.has_parallel_tool_calls() ? request.parallel_tool_calls() : true;
  absl::StatusOr<ojson> kwargs = JsonObjectField(request.chat_template_kwargs_json(),
                                                 "chat_template_kwargs_json", "a JSON object");
  if (!kwargs.ok()) return kwargs.status();
  tc.template_kwargs = *std::move(kwargs);
  return chat;
}

absl::StatusOr<std::vector<int32_t>> ChatPromptTokens(const ChatInput& chat,
                                                      const serving::Engine& engine) {
  absl::StatusOr<std::vector<int32_t>> ids =
      engine.ChatPromptTokens(chat.messages, true, serving::TemplateExtras(chat.tool_calling));
  if (!ids.ok()) return ids.status();
  if (ids->empty()) return absl::InvalidArgumentError("messages: rendered to an empty prompt");
  return ids;
}

absl::StatusOr<PreparedCall> PrepareGenerate(const tessera::v1::GenerateRequest& request,
                                             const serving::Engine& engine) {
  if (absl::Status s = CheckModelName(request.model(), engine.info()); !s.ok()) return s;
  PreparedCall call;
  absl::StatusOr<serving::GenerateRequest> base =
      ToEngineRequest(request.request_id(), request.sampling(), request.options(), engine);
  if (!base.ok()) return base.status();
  call.request = *std::move(base);
  absl::StatusOr<std::vector<int32_t>> prompt = PromptTokens(request, engine);
  if (!prompt.ok()) return prompt.status();
  call.request.prompt_tokens = *std::move(prompt);
  return call;
}

absl::StatusOr<PreparedCall> PrepareChat(const tessera::v1::ChatRequest& request,
                                         const serving::Engine& engine,
                                         const serving::ChatOutputSettings& settings) {
  if (absl::Status s = CheckModelName(request.model(), engine.info()); !s.ok()) return s;
  PreparedCall call;
  absl::StatusOr<serving::GenerateRequest> base =
      ToEngineRequest(request.request_id(), request.sampling(), request.options(), engine);
  if (!base.ok()) return base.status();
  call.request = *std::move(base);
  absl::StatusOr<ChatInput> chat = ToChatInput(request);
  if (!chat.ok()) return chat.status();
  absl::StatusOr<std::vector<int32_t>> prompt = ChatPromptTokens(*chat, engine);
  if (!prompt.ok()) return prompt.status();
  absl::StatusOr<serving::ChatOutputPlan> plan =
      serving::PlanChatOutput(chat->tool_calling, settings, engine, *prompt, call.request.grammar,
                              ToStructuredOutput(request.options().structured_output()).field);
  if (!plan.ok()) return InRequestTerms(plan.status());
  call.request.grammar = std::move(plan->grammar);
  call.request.prompt_tokens = *std::move(prompt);
  call.output = std::move(plan->parse);
  return call;
}

}  // namespace tessera::grpc_api
