#include "common/tokenizer/streaming_detokenizer.h"

#include "absl/strings/str_cat.h"
#include "common/tokenizer/utf8.h"

namespace tessera::tokenizer {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer* tokenizer, DecodeOptions options)
    : tokenizer_(tokenizer), options_(options) {
  strip_next_ = options_.strip_leading_space.value_or(tokenizer_->vocab().add_space_prefix());
}

absl::Status StreamingDetokenizer::Feed(TokenId id, std::string* out) {
  if (!tokenizer_->vocab().Contains(id)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token id ", id, " is outside the vocabulary of ", tokenizer_->vocab().size(), " tokens"));
  }
  std::string_view piece = tokenizer_->Piece(id, options_.render_special);
  if (strip_next_ && piece.starts_with(' ')) piece.remove_prefix(1);
  strip_next_ = false;
  pending_.append(piece);
  const size_t complete = CompleteUtf8Prefix(pending_);
  out->append(pending_, 0, complete);
  pending_.erase(0, complete);
  return absl::OkStatus();
}

void StreamingDetokenizer::Finish(std::string* out) {
  out->append(pending_);
  pending_.clear();
  strip_next_ = options_.strip_leading_space.value_or(tokenizer_->vocab().add_space_prefix());
}

}  // namespace tessera::tokenizer
