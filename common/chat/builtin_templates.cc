#include "common/chat/builtin_templates.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"

namespace tessera::chat {
namespace {

struct Builtin {
  const char* name;
  const char* source;
};

// ChatML (Qwen, Yi, many fine-tunes).
constexpr const char* kChatml = R"JINJA({%- for message in messages -%}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- endif -%}
)JINJA";

// Meta Llama 3 / 3.x instruct, without tool calling.
constexpr const char* kLlama3 = R"JINJA({%- set loop_messages = messages -%}
{%- for message in loop_messages -%}
{%- set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' -%}
{%- if loop.index0 == 0 -%}{%- set content = bos_token + content -%}{%- endif -%}
{{- content -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%}
)JINJA";

// DeepSeek V3: system prompts first, then <｜User｜>/<｜Assistant｜> turns, tool calls and
// outputs in DeepSeek's markers; an assistant's <think> part is dropped.
constexpr const char* kDeepseek3 =
    R"JINJA({%- if not add_generation_prompt is defined -%}{%- set add_generation_prompt = false -%}{%- endif -%}
{%- set ns = namespace(is_tool=false, system_prompt='', is_first_sp=true) -%}
{%- for message in messages -%}
  {%- if message['role'] == 'system' -%}
    {%- if ns.is_first_sp -%}
      {%- set ns.system_prompt = ns.system_prompt + message['content'] -%}
      {%- set ns.is_first_sp = false -%}
    {%- else -%}
      {%- set ns.system_prompt = ns.system_prompt + '\n\n' + message['content'] -%}
    {%- endif -%}
  {%- endif -%}
{%- endfor -%}
{{- bos_token -}}{{- ns.system_prompt -}}
{%- for message in messages -%}
  {%- if message['role'] == 'user' -%}
    {%- set ns.is_tool = false -%}
    {{- '<｜User｜>' + message['content'] -}}
  {%- elif message['role'] == 'assistant' and message['tool_calls'] is defined and message['tool_calls'] -%}
    {%- set ns.is_tool = false -%}
    {{- '<｜Assistant｜>' + (message['content'] if message['content'] is string else '') + '<｜tool▁calls▁begin｜>' -}}
    {%- for tool in message['tool_calls'] -%}
      {%- set args = tool['function']['arguments'] -%}
      {{- '<｜tool▁call▁begin｜>function<｜tool▁sep｜>' + tool['function']['name'] + '\n```json\n' + (args if args is string else args | tojson) + '\n```<｜tool▁call▁end｜>' -}}
    {%- endfor -%}
    {{- '<｜tool▁calls▁end｜><｜end▁of▁sentence｜>' -}}
  {%- elif message['role'] == 'assistant' -%}
    {%- set content = message['content'] -%}
    {%- if '</think>' in content -%}{%- set content = content.split('</think>')[-1] -%}{%- endif -%}
    {%- if ns.is_tool -%}
      {{- '<｜tool▁outputs▁end｜>' + content + '<｜end▁of▁sentence｜>' -}}
      {%- set ns.is_tool = false -%}
    {%- else -%}
      {{- '<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>' -}}
    {%- endif -%}
  {%- elif message['role'] == 'tool' -%}
    {%- if not ns.is_tool -%}{{- '<｜tool▁outputs▁begin｜>' -}}{%- endif -%}
    {%- set ns.is_tool = true -%}
    {{- '<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>' -}}
  {%- endif -%}
{%- endfor -%}
{%- if ns.is_tool -%}{{- '<｜tool▁outputs▁end｜>' -}}{%- endif -%}
{%- if add_generation_prompt and not ns.is_tool -%}{{- '<｜Assistant｜>' -}}{%- endif -%}
)JINJA";

// GLM-4.5/4.6 (zai-org), the model's own template.
constexpr const char* kGlm4 = R"JINJA([gMASK]<sop>
{%- if tools -%}
<|system|>
# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{% for tool in tools %}
{{ tool | tojson(ensure_ascii=False) }}
{% endfor %}
</tools>

For each function call, output the function name and arguments within the following XML format:
<tool_call>{function-name}
<arg_key>{arg-key-1}</arg_key>
<arg_value>{arg-value-1}</arg_value>
<arg_key>{arg-key-2}</arg_key>
<arg_value>{arg-value-2}</arg_value>
...
</tool_call>{%- endif -%}
{%- macro visible_text(content) -%}
    {%- if content is string -%}
        {{- content }}
    {%- elif content is iterable and content is not mapping -%}
        {%- for item in content -%}
            {%- if item is mapping and item.type == 'text' -%}
                {{- item.text }}
            {%- elif item is string -%}
                {{- item }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{- content }}
    {%- endif -%}
{%- endmacro -%}
{%- set ns = namespace(last_user_index=-1) %}
{%- for m in messages %}
    {%- if m.role == 'user' %}
        {% set ns.last_user_index = loop.index0 -%}
    {%- endif %}
{%- endfor %}
{% for m in messages %}
{%- if m.role == 'user' -%}<|user|>
{{ visible_text(m.content) }}
{{- '/nothink' if (enable_thinking is defined and not enable_thinking and not visible_text(m.content).endswith("/nothink")) else '' -}}
{%- elif m.role == 'assistant' -%}
<|assistant|>
{%- set reasoning_content = '' %}
{%- set content = visible_text(m.content) %}
{%- if m.reasoning_content is string %}
    {%- set reasoning_content = m.reasoning_content %}
{%- else %}
    {%- if '</think>' in content %}
        {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
        {%- set content = content.split('</think>')[-1].lstrip('\n') %}
    {%- endif %}
{%- endif %}
{%- if loop.index0 > ns.last_user_index and reasoning_content -%}
{{ '\n<think>' + reasoning_content.strip() +  '</think>'}}
{%- else -%}
{{ '\n<think></think>' }}
{%- endif -%}
{%- if content.strip() -%}
{{ '\n' + content.strip() }}
{%- endif -%}
{% if m.tool_calls %}
{% for tc in m.tool_calls %}
{%- if tc.function %}
    {%- set tc = tc.function %}
{%- endif %}
{{ '\n<tool_call>' + tc.name }}
{% set _args = tc.arguments or {} %}
{% if _args is not mapping %}
    {{ raise_exception("Invalid tool call arguments passed: " + _args | string) }}
{% endif %}
{% for k, v in _args.items() %}
<arg_key>{{ k }}</arg_key>
<arg_value>{{ v | tojson(ensure_ascii=False) if v is not string else v }}</arg_value>
{% endfor %}
</tool_call>{% endfor %}
{% endif %}
{%- elif m.role == 'tool' -%}
{%- if m.content is string -%}
{%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
    {{- '<|observation|>' }}
{%- endif %}
{{- '\n<tool_response>\n' }}
{{- m.content }}
{{- '\n</tool_response>' }}
{%- else -%}
<|observation|>{% for tr in m.content %}

<tool_response>
{{ tr.output if tr.output is defined else tr }}
</tool_response>{% endfor -%}
{% endif -%}
{%- elif m.role == 'system' -%}
<|system|>
{{ visible_text(m.content) }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    <|assistant|>{{- '\n<think></think>' if (enable_thinking is defined and not enable_thinking) else '' -}}
{%- endif -%}
)JINJA";

constexpr Builtin kBuiltins[] = {
    {"chatml", kChatml}, {"llama3", kLlama3}, {"deepseek3", kDeepseek3}, {"glm4", kGlm4}};

}  // namespace

std::optional<std::string> BuiltinTemplate(std::string_view name) {
  for (const Builtin& b : kBuiltins) {
    if (name == b.name) return std::string(b.source);
  }
  return std::nullopt;
}

std::vector<std::string> BuiltinTemplateNames() {
  std::vector<std::string> names;
  for (const Builtin& b : kBuiltins) names.emplace_back(b.name);
  return names;
}

absl::StatusOr<std::string> ResolveChatTemplate(const std::string& name_or_path,
                                                const gguf::Metadata& metadata) {
  if (!name_or_path.empty()) {
    if (auto builtin = BuiltinTemplate(name_or_path)) return *builtin;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(name_or_path, ec)) {
      return absl::NotFoundError(
          "chat template '" + name_or_path + "': neither a built-in template (" +
          absl::StrJoin(BuiltinTemplateNames(), ", ") + ") nor a readable file");
    }
    std::ifstream in(name_or_path, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    if (!in.good() && !in.eof()) {
      return absl::NotFoundError("chat template file " + name_or_path + ": read failed");
    }
    return buf.str();
  }
  if (!metadata.Has("tokenizer.chat_template")) {
    return absl::NotFoundError(
        "model has no tokenizer.chat_template; choose one with --chat-template NAME|FILE "
        "(built-in: " +
        absl::StrJoin(BuiltinTemplateNames(), ", ") + ")");
  }
  return metadata.GetString("tokenizer.chat_template");
}

}  // namespace tessera::chat
