#include "controller/serving/tool_calling.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/chat/tool_call_grammar.h"
#include "controller/serving/request_validation.h"

namespace tessera::serving {

absl::Status CheckTools(const nlohmann::ordered_json& tools) {
  if (tools.is_null()) return absl::OkStatus();
  if (!tools.is_array()) return InvalidField("tools", "'tools' must be a list of tools");
  for (size_t i = 0; i < tools.size(); ++i) {
    const nlohmann::ordered_json& t = tools[i];
    const std::string p = absl::StrCat("tools[", i, "]");
    if (!t.is_object()) return InvalidField(p, absl::StrCat("'", p, "' must be an object"));
    auto type = t.find("type");
    if (type == t.end() || !type->is_string() || *type != "function") {
      return InvalidField(p + ".type", absl::StrCat("'", p, ".type' must be 'function'"));
    }
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) {
      return InvalidField(p + ".function", absl::StrCat("'", p, ".function' must be an object"));
    }
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty()) {
      return InvalidField(p + ".function.name",
                          absl::StrCat("'", p, ".function.name' must be a non-empty string"));
    }
    auto parameters = fn->find("parameters");
    if (parameters != fn->end() && !parameters->is_null() && !parameters->is_object()) {
      return InvalidField(p + ".function.parameters",
                          absl::StrCat("'", p, ".function.parameters' must be an object"));
    }
    auto description = fn->find("description");
    if (description != fn->end() && !description->is_null() && !description->is_string()) {
      return InvalidField(p + ".function.description",
                          absl::StrCat("'", p, ".function.description' must be a string"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckToolChoice(const ToolCalling& tc, const std::string& name_field) {
  const bool have_tools = tc.tools.is_array() && !tc.tools.empty();
  if (tc.choice == "required" && !have_tools) {
    return InvalidField("tool_choice", "'tool_choice' 'required' needs a non-empty 'tools'");
  }
  if (tc.choice == "function") {
    bool known = false;
    if (have_tools) {
      for (const nlohmann::ordered_json& t : tc.tools) {
        known = known || t["function"]["name"] == tc.function;
      }
    }
    if (!known) {
      return InvalidField(name_field, absl::StrCat("'tool_choice' names the function '",
                                                   tc.function, "', which is not in 'tools'"));
    }
  }
  return absl::OkStatus();
}

ChatTemplateExtras TemplateExtras(const ToolCalling& tc) {
  ChatTemplateExtras extras;
  if (!tc.tools.is_null() || !tc.template_kwargs.is_null()) {
    nlohmann::ordered_json vars = nlohmann::ordered_json::object();
    if (!tc.tools.is_null()) vars["tools"] = tc.tools;
    if (tc.template_kwargs.is_object()) {
      for (const auto& [key, value] : tc.template_kwargs.items()) {
        if (!vars.contains(key)) vars[key] = value;
      }
    }
    extras.vars = vars.dump();
  }
  for (const nlohmann::ordered_json& fields : tc.message_extras) {
    extras.message_fields.push_back(fields.is_null() ? std::string() : fields.dump());
  }
  return extras;
}

absl::StatusOr<ChatOutputPlan> PlanChatOutput(const ToolCalling& tc,
                                              const ChatOutputSettings& settings,
                                              const Engine& engine,
                                              const std::vector<int32_t>& prompt,
                                              const std::string& constraint,
                                              const std::string& constraint_field) {
  ChatOutputPlan plan;
  const bool tools = tc.tools.is_array() && !tc.tools.empty() && tc.choice != "none";
  const bool forced = tools && (tc.choice == "required" || tc.choice == "function");
  chat::ChatOutputOptions o;
  if (tools) {
    o.format = settings.tool_call_format;
    o.tools = tc.tools;
    if (!tc.parallel) o.max_calls = 1;
  }
  o.parse_reasoning = settings.parse_reasoning;
  if (o.parse_reasoning) {
    // Whether the generation prompt opened <think>: its last few tokens tell.
    const size_t tail = std::min<size_t>(prompt.size(), 8);
    absl::StatusOr<std::string> end = engine.Detokenize(
        std::vector<int32_t>(prompt.end() - static_cast<std::ptrdiff_t>(tail), prompt.end()));
    o.starts_in_reasoning = end.ok() && chat::PromptEndsInReasoning(*end);
  }
  auto special = [&engine](std::string_view text) { return engine.SpecialTokenId(text); };
  if (forced && !constraint.empty()) {
    return InvalidField("tool_choice",
                        absl::StrCat("tool_choice: a forced tool call is decoded under its own "
                                     "grammar; '",
                                     constraint_field, "' cannot constrain the same output"));
  }
  if (!constraint.empty()) {
    plan.grammar =
        o.starts_in_reasoning ? chat::GbnfAfterReasoning(constraint, special) : constraint;
  }
  if (forced) {
    chat::ToolCallGrammarOptions g;
    g.format = settings.tool_call_format;
    g.tools = tc.tools;
    g.function = tc.choice == "function" ? tc.function : "";
    // A named function is called once (as vLLM does); "required" may call several tools
    // unless parallel_tool_calls is false.
    g.parallel = tc.parallel && tc.choice != "function";
    g.starts_in_reasoning = o.starts_in_reasoning;
    g.special_token = special;
    absl::StatusOr<std::string> gbnf = chat::ToolCallGbnf(g);
    if (!gbnf.ok()) {
      const std::string message(gbnf.status().message());
      if (message.rfind("tools[", 0) == 0) {
        return InvalidField(message.substr(0, message.find_first_of(" :")), message);
      }
      return InvalidField("tool_choice", absl::StrCat("'tool_choice' cannot be forced: ", message));
    }
    plan.grammar = *std::move(gbnf);
    // Valid by construction: the arguments can be streamed as they are read.
    o.stream_arguments = true;
  }
  if (o.format != "none" || o.parse_reasoning) plan.parse = std::move(o);
  return plan;
}

}  // namespace tessera::serving
