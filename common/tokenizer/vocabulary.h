// A tokenizer vocabulary as GGUF stores it (`tokenizer.ggml.*`, spec sections 14.1 and 14.4):
// token texts, scores and types, BPE merge ranks, special token ids, the add-BOS/EOS flags
// and the end-of-generation set, checked once at load so the tokenizers can trust it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "common/gguf/metadata.h"
#include "common/tokenizer/pre_tokenizer.h"

namespace tessera::tokenizer {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// `tokenizer.ggml.token_type` values.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class VocabKind {
  kBytePairEncoding,  // tokenizer.ggml.model = "gpt2": byte-level BPE with merge ranks
  kSentencePiece,     // tokenizer.ggml.model = "llama": score-based merges, byte fallback
};

// Special token ids; kNoToken where the vocabulary has none.
struct SpecialTokenIds {
  TokenId bos = kNoToken;
  TokenId eos = kNoToken;
  TokenId eot = kNoToken;
  TokenId eom = kNoToken;
  TokenId unk = kNoToken;
  TokenId sep = kNoToken;
  TokenId pad = kNoToken;
  TokenId fim_pre = kNoToken;
  TokenId fim_suf = kNoToken;
  TokenId fim_mid = kNoToken;
  TokenId fim_pad = kNoToken;
  TokenId fim_rep = kNoToken;
  TokenId fim_sep = kNoToken;
};

class Vocabulary {
 public:
  // One BPE merge: its rank (lower merges first) and the token the pair becomes.
  struct Merge {
    int32_t rank;
    TokenId result;
  };

  // Builds the vocabulary from a model's metadata. Errors (InvalidArgument, naming the key
  // and the expectation): a missing or mistyped `tokenizer.ggml.model` / `tokens`; an
  // unsupported model; `token_type` or `scores` whose length differs from `tokens`; a token
  // type outside 0..6; a BPE file without `merges`, or a merge that is not "left right" or
  // names a token (or a concatenation) the vocabulary lacks; an SPM file without `scores`;
  // an unknown `tokenizer.ggml.pre`; a bos/eos/eot/eom/unk/fim id outside the vocabulary
  // (0xFFFFFFFF means "none"; pad and sep ids out of range are ignored as llama.cpp does).
  static absl::StatusOr<Vocabulary> FromMetadata(const gguf::Metadata& md);

  VocabKind kind() const { return kind_; }
  // The pre-tokenizer of a BPE vocabulary; nullptr for SentencePiece.
  const PreTokenizerSpec* pre_tokenizer() const { return pre_tokenizer_; }

  int32_t size() const { return static_cast<int32_t>(texts_.size()); }
  bool Contains(TokenId id) const { return id >= 0 && id < size(); }
  // Accessors below take an id for which Contains() holds.
  const std::string& text(TokenId id) const { return texts_[id]; }
  float score(TokenId id) const { return scores_.empty() ? 0.0f : scores_[id]; }
  TokenType type(TokenId id) const { return types_[id]; }
  // Special tokens get whitespace stripped from the text beside them (llama.cpp's
  // LSTRIP/RSTRIP attributes; only Phi-3 sets them today).
  bool lstrip(TokenId id) const { return lstrip_.contains(id); }
  bool rstrip(TokenId id) const { return rstrip_.contains(id); }

  // The id of the token whose text is exactly `text` (the last one if several), or kNoToken.
  TokenId Find(std::string_view text) const;
  // The merge of the adjacent pair (left, right), or nullptr when they never merge.
  const Merge* FindMerge(TokenId left, TokenId right) const {
    auto it = merges_.find(PairKey(left, right));
    return it == merges_.end() ? nullptr : &it->second;
  }
  size_t merge_count() const { return merges_.size(); }
  // SentencePiece byte fallback: the `<0xNN>` token of `b` (or the one-byte token), or
  // kNoToken when the vocabulary has neither.
  TokenId ByteToken(uint8_t b) const { return byte_tokens_[b]; }

  const SpecialTokenIds& special() const { return special_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  // SentencePiece: a space is put in front of text that starts the input or follows a
  // special token (`tokenizer.ggml.add_space_prefix`, default true).
  bool add_space_prefix() const { return add_space_prefix_; }
  bool clean_spaces() const { return clean_spaces_; }

  // End-of-generation tokens (spec 14.4), ascending.
  const std::vector<TokenId>& end_of_generation() const { return end_of_generation_; }
  bool IsEndOfGeneration(TokenId id) const;

  // CONTROL, USER_DEFINED and UNKNOWN tokens with non-empty text, longest text first: the
  // tokens matched literally in input text before the pre-tokenizer runs.
  const std::vector<TokenId>& special_tokens_longest_first() const { return special_by_length_; }

 private:
  static uint64_t PairKey(TokenId l, TokenId r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  absl::Status LoadTokens(const gguf::Metadata& md);
  absl::Status LoadMerges(const gguf::Metadata& md);
  absl::Status LoadSpecialIds(const gguf::Metadata& md);
  absl::Status LoadFlags(const gguf::Metadata& md);
  void DetectSpecialTokensByText(const gguf::Metadata& md);
  void BuildDerivedTables();

  VocabKind kind_ = VocabKind::kBytePairEncoding;
  const PreTokenizerSpec* pre_tokenizer_ = nullptr;
  std::vector<std::string> texts_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  absl::flat_hash_map<std::string, TokenId> ids_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::array<TokenId, 256> byte_tokens_{};
  SpecialTokenIds special_;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
  bool clean_spaces_ = false;
  std::vector<TokenId> end_of_generation_;
  std::vector<TokenId> special_by_length_;
  absl::flat_hash_set<TokenId> lstrip_;
  absl::flat_hash_set<TokenId> rstrip_;
};

}  // namespace tessera::tokenizer
