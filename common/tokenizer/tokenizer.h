// Text <-> token ids for a model's vocabulary: the one entry point the rest of Tessera uses.
//
//   auto tok = Tokenizer::Open("model.gguf");
//   std::vector<TokenId> ids = tok->Encode(prompt, {.add_special = true, .parse_special = true});
//   absl::StatusOr<std::string> text = tok->Decode(ids);
//
// Generated tokens are turned into text with StreamingDetokenizer (streaming_detokenizer.h);
// whether a token ends generation is vocab().IsEndOfGeneration(id).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/gguf/metadata.h"
#include "common/tokenizer/bpe.h"
#include "common/tokenizer/special_tokens.h"
#include "common/tokenizer/spm.h"
#include "common/tokenizer/vocabulary.h"

namespace tessera::tokenizer {

struct EncodeOptions {
  // Prepend BOS / append EOS as the vocabulary's add_bos_token / add_eos_token say.
  bool add_special = false;
  // Match CONTROL (and UNKNOWN) token texts in the input as those tokens; otherwise such
  // text is tokenized as plain text (USER_DEFINED tokens are matched either way).
  bool parse_special = false;
  // With add_special: do not prepend BOS when the text already starts with it (a chat
  // template that emits bos_token itself, spec 14.5). llama.cpp's tokenizer would add a
  // second one; prompts for generation want this set.
  bool skip_duplicate_bos = false;
  // With parse_special: byte ranges [first, second) of the input that are plain text, such as
  // the request data in a rendered chat prompt (chat::RenderedPrompt::request_spans). A
  // CONTROL or UNKNOWN token text that overlaps one of them is not matched: it stays raw text
  // and is tokenized together with the raw text around it, as without parse_special, so a
  // client cannot write control tokens into a prompt. USER_DEFINED tokens are matched as
  // always. Sorted and disjoint ranges are expected (others are sorted and merged first);
  // bytes past the end of the input are ignored. The viewed ranges must outlive the call.
  std::span<const std::pair<size_t, size_t>> plain_text_ranges = {};
};

struct DecodeOptions {
  // Render CONTROL/UNKNOWN tokens as their text; otherwise they produce nothing.
  bool render_special = true;
  // Drop one leading space of the first token's text (SentencePiece's dummy prefix). When
  // unset: the vocabulary's add_space_prefix. Streaming a continuation wants false.
  std::optional<bool> strip_leading_space = std::nullopt;
  // HF clean_up_tokenization_spaces (" ," -> ","); whole-text decoding only, and only for
  // vocabularies that ask for it.
  bool clean_spaces = false;
};

class Tokenizer {
 public:
  // Builds the tokenizer from a model's metadata (errors as Vocabulary::FromMetadata).
  static absl::StatusOr<Tokenizer> FromMetadata(const gguf::Metadata& md);
  // Opens a GGUF file (or split set) and reads its tokenizer.
  static absl::StatusOr<Tokenizer> Open(const std::string& path);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  const Vocabulary& vocab() const { return *vocab_; }

  // Tokenizes any byte string (invalid UTF-8 included). Thread-safe.
  std::vector<TokenId> Encode(std::string_view text, const EncodeOptions& options = {}) const;

  // The bytes token `id` stands for (possibly part of a UTF-8 character); empty for UNUSED
  // tokens and, unless `render_special`, for CONTROL/UNKNOWN ones. `id` must be valid.
  std::string_view Piece(TokenId id, bool render_special = true) const;

  // Concatenated pieces. InvalidArgument naming the id when one is outside the vocabulary.
  absl::StatusOr<std::string> Decode(absl::Span<const TokenId> ids,
                                     const DecodeOptions& options = {}) const;

 private:
  explicit Tokenizer(std::unique_ptr<Vocabulary> vocab);

  // Heap-held so the encoder's pointer stays valid when the Tokenizer moves.
  std::unique_ptr<Vocabulary> vocab_;
  std::unique_ptr<SpecialTokenMatcher> specials_;
  std::optional<BpeEncoder> bpe_;
  std::optional<SpmEncoder> spm_;
  std::vector<std::string> pieces_;  // decoded bytes of every token
};

}  // namespace tessera::tokenizer
