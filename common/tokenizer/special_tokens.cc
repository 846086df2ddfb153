#include "common/tokenizer/special_tokens.h"

#include <cctype>

namespace tessera::tokenizer {
namespace {

bool IsAsciiSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// Splits one raw fragment at every occurrence of `token`'s text, appending to `out`.
void SplitFragment(const Vocabulary& vocab, TokenId token, std::string_view raw,
                   std::vector<Fragment>* out) {
  const std::string& needle = vocab.text(token);
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t match = raw.find(needle, pos);
    if (match == std::string_view::npos) break;
    std::string_view left = raw.substr(pos, match - pos);
    if (vocab.lstrip(token)) {
      while (!left.empty() && IsAsciiSpace(left.back())) left.remove_suffix(1);
    }
    if (!left.empty()) out->push_back({left, kNoToken});
    out->push_back({std::string_view(), token});
    pos = match + needle.size();
    if (vocab.rstrip(token)) {
      while (pos < raw.size() && IsAsciiSpace(raw[pos])) ++pos;
    }
  }
  if (pos < raw.size()) out->push_back({raw.substr(pos), kNoToken});
}

}  // namespace

std::vector<Fragment> PartitionSpecialTokens(const Vocabulary& vocab, std::string_view text,
                                             bool parse_special) {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({text, kNoToken});
  std::vector<Fragment> next;
  for (TokenId token : vocab.special_tokens_longest_first()) {
    const TokenType type = vocab.type(token);
    if (!parse_special && (type == TokenType::kControl || type == TokenType::kUnknown)) continue;
    // Cheap rejection: most special tokens do not occur in the text at all.
    if (text.find(vocab.text(token)) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token != kNoToken) {
        next.push_back(f);
      } else {
        SplitFragment(vocab, token, f.text, &next);
      }
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace tessera::tokenizer
