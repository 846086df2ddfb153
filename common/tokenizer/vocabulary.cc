#include "common/tokenizer/vocabulary.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tessera::tokenizer {
namespace {

constexpr const char* kModelKey = "tokenizer.ggml.model";
constexpr const char* kPreKey = "tokenizer.ggml.pre";
constexpr const char* kTokensKey = "tokenizer.ggml.tokens";
constexpr const char* kTypesKey = "tokenizer.ggml.token_type";
constexpr const char* kScoresKey = "tokenizer.ggml.scores";
constexpr const char* kMergesKey = "tokenizer.ggml.merges";

// Token texts that mark end-of-turn / end-of-generation (spec 14.4, from llama.cpp).
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",         "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>",    "<EOT>",      "_<EOT>",  "[EOT]",         "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kFimPreTexts[] = {"<|fim_prefix|>",  "<fim-prefix>", "<fim_prefix>",
                                             "<｜fim▁begin｜>", "<PRE>",        "▁<PRE>",
                                             "<|code_prefix|>"};
constexpr std::string_view kFimSufTexts[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                             "<｜fim▁hole｜>", "<SUF>",        "▁<SUF>",
                                             "<|code_suffix|>"};
constexpr std::string_view kFimMidTexts[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                             "<｜fim▁end｜>",  "<MID>",        "▁<MID>",
                                             "<|code_middle|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                             "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>", "<file_sep>"};
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
};

template <size_t N>
bool IsOneOf(std::string_view text, const std::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), text) != std::end(list);
}

bool IsSpecialType(TokenType t) {
  return t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown;
}

std::string JoinNames(const std::vector<std::string_view>& names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

}  // namespace

absl::StatusOr<Vocabulary> Vocabulary::FromMetadata(const gguf::Metadata& md) {
  Vocabulary v;
  auto model = md.GetString(kModelKey);
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary: ", kModelKey, " is required: ", model.status().message()));
  }
  if (*model == "gpt2") {
    v.kind_ = VocabKind::kBytePairEncoding;
  } else if (*model == "llama") {
    v.kind_ = VocabKind::kSentencePiece;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("vocabulary: ", kModelKey, " is '", *model,
                                                   "'; supported: 'gpt2' (byte-level BPE) "
                                                   "and 'llama' (SentencePiece)"));
  }
  if (v.kind_ == VocabKind::kBytePairEncoding) {
    auto pre = md.GetString(kPreKey, "default");
    if (!pre.ok()) return pre.status();
    v.pre_tokenizer_ = FindPreTokenizerSpec(*pre);
    if (v.pre_tokenizer_ == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("vocabulary: ", kPreKey, " '", *pre,
                                                     "' is not a known pre-tokenizer (",
                                                     JoinNames(KnownPreTokenizers()), ")"));
    }
  }
  if (auto s = v.LoadTokens(md); !s.ok()) return s;
  if (v.kind_ == VocabKind::kBytePairEncoding) {
    if (auto s = v.LoadMerges(md); !s.ok()) return s;
  }
  if (auto s = v.LoadSpecialIds(md); !s.ok()) return s;
  if (auto s = v.LoadFlags(md); !s.ok()) return s;
  v.DetectSpecialTokensByText(md);
  v.BuildDerivedTables();
  return v;
}

absl::Status Vocabulary::LoadTokens(const gguf::Metadata& md) {
  auto tokens = md.GetStringArray(kTokensKey);
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary: ", kTokensKey, " is required: ", tokens.status().message()));
  }
  if (tokens->empty()) {
    return absl::InvalidArgumentError(absl::StrCat("vocabulary: ", kTokensKey, " is empty"));
  }
  if (tokens->size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary: ", kTokensKey, " has ", tokens->size(), " tokens, too many"));
  }
  texts_ = std::move(*tokens);
  const size_t n = texts_.size();

  types_.assign(n, TokenType::kNormal);
  if (md.Has(kTypesKey)) {
    auto types = md.GetIntArray(kTypesKey);
    if (!types.ok()) return types.status();
    if (types->size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("vocabulary: ", kTypesKey, " has ",
                                                     types->size(), " entries, expected ", n,
                                                     " (one per token)"));
    }
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = (*types)[i];
      if (t < 0 || t > 6) {
        return absl::InvalidArgumentError(
            absl::StrCat("vocabulary: ", kTypesKey, "[", i, "] = ", t, ", expected 0..6"));
      }
      types_[i] = static_cast<TokenType>(t);
    }
  }

  if (md.Has(kScoresKey)) {
    auto scores = md.GetFloatArray(kScoresKey);
    if (!scores.ok()) return scores.status();
    if (scores->size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("vocabulary: ", kScoresKey, " has ",
                                                     scores->size(), " entries, expected ", n,
                                                     " (one per token)"));
    }
    scores_ = std::move(*scores);
  } else if (kind_ == VocabKind::kSentencePiece) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocabulary: a SentencePiece ('llama') vocabulary needs ", kScoresKey, "; it is missing"));
  }

  ids_.reserve(n);
  for (size_t i = 0; i < n; ++i) ids_[texts_[i]] = static_cast<TokenId>(i);
  return absl::OkStatus();
}

