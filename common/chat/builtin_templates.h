// Chat templates for models that carry none, and the choice between a model's own
// template, a built-in one and a template file.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/metadata.h"

namespace tessera::chat {

// The Jinja source of a built-in template: "chatml", "llama3", "deepseek3" or "glm4";
// nullopt for another name.
std::optional<std::string> BuiltinTemplate(std::string_view name);
std::vector<std::string> BuiltinTemplateNames();

// The template source to use:
//  - `name_or_path` non-empty: a built-in name, else the contents of that file (NotFound
//    naming it and the built-in names when it is neither);
//  - otherwise the model's `tokenizer.chat_template` (NotFound, suggesting
//    --chat-template NAME|FILE, when the model has none).
absl::StatusOr<std::string> ResolveChatTemplate(const std::string& name_or_path,
                                                const gguf::Metadata& metadata);

}  // namespace tessera::chat
