#include "controller/serving/model_text.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/chat/builtin_templates.h"

namespace tessera::serving {

absl::StatusOr<ModelText> LoadModelText(const gguf::Metadata& metadata,
                                        const std::string& chat_template_override) {
  absl::StatusOr<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::FromMetadata(metadata);
  if (!tok.ok()) return tok.status();
  ModelText out{*std::move(tok), std::nullopt, "", {}, ""};
  for (int32_t id = 0; id < out.tokenizer.vocab().size(); ++id) {
    if (out.tokenizer.vocab().IsEndOfGeneration(id)) out.eog_token_ids.push_back(id);
  }

  absl::StatusOr<std::string> source = chat::ResolveChatTemplate(chat_template_override, metadata);
  if (!source.ok()) {
    if (!chat_template_override.empty()) return source.status();
    out.chat_template_problem = std::string(source.status().message());
    return out;
  }
  absl::StatusOr<chat::ChatTemplate> tmpl = chat::ChatTemplate::Parse(*source);
  if (!tmpl.ok()) {
    const std::string what = chat_template_override.empty()
                                 ? std::string("the model's chat template")
                                 : absl::StrCat("chat template ", chat_template_override);
    if (!chat_template_override.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", tmpl.status().message()));
    }
    out.chat_template_problem = absl::StrCat(what, ": ", tmpl.status().message());
    return out;
  }
  out.chat_template = *std::move(tmpl);
  out.chat_template_source = *std::move(source);
  return out;
}

nlohmann::ordered_json ChatVariables(const tokenizer::Tokenizer& tokenizer,
                                     const std::vector<ChatMessage>& messages,
                                     bool add_generation_prompt, const ChatTemplateExtras* extras) {
  using ojson = nlohmann::ordered_json;
  ojson vars;
  vars["messages"] = ojson::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    ojson message = {{"role", m.role}, {"content", m.content}};
    if (extras != nullptr && i < extras->message_fields.size() &&
        !extras->message_fields[i].empty()) {
      ojson fields = ojson::parse(extras->message_fields[i], nullptr, false);
      if (fields.is_object()) {
        for (auto& [key, value] : fields.items()) {
          if (key == "role" || key == "content") continue;
          if (key == "tool_calls" && value.is_array()) {
            for (ojson& call : value) {
              if (!call.is_object() || !call.contains("function")) continue;
              ojson& fn = call["function"];
              if (fn.is_object() && fn.contains("arguments") && fn["arguments"].is_string()) {
                ojson args = ojson::parse(fn["arguments"].get<std::string>(), nullptr, false);
                if (args.is_object()) fn["arguments"] = std::move(args);
              }
            }
          }
          message[key] = value;
        }
      }
    }
    vars["messages"].push_back(std::move(message));
  }
  vars["add_generation_prompt"] = add_generation_prompt;
  if (extras != nullptr && !extras->vars.empty()) {
    ojson extra_vars = ojson::parse(extras->vars, nullptr, false);
    if (extra_vars.is_object()) {
      for (auto& [key, value] : extra_vars.items()) {
        if (vars.contains(key)) continue;
        vars[key] = value;
      }
    }
  }
  const tokenizer::SpecialTokenIds& sp = tokenizer.vocab().special();
  vars["bos_token"] = sp.bos >= 0 ? std::string(tokenizer.Piece(sp.bos)) : "";
  vars["eos_token"] = sp.eos >= 0 ? std::string(tokenizer.Piece(sp.eos)) : "";
  chat::AddHuggingFaceDefaults(&vars);
  return vars;
}

absl::StatusOr<std::vector<int32_t>> ChatPromptTokens(
    const tokenizer::Tokenizer& tokenizer, const chat::ChatTemplate& chat_template,
    const std::vector<ChatMessage>& messages, bool add_generation_prompt,
    const PromptLimits& limits, const std::tm* now, const ChatTemplateExtras* extras) {
  if (static_cast<int64_t>(messages.size()) > limits.max_chat_messages) {
    return absl::InvalidArgumentError(absl::StrCat("the chat has ", messages.size(),
                                                   " messages, more than max-chat-messages (",
                                                   limits.max_chat_messages, ")"));
  }
  uint64_t content_bytes = 0;
  for (const ChatMessage& m : messages) content_bytes += m.content.size();
  if (content_bytes > limits.max_prompt_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the messages' contents are ", content_bytes,
                                                   " bytes, more than max-prompt-bytes (",
                                                   limits.max_prompt_bytes, ")"));
  }
  const nlohmann::ordered_json vars =
      ChatVariables(tokenizer, messages, add_generation_prompt, extras);
  const std::vector<std::string> request_keys = {"messages", "tools", "documents"};
  absl::StatusOr<chat::RenderedPrompt> prompt =
      now != nullptr
          ? chat_template.RenderTracked(vars, *now, request_keys, limits.max_prompt_bytes)
          : chat_template.RenderTracked(vars, request_keys, limits.max_prompt_bytes);
  if (!prompt.ok()) {
    if (absl::IsOutOfRange(prompt.status())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the rendered chat prompt exceeds max-prompt-bytes (", limits.max_prompt_bytes, ")"));
    }
    return prompt.status();
  }
  tokenizer::EncodeOptions o;
  // The template writes the special tokens it wants (BOS included) itself; those it writes
  // are parsed, those that came from the request are text.
  o.add_special = false;
  o.parse_special = true;
  if (!limits.parse_special_in_content) o.plain_text_ranges = prompt->request_spans;
  return tokenizer.Encode(prompt->text, o);
}

absl::StatusOr<std::vector<int32_t>> CompletionPromptTokens(const tokenizer::Tokenizer& tokenizer,
                                                            const std::string& text,
                                                            bool add_special, bool parse_special,
                                                            const PromptLimits& limits) {
  if (text.size() > limits.max_prompt_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt is ", text.size(),
                                                   " bytes, more than max-prompt-bytes (",
                                                   limits.max_prompt_bytes, ")"));
  }
  tokenizer::EncodeOptions o;
  o.add_special = add_special;
  o.parse_special = parse_special || limits.parse_special_in_content;
  o.skip_duplicate_bos = true;
  return tokenizer.Encode(text, o);
}

}  // namespace tessera::serving
