// libFuzzer target for the chat template engine: any bytes as a template, parsed and (when
// they parse) rendered with a small fixed conversation, plainly and tracked (RenderTracked).
// Templates come from model files, so every failure must be a Status, never a crash, a hang
// or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <ctime>
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
  const std::tm now = tessera::chat::MakeTime(2026, 1, 15, 12, 0, 0);
  auto out = tmpl->Render(*vars, now);
  // Tracking the request's bytes never changes the text, and its spans are sorted, disjoint,
  // non-empty and inside the text.
  auto tracked = tmpl->RenderTracked(*vars, now);
  if (out.ok() != tracked.ok()) std::abort();
  if (out.ok()) {
    if (tracked->text != *out) std::abort();
    size_t end = 0;
    for (const auto& [first, last] : tracked->request_spans) {
      if (first < end || last <= first || last > out->size()) std::abort();
      end = last;
    }
  }
  return 0;
}
