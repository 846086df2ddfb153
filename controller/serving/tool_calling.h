// Tool calling and reasoning for a chat request, whichever API it came through (the REST
// gateway's OpenAI fields, the gRPC ChatRequest): what the chat template receives beside the
// messages, how the output is parsed back (tool calls, reasoning, content), and for a forced
// call (`tool_choice` "required" or a named function) the grammar the output is decoded
// under.
//
//   ToolCalling tc;                       // from the request (checked by its API)
//   ChatTemplateExtras extras = TemplateExtras(tc);
//   prompt = engine.ChatPromptTokens(messages, true, extras);
//   absl::StatusOr<ChatOutputPlan> plan = PlanChatOutput(tc, settings, engine, prompt);
//   request.grammar = plan->grammar;      // "" unless a call is forced
//   parser = ChatOutputParser::Create(*plan->parse);   // when plan->parse is set
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/chat/tool_calls.h"
#include "controller/serving/engine.h"
#include "nlohmann/json.hpp"

namespace tessera::serving {

struct ToolCalling {
  // OpenAI's `tools` ([{type: "function", function: {name, description?, parameters?}}],
  // checked), or null.
  nlohmann::ordered_json tools;
  // "auto", "none", "required", or "function" with `function` naming it.
  std::string choice = "auto";
  std::string function;
  bool parallel = true;
  // Extra chat template variables (`chat_template_kwargs`: enable_thinking, ...), an object
  // or null.
  nlohmann::ordered_json template_kwargs;
  // Per message (parallel to the messages, or empty): an assistant message's `tool_calls`
  // and a tool message's `tool_call_id` / `name` as OpenAI writes them (null when none).
  std::vector<nlohmann::ordered_json> message_extras;
};

// What the daemon does with chat output (tesserad --tool-call-parser, --reasoning-parser).
struct ChatOutputSettings {
  std::string tool_call_format = "none";  // tool_calls.h's format names
  bool parse_reasoning = false;
};

// `tools` as OpenAI defines them: a list of {type: "function", function: {name (non-empty),
// description?, parameters? (an object)}}. INVALID_ARGUMENT naming the field
// ("tools[1].function.name").
absl::Status CheckTools(const nlohmann::ordered_json& tools);
// The choice against the tools: "required" needs tools, a named function must be one of
// them (`name_field` is the request's field for the name).
absl::Status CheckToolChoice(const ToolCalling& tc,
                             const std::string& name_field = "tool_choice.function.name");

// The template's variables beside the messages: `tools` and the kwargs, and the messages'
// tool-call fields.
ChatTemplateExtras TemplateExtras(const ToolCalling& tc);

struct ChatOutputPlan {
  // How the output is split into reasoning, content and calls; nullopt: it is all content.
  std::optional<chat::ChatOutputOptions> parse;
  // The grammar the output is decoded under (GBNF; "" when the model is free): a forced
  // call's, or the request's structured-output constraint — after free reasoning and
  // </think> when the prompt opened <think> and reasoning is parsed, so that a thinking model
  // thinks first and its answer (the content) follows the constraint.
  std::string grammar;
};

// `prompt` is the rendered chat prompt's ids (its end tells whether the model starts inside
// <think>); `constraint` the request's compiled structured-output grammar ("" when none) and
// `constraint_field` the field it came from. INVALID_ARGUMENT naming `tool_choice` or the tool
// (`tools[i].function.parameters`) when a forced call cannot be compiled (a format without
// call markup, a schema the grammar cannot write) or comes with a constraint.
absl::StatusOr<ChatOutputPlan> PlanChatOutput(const ToolCalling& tc,
                                              const ChatOutputSettings& settings,
                                              const Engine& engine,
                                              const std::vector<int32_t>& prompt,
                                              const std::string& constraint = "",
                                              const std::string& constraint_field = "");

}  // namespace tessera::serving
