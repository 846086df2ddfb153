// tessera chat-template: renders a chat template with a JSON context, exactly as
// HuggingFace's apply_chat_template would.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "common/chat/builtin_templates.h"
#include "common/chat/template.h"
#include "common/gguf/split.h"
#include "nlohmann/json.hpp"
#include "tools/commands.h"
#include "tools/format.h"

namespace tessera::cli {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kUsage[] =
    "usage: tessera chat-template (--model FILE | --template FILE.jinja | --chat-template NAME)\n"
    "                             --context FILE.json [--chat-template NAME|FILE]\n"
    "                             [--now 'YYYY-MM-DD HH:MM:SS']\n"
    "\n"
    "Renders a chat template and prints the prompt exactly (no newline added).\n"
    "\n"
    "  --model FILE          use the model's tokenizer.chat_template; its bos/eos tokens fill\n"
    "                        bos_token/eos_token when the context has none\n"
    "  --template FILE       a Jinja2 template file\n"
    "  --chat-template X     a built-in template (chatml, llama3, deepseek3, glm4) or a file;\n"
    "                        overrides the model's own\n"
    "  --context FILE        JSON object of render variables (messages, add_generation_prompt,\n"
    "                        bos_token, eos_token, tools, extras such as enable_thinking);\n"
    "                        '-' reads stdin. tools and documents default to null and\n"
    "                        add_generation_prompt to false, as HuggingFace passes them;\n"
    "                        a \"kwargs\" object is merged in (a conformance case works as is)\n"
    "  --now TIME            the time strftime_now() formats (default: now, local time)\n"
    "\n"
    "A template that calls raise_exception(msg) exits 1 with msg on stderr.\n";

int Usage(const std::string& problem) {
  std::fprintf(stderr, "tessera chat-template: %s\n\n%s", problem.c_str(), kUsage);
  return 2;
}

int Fail(const std::string& problem) {
  std::fprintf(stderr, "tessera chat-template: %s\n", problem.c_str());
  return 1;
}

// The text of special token `which` ("bos"/"eos") from the model's vocabulary, if any.
std::optional<std::string> SpecialToken(const gguf::Metadata& md, const std::string& which) {
  auto id = md.GetInt("tokenizer.ggml." + which + "_token_id");
  if (!id.ok()) return std::nullopt;
  auto tokens = md.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok() || *id < 0 || *id >= static_cast<int64_t>(tokens->size())) return std::nullopt;
  return (*tokens)[*id];
}

}  // namespace

int RunChatTemplate(const Args& args) {
  std::string model_path, template_path, chat_template, context_path, now_text;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::string* target = a == "--model"           ? &model_path
                          : a == "--template"      ? &template_path
                          : a == "--chat-template" ? &chat_template
                          : a == "--context"       ? &context_path
                          : a == "--now"           ? &now_text
                                                   : nullptr;
    if (target == nullptr) return Usage("unknown argument '" + a + "'");
    if (i + 1 >= args.size()) return Usage(a + " needs a value");
    *target = args[++i];
  }
  if (context_path.empty()) return Usage("--context FILE.json is required");
  if (!model_path.empty() && !template_path.empty()) {
    return Usage("give --model or --template, not both");
  }
  if (model_path.empty() && template_path.empty() && chat_template.empty()) {
    return Usage("one of --model, --template or --chat-template is required");
  }

  std::tm now{};
  if (!now_text.empty()) {
    int y, mo, d, h, mi, s;
    if (std::sscanf(now_text.c_str(), "%d-%d-%d %d:%d:%d", &y, &mo, &d, &h, &mi, &s) != 6) {
      return Usage("--now expects 'YYYY-MM-DD HH:MM:SS', got '" + now_text + "'");
    }
    now = chat::MakeTime(y, mo, d, h, mi, s);
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }

  absl::StatusOr<std::string> context_text = ReadWholeFile(context_path);
  if (!context_text.ok()) return Fail(std::string(context_text.status().message()));
  Json context = Json::parse(*context_text, nullptr, /*allow_exceptions=*/false);
  if (context.is_discarded() || !context.is_object()) {
    return Fail("context " + context_path + ": expected a JSON object");
  }
  chat::AddHuggingFaceDefaults(&context);

  std::string source;
  if (!model_path.empty()) {
    auto model = gguf::GgufModel::Open(model_path);
    if (!model.ok()) return Fail(std::string(model.status().message()));
    auto resolved = chat::ResolveChatTemplate(chat_template, model->metadata());
    if (!resolved.ok()) return Fail(model_path + ": " + std::string(resolved.status().message()));
    source = *std::move(resolved);
    for (const char* which : {"bos", "eos"}) {
      std::string key = std::string(which) + "_token";
      if (context.contains(key)) continue;
      if (auto tok = SpecialToken(model->metadata(), which)) context[key] = *tok;
    }
  } else if (!template_path.empty()) {
    absl::StatusOr<std::string> read = ReadWholeFile(template_path);
    if (!read.ok()) return Fail(std::string(read.status().message()));
    source = *std::move(read);
  } else {
    auto resolved = chat::ResolveChatTemplate(chat_template, gguf::Metadata());
    if (!resolved.ok()) return Fail(std::string(resolved.status().message()));
    source = *std::move(resolved);
  }

  auto tmpl = chat::ChatTemplate::Parse(source);
  if (!tmpl.ok()) return Fail(std::string(tmpl.status().message()));
  auto rendered = tmpl->Render(context, now);
  if (!rendered.ok()) return Fail(std::string(rendered.status().message()));
  std::fwrite(rendered->data(), 1, rendered->size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace tessera::cli
