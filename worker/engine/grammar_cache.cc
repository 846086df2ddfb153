#include "worker/engine/grammar_cache.h"

#include <string>
#include <utility>
#include <vector>

#include "common/grammar/gbnf_parser.h"
#include "common/tokenizer/tokenizer.h"

namespace tessera::worker {

absl::StatusOr<std::shared_ptr<const grammar::TokenTrie>> VocabularyTrie(const gguf::Metadata& md) {
  absl::StatusOr<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::FromMetadata(md);
  if (!tok.ok()) return tok.status();
  const tokenizer::Vocabulary& v = tok->vocab();
  std::vector<std::string> pieces(v.size());
  std::vector<bool> special(v.size(), false);
  for (tokenizer::TokenId id = 0; id < v.size(); ++id) {
    const tokenizer::TokenType type = v.type(id);
    if (type == tokenizer::TokenType::kNormal || type == tokenizer::TokenType::kByte) {
      pieces[id] = std::string(tok->Piece(id, /*render_special=*/false));
      // Bytes no UTF-8 text has: no grammar allows such a token, and they spell special
      // tokens below.
      special[id] = grammar::HasSpecialTokenMarker(pieces[id]);
    } else {
      // Allowed only where a grammar names the token (<[id]>).
      pieces[id] = grammar::SpecialTokenBytes(static_cast<uint32_t>(id));
    }
  }
  return grammar::TokenTrie::Build(pieces, special);
}

GrammarCache::GrammarCache(TrieSource vocab, size_t max_entries, size_t max_bytes)
    : vocab_source_(std::move(vocab)),
      max_entries_(max_entries > 0 ? max_entries : 1),
      max_bytes_(max_bytes) {}

absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> GrammarCache::Get(
    const std::string& gbnf) {
  if (auto it = index_.find(gbnf); it != index_.end()) {
    ++hits_;
    entries_.splice(entries_.begin(), entries_, it->second);
    return entries_.front().compiled;
  }
  if (vocab_ == nullptr) {
    absl::StatusOr<std::shared_ptr<const grammar::TokenTrie>> trie = vocab_source_();
    if (!trie.ok()) return trie.status();
    vocab_ = *std::move(trie);
  }
  ++misses_;
  absl::StatusOr<grammar::Grammar> parsed = grammar::ParseGbnf(gbnf);
  if (!parsed.ok()) return parsed.status();
  entries_.push_front(Entry{gbnf, grammar::CompiledGrammar::Create(*std::move(parsed), vocab_)});
  index_.emplace(gbnf, entries_.begin());
  Evict();
  return entries_.front().compiled;
}

size_t GrammarCache::EstimatedBytes() const {
  size_t total = 0;
  const size_t per_context = vocab_ != nullptr ? vocab_->mask_words() * sizeof(uint64_t) : 0;
  for (const Entry& e : entries_) {
    // Each classified context and each shared vocabulary walk holds up to a mask's bits.
    total += 2 * e.text.size() +
             (e.compiled->cached_contexts() + e.compiled->vocabulary_walks()) * per_context;
  }
  return total;
}

void GrammarCache::Evict() {
  // The entry just used (the front) always stays.
  while (entries_.size() > 1 && (entries_.size() > max_entries_ || EstimatedBytes() > max_bytes_)) {
    index_.erase(entries_.back().text);
    entries_.pop_back();
  }
}

}  // namespace tessera::worker
