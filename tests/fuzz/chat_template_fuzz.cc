// libFuzzer target for the chat template engine: any bytes as a template, parsed and (when
// they parse) rendered with a small fixed conversation. Templates come from model files, so
// every failure must be a Status, never a crash, a hang or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/chat/template.h"
#include "nlohmann/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json* vars =
      new nlohmann::ordered_json(nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": "Hi \u00e9 \u65e5"},
                 {"role": "assistant", "content": "<think>x</think>Hello", "reasoning_content": "r",
                  "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
                 {"role": "tool", "content": "{\"ok\": true}"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "documents": null})"));
  std::string_view source(reinterpret_cast<const char*>(data), size);
  auto tmpl = tessera::chat::ChatTemplate::Parse(source);
  if (!tmpl.ok()) return 0;
  auto out = tmpl->Render(*vars, tessera::chat::MakeTime(2026, 1, 15, 12, 0, 0));
  (void)out;
  return 0;
}
