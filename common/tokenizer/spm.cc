#include "common/tokenizer/spm.h"

#include <algorithm>
#include <queue>

#include "common/tokenizer/utf8.h"
#include "common/tokenizer/word_cache.h"

namespace tessera::tokenizer {
namespace {

// A piece of the text: [start, start + size) (size 0 once merged into its left neighbour).
struct Piece {
  size_t start;
  size_t size;
  int prev;
  int next;
};

// A candidate merge; the best has the highest score, then the leftmost position
// (llama.cpp's llm_bigram_spm).
struct Candidate {
  float score;
  int left;
  int right;
  size_t size;
  bool operator<(const Candidate& o) const {
    return score != o.score ? score < o.score : left > o.left;
  }
};

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 "▁"

// True when `text` has "▁" right after some other character.
bool HasInnerSpace(std::string_view text) {
  for (size_t p = text.find(kSpace, 1); p != std::string_view::npos; p = text.find(kSpace, p + 1)) {
    if (p < kSpace.size() || text.substr(p - kSpace.size(), kSpace.size()) != kSpace) return true;
  }
  return false;
}

}  // namespace

SpmEncoder::SpmEncoder(const Vocabulary* vocab) : vocab_(vocab) {
  split_at_spaces_ = true;
  for (TokenId id = 0; id < vocab_->size() && split_at_spaces_; ++id) {
    if (HasInnerSpace(vocab_->text(id))) split_at_spaces_ = false;
  }
}

void SpmEncoder::Encode(std::string_view text, std::vector<TokenId>* out) const {
  if (!split_at_spaces_) return EncodeChunk(text, out);
  WordCache cache(out);
  auto encode = [this](std::string_view chunk, std::vector<TokenId>* o) { EncodeChunk(chunk, o); };
  // Cut before every "▁" run that follows another character.
  size_t start = 0;
  for (size_t p = text.find(kSpace, 1); p != std::string_view::npos;
       p = text.find(kSpace, p + kSpace.size())) {
    if (p >= kSpace.size() && text.substr(p - kSpace.size(), kSpace.size()) == kSpace) continue;
    cache.Append(text.substr(start, p - start), encode);
    start = p;
  }
  cache.Append(text.substr(start), encode);
}

void SpmEncoder::EncodeChunk(std::string_view text, std::vector<TokenId>* out) const {
  const Vocabulary& vocab = *vocab_;
  std::vector<Piece> pieces;
  for (size_t offset = 0; offset < text.size();) {
    const size_t n = std::min(Utf8SequenceLength(text[offset]), text.size() - offset);
    const int index = static_cast<int>(pieces.size());
    pieces.push_back({offset, n, index - 1, offset + n < text.size() ? index + 1 : -1});
    offset += n;
  }
  if (pieces.empty()) return;

  std::priority_queue<Candidate> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t size = pieces[left].size + pieces[right].size;
    const TokenId id = vocab.Find(text.substr(pieces[left].start, size));
    if (id == kNoToken) return;
    queue.push({vocab.score(id), left, right, size});
  };
  for (int i = 1; i < static_cast<int>(pieces.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Piece& left = pieces[c.left];
    Piece& right = pieces[c.right];
    // Stale when either side has changed since the candidate was queued.
    if (left.size == 0 || right.size == 0 || left.size + right.size != c.size) continue;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) pieces[right.next].prev = c.left;
    try_add(left.prev, c.left);
    try_add(c.left, left.next);
  }

  for (int i = 0; i >= 0; i = pieces[i].next) {
    const std::string_view piece = text.substr(pieces[i].start, pieces[i].size);
    if (TokenId id = vocab.Find(piece); id != kNoToken) {
      out->push_back(id);
      continue;
    }
    // Only single characters can fail here (merges always form tokens): byte fallback.
    for (char b : piece) {
      TokenId id = vocab.ByteToken(static_cast<uint8_t>(b));
      if (id == kNoToken) id = vocab.special().unk;
      if (id != kNoToken) out->push_back(id);
    }
  }
}

}  // namespace tessera::tokenizer
