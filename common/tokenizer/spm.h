// SentencePiece-style tokenization as llama.cpp does it for `tokenizer.ggml.model = llama`:
// greedy merges of adjacent pieces by the score of the token they form, with byte fallback.
#pragma once

#include <string_view>
#include <vector>

#include "common/tokenizer/vocabulary.h"

namespace tessera::tokenizer {

class SpmEncoder {
 public:
  // `vocab` must outlive the encoder.
  explicit SpmEncoder(const Vocabulary* vocab);

  // Appends the tokens of `text`, which must already be escaped (spaces as U+2581 "▁") and
  // carry the dummy prefix where wanted. Starting from UTF-8 characters, repeatedly merges
  // the adjacent pair whose concatenation is the token with the highest score (leftmost on
  // ties); a final piece that is not a token is emitted as its `<0xNN>` byte tokens.
  // Thread-safe.
  void Encode(std::string_view text, std::vector<TokenId>* out) const;

 private:
  // One independent stretch of text (see split_at_spaces_).
  void EncodeChunk(std::string_view chunk, std::vector<TokenId>* out) const;

  const Vocabulary* vocab_;
  // True when no token has "▁" right after another character: then no merge can cross the
  // start of a "▁" run, and cutting the text there gives the same tokens, much faster
  // (small heaps instead of one over the whole input).
  bool split_at_spaces_ = false;
};

}  // namespace tessera::tokenizer
