// Splitting input text at literal occurrences of special tokens (spec 14.2 step 1), before
// the pre-tokenizer or SentencePiece ever see it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "common/tokenizer/vocabulary.h"

namespace tessera::tokenizer {

// A piece of input: either raw text still to tokenize (token == kNoToken) or one special
// token matched literally.
struct Fragment {
  std::string_view text;
  TokenId token = kNoToken;
};

class SpecialTokenMatcher {
 public:
  // `vocab` must outlive the matcher.
  explicit SpecialTokenMatcher(const Vocabulary* vocab);

  // Partitions `text` as llama.cpp does: special tokens are taken longest first, each one
  // splitting every remaining raw fragment at all its occurrences. USER_DEFINED tokens are
  // always matched; CONTROL and UNKNOWN tokens only when `parse_special`, and then not where
  // an occurrence overlaps one of `plain_text_ranges` (byte ranges [first, second) of `text`,
  // see EncodeOptions): such an occurrence stays inside its raw fragment, which is not split
  // there, and the search for that token goes on from the occurrence's next byte. Tokens
  // with the lstrip/rstrip attribute eat ASCII whitespace beside them. Raw fragments are
  // never empty. Without ranges the result is llama.cpp's.
  std::vector<Fragment> Partition(
      std::string_view text, bool parse_special,
      std::span<const std::pair<size_t, size_t>> plain_text_ranges = {}) const;

 private:
  // A trie over the special token texts, so one pass over the input finds which of them
  // occur at all (vocabularies carry thousands; inputs rarely contain any).
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t order = -1;  // index into the longest-first list when a token ends here
  };
  // Indices (into the longest-first list) of the tokens occurring in `text`, ascending.
  std::vector<int32_t> Occurring(std::string_view text, bool parse_special) const;

  const Vocabulary* vocab_;
  std::vector<Node> nodes_;  // nodes_[0] is the root
  std::array<int32_t, 256> root_{};
};

}  // namespace tessera::tokenizer