absl::Status Vocabulary::LoadMerges(const gguf::Metadata& md) {
  if (!md.Has(kMergesKey)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocabulary: a byte-level BPE ('gpt2') vocabulary needs ", kMergesKey, "; it is missing"));
  }
  auto merges = md.GetStringArray(kMergesKey);
  if (!merges.ok()) return merges.status();
  merges_.reserve(merges->size());
  std::string joined;
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const std::string& m = (*merges)[rank];
    // Split at the first space after position 0, so a left part may itself start with one.
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (space == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("vocabulary: ", kMergesKey, "[", rank, "] '", m, "' is not \"left right\""));
    }
    const std::string_view left(m.data(), space);
    const std::string_view right(m.data() + space + 1, m.size() - space - 1);
    joined.assign(left);
    joined.append(right);
    const TokenId l = Find(left), r = Find(right), result = Find(joined);
    const std::string_view missing = l == kNoToken        ? left
                                     : r == kNoToken      ? right
                                     : result == kNoToken ? std::string_view(joined)
                                                          : std::string_view();
    if (l == kNoToken || r == kNoToken || result == kNoToken) {
      return absl::InvalidArgumentError(absl::StrCat("vocabulary: ", kMergesKey, "[", rank, "] '",
                                                     m, "' names '", std::string(missing),
                                                     "', which is not a token"));
    }
    // The first (lowest-rank) occurrence of a duplicated pair wins.
    merges_.try_emplace(PairKey(l, r), Merge{static_cast<int32_t>(rank), result});
  }
  return absl::OkStatus();
}

absl::Status Vocabulary::LoadSpecialIds(const gguf::Metadata& md) {
  const int64_t n = size();
  if (kind_ == VocabKind::kSentencePiece) {
    // SentencePiece defaults: <unk> 0, <s> 1, </s> 2.
    if (n > 0) special_.unk = 0;
    if (n > 1) special_.bos = 1;
    if (n > 2) special_.eos = 2;
  }
  struct Key {
    const char* name;
    TokenId* id;
    bool required_in_range;
  };
  const Key keys[] = {
      {"tokenizer.ggml.bos_token_id", &special_.bos, true},
      {"tokenizer.ggml.eos_token_id", &special_.eos, true},
      {"tokenizer.ggml.eot_token_id", &special_.eot, true},
      {"tokenizer.ggml.eom_token_id", &special_.eom, true},
      {"tokenizer.ggml.unknown_token_id", &special_.unk, true},
      {"tokenizer.ggml.seperator_token_id", &special_.sep, false},
      {"tokenizer.ggml.padding_token_id", &special_.pad, false},
      {"tokenizer.ggml.fim_pre_token_id", &special_.fim_pre, true},
      {"tokenizer.ggml.fim_suf_token_id", &special_.fim_suf, true},
      {"tokenizer.ggml.fim_mid_token_id", &special_.fim_mid, true},
      {"tokenizer.ggml.fim_pad_token_id", &special_.fim_pad, true},
      {"tokenizer.ggml.fim_rep_token_id", &special_.fim_rep, true},
      {"tokenizer.ggml.fim_sep_token_id", &special_.fim_sep, true},
  };
  for (const Key& k : keys) {
    if (!md.Has(k.name)) continue;
    auto id = md.GetInt(k.name);
    if (!id.ok()) return id.status();
    // 0xFFFFFFFF (-1 as u32) is how converters write "no such token".
    if (*id == 0xFFFFFFFFll || *id == -1) {
      *k.id = kNoToken;
      continue;
    }
    if (*id < 0 || *id >= n) {
      if (!k.required_in_range) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "vocabulary: ", k.name, " = ", *id, " is outside the vocabulary of ", n, " tokens"));
    }
    *k.id = static_cast<TokenId>(*id);
  }
  return absl::OkStatus();
}

