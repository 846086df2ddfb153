// SentencePiece-style tokenization as llama.cpp does it for `tokenizer.ggml.model = llama`:
// greedy merges of adjacent pieces by the score of the token they form, with byte fallback.
#pragma once

#include <string_view>
#include <vector>

#include "common/tokenizer/vocabulary.h"

namespace tessera::tokenizer {

// Appends the tokens of `text`, which must already be escaped (spaces as U+2581 "▁") and
// carry the dummy prefix where wanted. Starting from UTF-8 characters, repeatedly merges the
// adjacent pair whose concatenation is the token with the highest score (leftmost on ties);
// a final piece that is not a token is emitted as its `<0xNN>` byte tokens.
void SpmEncode(const Vocabulary& vocab, std::string_view text, std::vector<TokenId>* out);

}  // namespace tessera::tokenizer
