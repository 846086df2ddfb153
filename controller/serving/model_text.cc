#include "controller/serving/model_text.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/chat/builtin_templates.h"

namespace tessera::serving {

absl::StatusOr<ModelText> LoadModelText(const gguf::Metadata& metadata,
                                        const std::string& chat_template_override) {
  absl::StatusOr<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::FromMetadata(metadata);
  if (!tok.ok()) return tok.status();
  ModelText out{*std::move(tok), std::nullopt, "", {}};
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
  return out;
}

}  // namespace tessera::serving
