// Pre-tokenizers of byte-level BPE vocabularies (spec section 14.3): the regex lists that
// split text into words before merges run, chosen by `tokenizer.ggml.pre`.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tessera::tokenizer {

// What a `tokenizer.ggml.pre` id means: its regexes (PCRE2 syntax, applied in order) and the
// vocabulary defaults llama.cpp ties to it.
struct PreTokenizerSpec {
  std::string_view name;                  // the canonical id, e.g. "llama-bpe"
  absl::Span<const char* const> regexes;  // applied in order
  bool ignore_merges = false;             // a word that is itself a token is emitted whole (llama3)
  bool add_bos = false;                   // default for tokenizer.ggml.add_bos_token
  bool clean_spaces = true;  // HF clean_up_tokenization_spaces, for whole-text decoding
};

// The spec for a `tokenizer.ggml.pre` value, aliases included ("llama3" -> "llama-bpe").
// nullptr when the id is unknown (llama.cpp refuses such files too).
const PreTokenizerSpec* FindPreTokenizerSpec(std::string_view pre);

// The ids FindPreTokenizerSpec accepts, for error messages and --help.
std::vector<std::string_view> KnownPreTokenizers();

// A compiled pre-tokenizer. Copies share the compiled regexes; Split is thread-safe.
class PreTokenizer {
 public:
  // Compiles every regex with PCRE2 (UTF, Unicode properties, JIT). Errors name the
  // pre-tokenizer, the regex index and PCRE2's message.
  static absl::StatusOr<PreTokenizer> Create(const PreTokenizerSpec& spec);

  // Splits `text` into consecutive non-empty pieces that cover it exactly. Each regex splits
  // every current piece into its matches and the unmatched gaps between them (all kept), so
  // a regex sees one piece as its whole subject: lookaheads and `$` stop at the piece's end.
  // Invalid UTF-8 is never matched; its bytes end up in gap pieces.
  void Split(std::string_view text, std::vector<std::string_view>* pieces) const;

 private:
  struct Compiled;
  explicit PreTokenizer(std::shared_ptr<const Compiled> compiled)
      : compiled_(std::move(compiled)) {}

  std::shared_ptr<const Compiled> compiled_;
};

}  // namespace tessera::tokenizer
