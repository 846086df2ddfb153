// Byte-level BPE (spec section 14.2): pre-tokenize, map bytes to GPT-2's alphabet, then merge
// adjacent symbols by merge rank.
#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer/pre_tokenizer.h"
#include "common/tokenizer/vocabulary.h"

namespace tessera::tokenizer {

class BpeEncoder {
 public:
  // `vocab` must be a byte-level BPE vocabulary and outlive the encoder.
  static absl::StatusOr<BpeEncoder> Create(const Vocabulary* vocab);

  // Appends the tokens of raw text (no special-token matching). Thread-safe.
  void Encode(std::string_view text, std::vector<TokenId>* out) const;

 private:
  BpeEncoder(const Vocabulary* vocab, PreTokenizer pre) : vocab_(vocab), pre_(std::move(pre)) {}
  struct Scratch;
  // One pre-tokenized word.
  void EncodeWord(std::string_view word, Scratch& scratch, std::vector<TokenId>* out) const;

  const Vocabulary* vocab_;
  PreTokenizer pre_;
  std::array<TokenId, 256> byte_token_{};  // token of each byte's byte-level character
};

}  // namespace tessera::tokenizer