absl::Status Vocabulary::LoadFlags(const gguf::Metadata& md) {
  const bool spm = kind_ == VocabKind::kSentencePiece;
  auto add_bos = md.GetBool("tokenizer.ggml.add_bos_token", spm || pre_tokenizer_->add_bos);
  auto add_eos = md.GetBool("tokenizer.ggml.add_eos_token", false);
  auto add_space = md.GetBool("tokenizer.ggml.add_space_prefix", spm);
  if (!add_bos.ok()) return add_bos.status();
  if (!add_eos.ok()) return add_eos.status();
  if (!add_space.ok()) return add_space.status();
  add_bos_ = *add_bos;
  add_eos_ = *add_eos;
  add_space_prefix_ = *add_space;
  clean_spaces_ = !spm && pre_tokenizer_->clean_spaces;
  if (add_bos_ && special_.bos == kNoToken) {
    return absl::InvalidArgumentError(
        "vocabulary: tokenizer.ggml.add_bos_token is true but the vocabulary has no BOS token");
  }
  if (add_eos_ && special_.eos == kNoToken) {
    return absl::InvalidArgumentError(
        "vocabulary: tokenizer.ggml.add_eos_token is true but the vocabulary has no EOS token");
  }
  return absl::OkStatus();
}

// llama.cpp finds end-of-turn, FIM and end-of-generation tokens by their text when the file
// does not name them, and treats every token so found as CONTROL (spec 14.4).
void Vocabulary::DetectSpecialTokensByText(const gguf::Metadata& md) {
  auto force_control = [&](TokenId id) { types_[id] = TokenType::kControl; };
  struct ByText {
    TokenId* id;
    absl::Span<const std::string_view> texts;
  };
  const ByText detectors[] = {
      {&special_.eot, kEotTexts},        {&special_.eom, kEomTexts},
      {&special_.fim_pre, kFimPreTexts}, {&special_.fim_suf, kFimSufTexts},
      {&special_.fim_mid, kFimMidTexts}, {&special_.fim_pad, kFimPadTexts},
      {&special_.fim_rep, kFimRepTexts}, {&special_.fim_sep, kFimSepTexts},
  };
  for (const ByText& d : detectors) {
    if (*d.id != kNoToken) continue;
    for (TokenId id = 0; id < size() && *d.id == kNoToken; ++id) {
      if (std::find(d.texts.begin(), d.texts.end(), texts_[id]) != d.texts.end()) {
        *d.id = id;
        force_control(id);
      }
    }
  }

  absl::flat_hash_set<TokenId> eog;
  for (TokenId id : {special_.eos, special_.eot, special_.eom, special_.fim_pad, special_.fim_rep,
                     special_.fim_sep}) {
    if (id != kNoToken) eog.insert(id);
  }
  for (TokenId id = 0; id < size(); ++id) {
    if (IsOneOf(texts_[id], kEogTexts)) {
      eog.insert(id);
      force_control(id);
    }
  }
  // gpt-oss (harmony): "<|end|>" ends a message, not the generation, when the model also
  // has "<|return|>"/"<|call|>" (or "<|calls|>"/"<|flush|>").
  const bool harmony = (Find("<|return|>") != kNoToken && Find("<|call|>") != kNoToken) ||
                       (Find("<|calls|>") != kNoToken && Find("<|flush|>") != kNoToken);
  if (harmony && Find("<|end|>") != kNoToken) eog.erase(Find("<|end|>"));
  end_of_generation_.assign(eog.begin(), eog.end());
  std::sort(end_of_generation_.begin(), end_of_generation_.end());

  for (TokenId id = 0; id < size(); ++id) {
    if (types_[id] == TokenType::kControl && absl::StrContains(texts_[id], "unused")) {
      types_[id] = TokenType::kUnused;
    }
  }

  // Phi-3's special tokens swallow the whitespace after them (llama.cpp's per-model rule).
  std::string name = absl::AsciiStrToLower(md.GetString("general.name", "").value_or(""));
  if (absl::StrContains(name, "phi-3") || absl::StrContains(name, "phi3")) {
    for (TokenId id = 0; id < size(); ++id) {
      if (IsSpecialType(types_[id])) rstrip_.insert(id);
    }
    if (TokenId id = Find("</s>"); id != kNoToken) rstrip_.insert(id);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (TokenId id = Find(t); id != kNoToken) rstrip_.erase(id);
    }
  }
}

void Vocabulary::BuildDerivedTables() {
  for (TokenId id = 0; id < size(); ++id) {
    if (IsSpecialType(types_[id]) && !texts_[id].empty()) special_by_length_.push_back(id);
  }
  std::stable_sort(special_by_length_.begin(), special_by_length_.end(),
                   [&](TokenId a, TokenId b) { return texts_[a].size() > texts_[b].size(); });

  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    TokenId id = Find(hex);
    if (id == kNoToken) id = Find(std::string(1, static_cast<char>(b)));
    byte_tokens_[b] = id;
  }
}

TokenId Vocabulary::Find(std::string_view text) const {
  // Debian's Abseil has its own string_view; heterogeneous lookup needs that type.
  auto it = ids_.find(absl::string_view(text.data(), text.size()));
  return it == ids_.end() ? kNoToken : it->second;
}

bool Vocabulary::IsEndOfGeneration(TokenId id) const {
  return std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), id);
}

}  // namespace tessera::tokenizer
