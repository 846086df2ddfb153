// A vocabulary as the mask computation sees it: token byte strings in sorted order.
//
// The eligible tokens (not special, not empty) sorted by their bytes, with the length of the
// prefix each shares with the one before it, are a trie laid out flat: walking the list in
// order and reusing the parse state of the shared prefix visits every trie node once, and a
// prefix that leaves the grammar skips every following token that starts with it.
// Built once per vocabulary and shared (immutable) by every grammar compiled against it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"

namespace tessera::grammar {

class TokenTrie {
 public:
  // `tokens[id]` is the bytes of token id (possibly part of a UTF-8 character);
  // `special[id]` marks special/control tokens (shorter `special` means "not special"
  // for the rest). Special and empty tokens are never allowed by any mask.
  static std::shared_ptr<const TokenTrie> Build(const std::vector<std::string>& tokens,
                                                const std::vector<bool>& special);

  // Number of token ids, eligible or not: masks have this many bits.
  uint32_t vocab_size() const { return vocab_size_; }
  // Words of a mask over the vocabulary.
  size_t mask_words() const { return (vocab_size_ + 63) / 64; }
  bool eligible(uint32_t id) const { return eligible_[id]; }
  std::string_view token(uint32_t id) const {
    return std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }

  // The eligible tokens in byte order: sorted_ids()[i] is the i-th, and shared_prefix()[i]
  // the length of the prefix it shares with the (i-1)-th (0 for the first).
  absl::Span<const uint32_t> sorted_ids() const { return sorted_ids_; }
  absl::Span<const uint32_t> shared_prefix() const { return shared_prefix_; }
  // The index in sorted_ids() past the last token whose first byte is at most `byte` (a
  // walk that finds a first byte dead skips every token that starts with it at once).
  uint32_t first_byte_end(uint8_t byte) const { return first_byte_end_[byte]; }

 private:
  uint32_t vocab_size_ = 0;
  std::string bytes_;
  std::vector<uint32_t> offsets_;
  std::vector<bool> eligible_;
  std::vector<uint32_t> sorted_ids_;
  std::vector<uint32_t> shared_prefix_;
  std::array<uint32_t, 256> first_byte_end_ = {};
};

// Length of the common prefix of two byte strings.
uint32_t SharedPrefixLength(std::string_view a, std::string_view b);

// The bytes that stand for special token `id` in a vocabulary and in a grammar that names it
// (GBNF `<[id]>`): 0xFF, the id in decimal, 0xFE. No UTF-8 text contains 0xFE or 0xFF, and
// every other grammar element matches UTF-8 only, so a special token is allowed exactly where
// a grammar names it. A vocabulary gives its special tokens these bytes and leaves out the
// ordinary tokens that contain 0xFE or 0xFF (no grammar could allow them anyway).
std::string SpecialTokenBytes(uint32_t id);
// Whether `bytes` holds 0xFE or 0xFF.
bool HasSpecialTokenMarker(std::string_view bytes);

}  // namespace tessera::grammar
