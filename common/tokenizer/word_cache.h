// Remembers the tokens of words already encoded within one Encode call. Words repeat
// (Zipf's law), so copying their tokens from where they were first emitted is much cheaper
// than merging again. Lives for one call: no shared state, nothing to invalidate.
#pragma once

#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "common/tokenizer/vocabulary.h"

namespace tessera::tokenizer {

class WordCache {
 public:
  // `out` is the output every word is appended to; it must only grow while the cache lives.
  explicit WordCache(std::vector<TokenId>* out) : out_(out) {}

  // Appends the tokens of `word`: copied when seen before, else `encode(word, out)`. Words
  // must stay alive (they are views into the input) as long as the cache.
  template <typename EncodeFn>
  void Append(std::string_view word, EncodeFn&& encode) {
    if (word.size() < kMinLength) {  // short words: hashing costs about as much as merging
      encode(word, out_);
      return;
    }
    const absl::string_view key(word.data(), word.size());  // Debian's Abseil string_view
    if (auto it = seen_.find(key); it != seen_.end()) {
      const auto [first, count] = it->second;
      for (size_t i = 0; i < count; ++i) out_->push_back((*out_)[first + i]);
      return;
    }
    const size_t first = out_->size();
    encode(word, out_);
    seen_.emplace(key, std::make_pair(first, out_->size() - first));
  }

 private:
  static constexpr size_t kMinLength = 3;
  std::vector<TokenId>* out_;
  absl::flat_hash_map<absl::string_view, std::pair<size_t, size_t>> seen_;
};

}  // namespace tessera::tokenizer
