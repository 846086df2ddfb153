// What the serving engine needs from a model's metadata to turn text into tokens and back:
// its tokenizer, its chat template and its end-of-generation ids. Read by tesserad from
// the GGUF header (no weights).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/chat/template.h"
#include "common/gguf/metadata.h"
#include "common/tokenizer/tokenizer.h"

namespace tessera::serving {

struct ModelText {
  tokenizer::Tokenizer tokenizer;
  // Absent when the model carries none (or one the template engine refuses) and no override
  // was given: chat requests then fail, completions work.
  std::optional<chat::ChatTemplate> chat_template;
  std::string chat_template_problem;  // why there is none, for the startup log
  std::vector<int32_t> eog_token_ids;
};

// `chat_template_override`: empty for the model's own template, else a built-in name or a
// file (common/chat/builtin_templates.h). Errors: the tokenizer cannot be built from the
// metadata; the override cannot be read or parsed.
absl::StatusOr<ModelText> LoadModelText(const gguf::Metadata& metadata,
                                        const std::string& chat_template_override);

}  // namespace tessera::serving
