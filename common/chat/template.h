// A chat template: a Jinja2 template rendered exactly as HuggingFace transformers'
// apply_chat_template renders it (ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, the loopcontrols extension, {% generation %}, raise_exception(),
// strftime_now() and a json.dumps-based tojson).
//
//   auto tmpl = ChatTemplate::Parse(source);          // once per model
//   auto prompt = tmpl->Render(variables, now);       // per request
//
// A prompt that is tokenized with control tokens parsed must not let request text become
// control tokens: RenderTracked also says which bytes of the prompt came from the request
// (message contents, tool definitions, documents...), so that the tokenizer can read those as
// plain text (tokenizer::EncodeOptions::plain_text_ranges) while the template's own markers
// stay control tokens.
//
// `variables` is a JSON object: messages, add_generation_prompt, bos_token, eos_token,
// tools, documents and any template-specific extras (enable_thinking...). JSON integers are
// Python ints, other numbers floats, objects keep their key order.
#pragma once

#include <cstddef>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessera::chat {

struct Stmt;

// A rendered prompt and where its bytes came from.
struct RenderedPrompt {
  std::string text;
  // Byte ranges [first, second) of `text` that came from request data: sorted, disjoint,
  // non-empty (and never touching: adjacent request bytes form one range).
  std::vector<std::pair<size_t, size_t>> request_spans;
};

class ChatTemplate {
 public:
  // Parses `source`. InvalidArgument "chat template line N: ..." for a syntax error, an
  // unknown filter or test, or a construct the engine does not support (include, import,
  // recursive loops...): such a template is refused, never rendered wrongly.
  static absl::StatusOr<ChatTemplate> Parse(std::string_view source);

  // Renders with `variables` (a JSON object); `now` is the time strftime_now() formats.
  // Const and self-contained: one parsed template may render on several threads at once.
  // A render is bounded (steps, output size, nesting, range() and repetition sizes) so a
  // hostile template fails with an error instead of holding a thread or its memory.
  // When the template calls raise_exception(msg) the result is FailedPrecondition whose
  // message is exactly msg; other run-time errors (undefined values misused, type errors)
  // are InvalidArgument "chat template line N: ...".
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& variables,
                                     const std::tm& now) const;
  // As above with the current local time.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& variables) const;

  // As Render, also saying which bytes of the prompt came from the request: every string
  // found (recursively, object keys included) under the top-level variables named in
  // `request_keys` is request data. A request byte that reaches the prompt unchanged is in a
  // request span where it lands; text a filter rewrites from request data (upper, tojson,
  // indent, a list printed as a whole...) is request data as a whole; text the template
  // writes itself (literals, bos_token, numbers) is not, even when it equals request text.
  // Text and errors are Render's, plus one bound that only a hostile template reaches: more
  // than 4Mi separate request spans is InvalidArgument. With `max_output_bytes` > 0 the
  // render stops as soon as the prompt grows past it: OutOfRange "the rendered prompt exceeds
  // N bytes" (a server's prompt limit, enforced before the whole prompt is built).
  absl::StatusOr<RenderedPrompt> RenderTracked(
      const nlohmann::ordered_json& variables, const std::tm& now,
      const std::vector<std::string>& request_keys = {"messages", "tools", "documents"},
      size_t max_output_bytes = 0) const;
  // As above with the current local time.
  absl::StatusOr<RenderedPrompt> RenderTracked(
      const nlohmann::ordered_json& variables,
      const std::vector<std::string>& request_keys = {"messages", "tools", "documents"},
      size_t max_output_bytes = 0) const;

 private:
  struct Program;
  explicit ChatTemplate(std::shared_ptr<const Program> program) : program_(std::move(program)) {}

  // Renders with `variables` converted to engine values, those named in `request_keys`
  // tainted; null `request_keys` taints nothing.
  absl::StatusOr<RenderedPrompt> RenderWith(const nlohmann::ordered_json& variables,
                                            const std::tm& now,
                                            const std::vector<std::string>* request_keys,
                                            size_t max_output_bytes) const;

  std::shared_ptr<const Program> program_;
};

// Fills in what HuggingFace's apply_chat_template always passes when `variables` lacks it:
// tools = None, documents = None, add_generation_prompt = False. A "kwargs" object, as in a
// conformance case, is merged in without overriding existing keys.
void AddHuggingFaceDefaults(nlohmann::ordered_json* variables);

// A calendar time for Render's `now` (month 1-12), e.g. MakeTime(2026, 1, 15, 12, 0, 0).
std::tm MakeTime(int year, int month, int day, int hour, int minute, int second);

}  // namespace tessera::chat
