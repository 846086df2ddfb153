// What the serving engine needs from a model's metadata to turn text into tokens and back:
// its tokenizer, its chat template and its end-of-generation ids. Read by tesserad from
// the GGUF header (no weights).
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/chat/template.h"
#include "common/gguf/metadata.h"
#include "common/tokenizer/tokenizer.h"
#include "controller/serving/engine.h"
#include "nlohmann/json.hpp"

namespace tessera::serving {

struct ModelText {
  tokenizer::Tokenizer tokenizer;
  // Absent when the model carries none (or one the template engine refuses) and no override
  // was given: chat requests then fail, completions work.
  std::optional<chat::ChatTemplate> chat_template;
  std::string chat_template_problem;  // why there is none, for the startup log
  std::vector<int32_t> eog_token_ids;
  // The chat template's source ("" when there is none), e.g. to detect its tool-call format.
  std::string chat_template_source;
};

// `chat_template_override`: empty for the model's own template, else a built-in name or a
// file (common/chat/builtin_templates.h). Errors: the tokenizer cannot be built from the
// metadata; the override cannot be read or parsed.
absl::StatusOr<ModelText> LoadModelText(const gguf::Metadata& metadata,
                                        const std::string& chat_template_override);

// Bounds and mode of prompt preparation (EngineOptions resolves them).
struct PromptLimits {
  uint64_t max_prompt_bytes = 0;  // > 0
  int64_t max_chat_messages = 0;  // > 0
  // Special-token strings in request text become special tokens (the old behaviour).
  bool parse_special_in_content = false;
};

// The chat template's variables for `messages`, as HuggingFace's apply_chat_template passes
// them, with the tokenizer's BOS and EOS texts.
// With `extras`, its variables and message fields are merged in (see ChatTemplateExtras; a
// tool call's `function.arguments` string that is a JSON object is passed as that object,
// as templates iterate it). Malformed extras JSON is ignored.
nlohmann::ordered_json ChatVariables(const tokenizer::Tokenizer& tokenizer,
                                     const std::vector<ChatMessage>& messages,
                                     bool add_generation_prompt,
                                     const ChatTemplateExtras* extras = nullptr);

// A chat prompt's token ids: the message count and contents checked against `limits`, the
// template rendered (stopping once the prompt outgrows max_prompt_bytes) with the request's
// bytes tracked, then tokenized with special tokens parsed only in the template's own text
// (everywhere with parse_special_in_content). `now` (null: the local time) is what
// strftime_now() formats. INVALID_ARGUMENT naming the limit; the template's own errors.
absl::StatusOr<std::vector<int32_t>> ChatPromptTokens(const tokenizer::Tokenizer& tokenizer,
                                                      const chat::ChatTemplate& chat_template,
                                                      const std::vector<ChatMessage>& messages,
                                                      bool add_generation_prompt,
                                                      const PromptLimits& limits,
                                                      const std::tm* now = nullptr,
                                                      const ChatTemplateExtras* extras = nullptr);

// A completion prompt's token ids: its size checked, BOS added when `add_special` (not twice),
// special-token strings parsed only with `parse_special` or parse_special_in_content.
absl::StatusOr<std::vector<int32_t>> CompletionPromptTokens(const tokenizer::Tokenizer& tokenizer,
                                                            const std::string& text,
                                                            bool add_special, bool parse_special,
                                                            const PromptLimits& limits);

}  // namespace tessera::serving
