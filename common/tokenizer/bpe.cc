#include "common/tokenizer/bpe.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/word_cache.h"

namespace tessera::tokenizer {

absl::StatusOr<BpeEncoder> BpeEncoder::Create(const Vocabulary* vocab) {
  if (vocab->kind() != VocabKind::kBytePairEncoding || vocab->pre_tokenizer() == nullptr) {
    return absl::InvalidArgumentError("BPE encoder: the vocabulary is not byte-level BPE");
  }
  auto pre = PreTokenizer::Create(*vocab->pre_tokenizer());
  if (!pre.ok()) return pre.status();
  BpeEncoder encoder(vocab, std::move(*pre));
  for (int b = 0; b < 256; ++b) encoder.byte_token_[b] = vocab->Find(ByteToChar(b));
  return encoder;
}

namespace {

// A symbol of the word being merged: a token id and its neighbours (a linked list over the
// initial byte positions, so merged-away symbols are skipped in O(1)).
struct Symbol {
  TokenId id;
  int prev;
  int next;
};

// A candidate merge of symbols[left] and the symbol after it. Ordered by rank, then by
// position, so equal pairs merge left to right (llama.cpp's llm_bigram_bpe).
struct Candidate {
  int32_t rank;
  int left;
  TokenId left_id;
  TokenId right_id;
  TokenId result;
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

}  // namespace

// Buffers reused across the words of one Encode call.
struct BpeEncoder::Scratch {
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::string byte_level;
};

void BpeEncoder::Encode(std::string_view text, std::vector<TokenId>* out) const {
  std::vector<std::string_view> words;
  pre_.Split(text, &words);
  Scratch scratch;
  WordCache cache(out);
  for (std::string_view word : words) {
    cache.Append(word,
                 [&](std::string_view w, std::vector<TokenId>* o) { EncodeWord(w, scratch, o); });
  }
}

void BpeEncoder::EncodeWord(std::string_view word, Scratch& scratch,
                            std::vector<TokenId>* out) const {
  if (vocab_->pre_tokenizer()->ignore_merges) {
    std::string& byte_level = scratch.byte_level;
    byte_level.clear();
    AppendByteLevel(word, &byte_level);
    if (TokenId id = vocab_->Find(byte_level); id != kNoToken) {
      out->push_back(id);
      return;
    }
  }
  const int n = static_cast<int>(word.size());
  if (n == 1) {
    if (TokenId id = byte_token_[static_cast<uint8_t>(word[0])]; id != kNoToken) {
      out->push_back(id);
    }
    return;
  }
  // Every byte starts as its own symbol: one byte-level character each.
  std::vector<Symbol>& symbols = scratch.symbols;
  symbols.resize(n);
  for (int i = 0; i < n; ++i) {
    symbols[i] = {byte_token_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  // A min-heap (std::greater) over the reused buffer.
  std::vector<Candidate>& heap = scratch.heap;
  heap.clear();
  auto push = [&](const Candidate& c) {
    heap.push_back(c);
    std::push_heap(heap.begin(), heap.end(), std::greater<Candidate>());
  };
  auto try_add = [&](int left) {
    if (left < 0) return;
    const int right = symbols[left].next;
    if (right < 0) return;
    const TokenId l = symbols[left].id, r = symbols[right].id;
    if (l == kNoToken || r == kNoToken) return;
    if (const Vocabulary::Merge* m = vocab_->FindMerge(l, r)) {
      push({m->rank, left, l, r, m->result});
    }
  };
  for (int i = 0; i + 1 < n; ++i) try_add(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Candidate>());
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = symbols[c.left];
    // Stale when either side has merged since the candidate was queued.
    if (left.id != c.left_id || left.next < 0 || symbols[left.next].id != c.right_id) continue;
    const int right = left.next;
    left.id = c.result;
    left.next = symbols[right].next;
    if (left.next >= 0) symbols[left.next].prev = c.left;
    symbols[right].id = kNoToken;
    try_add(left.prev);
    try_add(c.left);
  }
  // A symbol without a token only arises from a byte missing from the vocabulary: drop it.
  for (int i = 0; i >= 0; i = symbols[i].next) {
    if (symbols[i].id != kNoToken) out->push_back(symbols[i].id);
  }
}

}  // namespace tessera::tokenizer
