#include "common/grammar/token_trie.h"

#include <algorithm>

namespace tessera::grammar {

std::string SpecialTokenBytes(uint32_t id) {
  std::string bytes = "\xFF";
  bytes += std::to_string(id);
  bytes += '\xFE';
  return bytes;
}

bool HasSpecialTokenMarker(std::string_view bytes) {
  return bytes.find_first_of("\xFE\xFF") != std::string_view::npos;
}

uint32_t SharedPrefixLength(std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<uint32_t>(i);
}

std::shared_ptr<const TokenTrie> TokenTrie::Build(const std::vector<std::string>& tokens,
                                                  const std::vector<bool>& special) {
  auto trie = std::make_shared<TokenTrie>();
  trie->vocab_size_ = static_cast<uint32_t>(tokens.size());
  trie->offsets_.push_back(0);
  for (size_t id = 0; id < tokens.size(); ++id) {
    trie->bytes_ += tokens[id];
    trie->offsets_.push_back(static_cast<uint32_t>(trie->bytes_.size()));
    bool is_special = id < special.size() && special[id];
    trie->eligible_.push_back(!is_special && !tokens[id].empty());
    if (trie->eligible_.back()) trie->sorted_ids_.push_back(static_cast<uint32_t>(id));
  }
  std::sort(trie->sorted_ids_.begin(), trie->sorted_ids_.end(), [&](uint32_t a, uint32_t b) {
    return std::make_pair(trie->token(a), a) < std::make_pair(trie->token(b), b);
  });
  trie->shared_prefix_.resize(trie->sorted_ids_.size(), 0);
  for (size_t i = 1; i < trie->sorted_ids_.size(); ++i) {
    trie->shared_prefix_[i] = SharedPrefixLength(trie->token(trie->sorted_ids_[i - 1]),
                                                 trie->token(trie->sorted_ids_[i]));
  }
  // Sorted as unsigned bytes (char_traits<char>::lt), so each first byte is one run.
  for (size_t i = 0; i < trie->sorted_ids_.size(); ++i) {
    const uint8_t first = static_cast<uint8_t>(trie->token(trie->sorted_ids_[i])[0]);
    trie->first_byte_end_[first] = static_cast<uint32_t>(i + 1);
  }
  for (int b = 1; b < 256; ++b) {
    trie->first_byte_end_[b] = std::max(trie->first_byte_end_[b], trie->first_byte_end_[b - 1]);
  }
  return trie;
}

}  // namespace tessera::grammar
