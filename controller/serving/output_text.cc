#include "controller/serving/output_text.h"

#include <utility>

namespace tessera::serving {
namespace {

tokenizer::DecodeOptions GeneratedTextOptions() {
  tokenizer::DecodeOptions o;
  // As vLLM's skip_special_tokens default: EOS / EOT and template markers are not text.
  o.render_special = false;
  // Generated tokens continue the prompt: a SentencePiece word's leading space is real.
  o.strip_leading_space = false;
  return o;
}

}  // namespace

OutputText::OutputText(const tokenizer::Tokenizer* tokenizer, std::vector<std::string> stops)
    : detokenizer_(tokenizer, GeneratedTextOptions()), stops_(std::move(stops)) {}

bool OutputText::Append(int32_t token, std::string* out) {
  if (stops_.stopped()) return true;
  std::string bytes;
  if (!detokenizer_.Feed(token, &bytes).ok()) return false;
  std::string text;
  utf8_.Append(bytes, &text);
  return stops_.Append(text, out);
}

void OutputText::Finish(std::string* out) {
  if (stops_.stopped()) return;
  std::string bytes, text;
  detokenizer_.Finish(&bytes);
  utf8_.Append(bytes, &text);
  utf8_.Finish(&text);
  if (stops_.Append(text, out)) return;
  stops_.Flush(out);
}

}  // namespace tessera::serving
