// Splitting input text at literal occurrences of special tokens (spec 14.2 step 1), before
// the pre-tokenizer or SentencePiece ever see it.
#pragma once

#include <string_view>
#include <vector>

#include "common/tokenizer/vocabulary.h"

namespace tessera::tokenizer {

// A piece of input: either raw text still to tokenize (token == kNoToken) or one special
// token matched literally.
struct Fragment {
  std::string_view text;
  TokenId token = kNoToken;
};

// Partitions `text` as llama.cpp does: special tokens are taken longest first, each one
// splitting every remaining raw fragment at all its occurrences. USER_DEFINED tokens are
// always matched; CONTROL and UNKNOWN tokens only when `parse_special`. Tokens with the
// lstrip/rstrip attribute eat ASCII whitespace beside them. Raw fragments are never empty.
std::vector<Fragment> PartitionSpecialTokens(const Vocabulary& vocab, std::string_view text,
                                             bool parse_special);

}  // namespace tessera::tokenizer
