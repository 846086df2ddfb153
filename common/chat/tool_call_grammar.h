// Forced tool calls: a GBNF grammar (common/grammar) of the tool calls a model may write when a
// request sets OpenAI's `tool_choice` to "required" or names a function. The calls are
// written in the markup of the model's own template (tool_calls.h names the formats) and
// their arguments follow the tools' parameter schemas (grammar/json_schema.h), so what the
// model writes under the grammar parses back (ParseChatOutput) into calls whose arguments
// validate against their schemas.
//
//   ToolCallGrammarOptions o;
//   o.format = "glm45";
//   o.tools = request["tools"];            // checked OpenAI tools
//   o.function = "get_weather";            // tool_choice names it; "" for "required"
//   o.special_token = [&](std::string_view text) { return vocab.SpecialId(text); };
//   absl::StatusOr<std::string> gbnf = ToolCallGbnf(o);
//
// What the grammar writes, per format (a call is one of the allowed tools):
//   glm45        <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>…</tool_call>, with
//                an optional newline after the name and after each tag pair (GLM-4.5/4.6
//                write them, 4.7 does not). A parameter whose schema type is or includes
//                "string" is written raw, as the template writes it (any text without '<',
//                or its enum / const values, its pattern, its format, or its length bounds);
//                the others as JSON of their schema. The required parameters come in the
//                schema's order, each optional one present or not.
//   deepseek_v31 <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>name<｜tool▁sep｜>{args}
//                <｜tool▁call▁end｜>…<｜tool▁calls▁end｜>
//   deepseek_v3  the same, each call
//   <｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json\n{args}
//                \n```<｜tool▁call▁end｜>
//   hermes       <tool_call>\n{"name": "…", "arguments": {…}}\n</tool_call>, calls separated by
//                a newline
//   llama3_json  {"name": "…", "parameters": {…}}: one call (the format has no list)
//   mistral      [TOOL_CALLS][{"name": "…", "arguments": {…}, "id": "<9 alphanumerics>"}, …]
// One call, or with `parallel` one or more. Before the calls nothing may come but, when the
// prompt left the model inside <think>, its reasoning and </think> (any text: the model
// thinks freely, then calls).
//
// Markers that are special tokens of the vocabulary (GLM's <tool_call>, DeepSeek's
// <｜tool▁sep｜>, ...) must be named by token id in the grammar: `special_token` says which
// texts are; the others are written as text.
//
// Errors are InvalidArgument: a format with no call markup ("none"), a named function not
// among the tools, a parameter schema the JSON Schema front end refuses (named as
// "tools[i].function.parameters at /properties/x: …"), a raw string keyword that cannot be
// written raw.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessera::chat {

struct ToolCallGrammarOptions {
  std::string format;
  // The request's OpenAI `tools` ([{type: "function", function: {name, parameters?}}]).
  nlohmann::ordered_json tools;
  // Only this function may be called ("" for any of the tools).
  std::string function;
  // More than one call may be written.
  bool parallel = true;
  // The prompt ends inside <think>: reasoning and </think> come first.
  bool starts_in_reasoning = false;
  // The id of the special token whose text is `text`, if the vocabulary has one.
  std::function<std::optional<int32_t>(std::string_view text)> special_token;
  // Whitespace allowed between JSON tokens of the arguments (JsonSchemaOptions).
  size_t max_whitespace = 4;
};

// The grammar (start rule `root`). See above for what it writes and the errors.
absl::StatusOr<std::string> ToolCallGbnf(const ToolCallGrammarOptions& options);

// `gbnf` (start rule `root`; a structured-output constraint) preceded by free reasoning and
// </think>, for a prompt that left the model inside <think>: the model thinks, then its answer
// follows the grammar (as vLLM applies structured output after the reasoning parser's end).
// The grammar's rules keep their meaning under new names where they collide. `special_token`
// as in ToolCallGrammarOptions. The text is assumed to be valid GBNF (ParseGbnf checks it).
std::string GbnfAfterReasoning(
    std::string_view gbnf,
    const std::function<std::optional<int32_t>(std::string_view text)>& special_token);

}  // namespace tessera::chat
