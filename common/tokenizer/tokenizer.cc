#include "common/tokenizer/tokenizer.h"

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/gguf/split.h"
#include "common/tokenizer/byte_level.h"

namespace tessera::tokenizer {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 "▁"

// SentencePiece pieces spell spaces as "▁".
std::string UnescapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kSpmSpace.size()) == kSpmSpace) {
      out.push_back(' ');
      i += kSpmSpace.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

// The bytes a token decodes to (llama.cpp's token_to_piece with special = true).
std::string DecodedPiece(const Vocabulary& v, TokenId id) {
  const std::string& text = v.text(id);
  switch (v.type(id)) {
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUserDefined:
      return text;
    case TokenType::kNormal:
      if (v.kind() == VocabKind::kBytePairEncoding) return DecodeByteLevel(text);
      return UnescapeSpaces(text);
    case TokenType::kByte:
      if (v.kind() == VocabKind::kSentencePiece && text.size() == 6 && text.starts_with("<0x")) {
        return std::string(1, static_cast<char>(std::strtol(text.c_str() + 3, nullptr, 16)));
      }
      return text;
    case TokenType::kUnused:
    case TokenType::kUndefined:
      break;
  }
  return std::string();
}

bool IsRenderedOnlyAsSpecial(TokenType t) {
  return t == TokenType::kControl || t == TokenType::kUnknown;
}

// HF clean_up_tokenization_spaces as llama.cpp applies it: " ?", " !", " .", " ," lose the
// space; " ' " becomes "'"; " 's", " 'm", " 'll", " 're", " 've" lose the space.
std::string CleanSpaces(const std::string& text) {
  std::string a;
  for (size_t i = 0; i < text.size(); ++i) {
    const char x = text[i];
    if (i > 0 && text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) {
      a.pop_back();
    }
    a.push_back(x);
  }
  std::string b;
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i];
    if (i > 0 && x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
      b.pop_back();
      b.push_back(x);
      ++i;  // drop the space after it
      continue;
    }
    b.push_back(x);
  }
  std::string c;
  for (size_t i = 0; i < b.size(); ++i) {
    const char x = b[i];
    if (i > 0 && b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      const char x2 = i + 2 < b.size() ? b[i + 2] : '\0';
      if (x1 == 's' || x1 == 'm' || (x1 == 'l' && x2 == 'l') || (x1 == 'r' && x2 == 'e') ||
          (x1 == 'v' && x2 == 'e')) {
        c.pop_back();
      }
    }
    c.push_back(x);
  }
  return c;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Vocabulary> vocab) : vocab_(std::move(vocab)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<Tokenizer> Tokenizer::FromMetadata(const gguf::Metadata& md) {
  auto vocab = Vocabulary::FromMetadata(md);
  if (!vocab.ok()) return vocab.status();
  Tokenizer t(std::make_unique<Vocabulary>(std::move(*vocab)));
  if (t.vocab_->kind() == VocabKind::kBytePairEncoding) {
    auto bpe = BpeEncoder::Create(t.vocab_.get());
    if (!bpe.ok()) return bpe.status();
    t.bpe_.emplace(std::move(*bpe));
  } else {
    t.spm_.emplace(t.vocab_.get());
  }
  t.specials_ = std::make_unique<SpecialTokenMatcher>(t.vocab_.get());
  t.pieces_.reserve(t.vocab_->size());
  for (TokenId id = 0; id < t.vocab_->size(); ++id) {
    t.pieces_.push_back(DecodedPiece(*t.vocab_, id));
  }
  return t;
}

absl::StatusOr<Tokenizer> Tokenizer::Open(const std::string& path) {
  auto model = gguf::GgufModel::Open(path);
  if (!model.ok()) return model.status();
  auto t = FromMetadata(model->metadata());
  if (!t.ok()) {
    return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  }
  return t;
}

std::vector<TokenId> Tokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  const Vocabulary& v = *vocab_;
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  const std::vector<Fragment> fragments =
      specials_->Partition(text, options.parse_special, options.plain_text_ranges);
  const bool starts_with_bos = !fragments.empty() && fragments[0].token == v.special().bos;
  if (options.add_special && v.add_bos() && !(options.skip_duplicate_bos && starts_with_bos)) {
    out.push_back(v.special().bos);
  }
  if (v.kind() == VocabKind::kBytePairEncoding) {
    for (const Fragment& f : fragments) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
      } else {
        bpe_->Encode(f.text, &out);
      }
    }
  } else {
    // SentencePiece: text that starts the input or follows a special token gets the dummy
    // prefix (llama.cpp's is_prev_special), then spaces become "▁".
    bool after_special = true;
    std::string escaped;
    for (const Fragment& f : fragments) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
        after_special = true;
        continue;
      }
      escaped.clear();
      if (v.add_space_prefix() && after_special) escaped.append(kSpmSpace);
      for (char c : f.text) {
        if (c == ' ') {
          escaped.append(kSpmSpace);
        } else {
          escaped.push_back(c);
        }
      }
      spm_->Encode(escaped, &out);
      after_special = false;
    }
  }
  if (options.add_special && v.add_eos()) out.push_back(v.special().eos);
  return out;
}

std::string_view Tokenizer::Piece(TokenId id, bool render_special) const {
  if (!render_special && IsRenderedOnlyAsSpecial(vocab_->type(id))) return std::string_view();
  return pieces_[id];
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const TokenId> ids,
                                              const DecodeOptions& options) const {
  const bool strip = options.strip_leading_space.value_or(vocab_->add_space_prefix());
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!vocab_->Contains(ids[i])) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", ids[i], " (position ", i,
                                                     ") is outside the vocabulary of ",
                                                     vocab_->size(), " tokens"));
    }
    std::string_view piece = Piece(ids[i], options.render_special);
    if (i == 0 && strip && piece.starts_with(' ')) piece.remove_prefix(1);
    text.append(piece);
  }
  if (options.clean_spaces && vocab_->clean_spaces()) return CleanSpaces(text);
  return text;
}

}  // namespace tessera::tokenizer
