#include "common/tokenizer/special_tokens.h"

#include <algorithm>
#include <cctype>

namespace tessera::tokenizer {
namespace {

bool IsAsciiSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

using ByteRanges = std::span<const std::pair<size_t, size_t>>;

// Whether [begin, end) overlaps one of `ranges` (sorted, disjoint).
bool OverlapsAny(ByteRanges ranges, size_t begin, size_t end) {
  // The first range that ends after `begin` is the only candidate.
  auto it =
      std::upper_bound(ranges.begin(), ranges.end(), begin,
                       [](size_t at, const std::pair<size_t, size_t>& r) { return at < r.second; });
  return it != ranges.end() && it->first < end;
}

// Splits one raw fragment, starting at byte `offset` of the input, at every occurrence of
// `token`'s text except those overlapping `plain` ranges, appending to `out`.
void SplitFragment(const Vocabulary& vocab, TokenId token, std::string_view raw, size_t offset,
                   ByteRanges plain, std::vector<Fragment>* out) {
  const std::string& needle = vocab.text(token);
  size_t pos = 0;   // start of the raw text not yet emitted
  size_t from = 0;  // where the next search starts
  while (from < raw.size()) {
    const size_t match = raw.find(needle, from);
    if (match == std::string_view::npos) break;
    if (!plain.empty() && OverlapsAny(plain, offset + match, offset + match + needle.size())) {
      from = match + 1;  // left in the raw text; a later occurrence may still be the template's
      continue;
    }
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
    from = pos;
  }
  if (pos < raw.size()) out->push_back({raw.substr(pos), kNoToken});
}

// `ranges` sorted, disjoint and without empty ranges: as given when they already are (the
// common case), else a sorted and merged copy in `storage`.
ByteRanges Canonical(ByteRanges ranges, std::vector<std::pair<size_t, size_t>>* storage) {
  bool canonical = true;
  for (size_t i = 0; i < ranges.size() && canonical; ++i) {
    canonical =
        ranges[i].first < ranges[i].second && (i == 0 || ranges[i - 1].second <= ranges[i].first);
  }
  if (canonical) return ranges;
  storage->clear();
  for (const auto& r : ranges) {
    if (r.first < r.second) storage->push_back(r);
  }
  std::sort(storage->begin(), storage->end());
  size_t kept = 0;
  for (const auto& r : *storage) {
    if (kept > 0 && r.first <= (*storage)[kept - 1].second) {
      (*storage)[kept - 1].second = std::max((*storage)[kept - 1].second, r.second);
    } else {
      (*storage)[kept++] = r;
    }
  }
  storage->resize(kept);
  return *storage;
}

int32_t FindChild(const std::vector<std::pair<uint8_t, int32_t>>& children, uint8_t b) {
  for (const auto& [byte, child] : children) {
    if (byte == b) return child;
  }
  return -1;
}

}  // namespace

SpecialTokenMatcher::SpecialTokenMatcher(const Vocabulary* vocab) : vocab_(vocab) {
  root_.fill(-1);
  nodes_.emplace_back();
  const std::vector<TokenId>& tokens = vocab_->special_tokens_longest_first();
  for (size_t order = 0; order < tokens.size(); ++order) {
    const std::string& text = vocab_->text(tokens[order]);
    const uint8_t first = static_cast<uint8_t>(text[0]);
    if (root_[first] < 0) {
      root_[first] = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
    }
    int32_t node = root_[first];
    for (size_t i = 1; i < text.size(); ++i) {
      const uint8_t b = static_cast<uint8_t>(text[i]);
      int32_t child = FindChild(nodes_[node].children, b);
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_[node].children.emplace_back(b, child);
        nodes_.emplace_back();
      }
      node = child;
    }
    // Duplicate texts: the first (longest-first order) keeps the node.
    if (nodes_[node].order < 0) nodes_[node].order = static_cast<int32_t>(order);
  }
}

std::vector<int32_t> SpecialTokenMatcher::Occurring(std::string_view text,
                                                    bool parse_special) const {
  const std::vector<TokenId>& tokens = vocab_->special_tokens_longest_first();
  std::vector<bool> found(tokens.size(), false);
  bool any = false;
  for (size_t start = 0; start < text.size(); ++start) {
    int32_t node = root_[static_cast<uint8_t>(text[start])];
    for (size_t i = start + 1; node >= 0; ++i) {
      if (nodes_[node].order >= 0) {
        const TokenType type = vocab_->type(tokens[nodes_[node].order]);
        if (parse_special || (type != TokenType::kControl && type != TokenType::kUnknown)) {
          found[nodes_[node].order] = true;
          any = true;
        }
      }
      if (i == text.size()) break;
      node = FindChild(nodes_[node].children, static_cast<uint8_t>(text[i]));
    }
  }
  std::vector<int32_t> orders;
  if (!any) return orders;
  for (size_t o = 0; o < found.size(); ++o) {
    if (found[o]) orders.push_back(static_cast<int32_t>(o));
  }
  return orders;
}

std::vector<Fragment> SpecialTokenMatcher::Partition(
    std::string_view text, bool parse_special,
    std::span<const std::pair<size_t, size_t>> plain_text_ranges) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  std::vector<std::pair<size_t, size_t>> sorted_ranges;
  const ByteRanges plain =
      parse_special ? Canonical(plain_text_ranges, &sorted_ranges) : ByteRanges();
  fragments.push_back({text, kNoToken});
  std::vector<Fragment> next;
  for (int32_t order : Occurring(text, parse_special)) {
    const TokenId token = vocab_->special_tokens_longest_first()[order];
    const TokenType type = vocab_->type(token);
    // Only control text is kept out of the plain ranges: USER_DEFINED tokens are matched in
    // any text, as without parse_special.
    const ByteRanges keep_out =
        type == TokenType::kControl || type == TokenType::kUnknown ? plain : ByteRanges();
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token != kNoToken) {
        next.push_back(f);
      } else {
        SplitFragment(*vocab_, token, f.text, static_cast<size_t>(f.text.data() - text.data()),
                      keep_out, &next);
      }
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace tessera::tokenizer
