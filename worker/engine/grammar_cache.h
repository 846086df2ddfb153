// Compiled structured-output grammars of one worker, by their GBNF text: a request's grammar
// is parsed and bound to the vocabulary once, and its token classifications (the costly
// part, compiled_grammar.h) are shared by every later request with the same text.
//
//   GrammarCache cache(VocabularyTrie(metadata));  // or a lazily built trie
//   absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> g = cache.Get(gbnf);
//
// Least recently used entries are dropped when there are more than `max_entries` or their
// estimated memory (text plus cached classifications and shared walks, which grow as requests meet
// new parser states) passes `max_bytes`; grammars still in use by a generation live on with it. Not
// thread-safe (the step engine calls it from its own thread).
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/gguf/metadata.h"
#include "common/grammar/compiled_grammar.h"
#include "common/grammar/token_trie.h"

namespace tessera::worker {

// The vocabulary of a model's tokenizer as the grammar engine sees it: each token's bytes
// (byte-level BPE and SentencePiece pieces decoded, byte tokens as their byte); control,
// unknown, user-defined and unused tokens are spelled grammar::SpecialTokenBytes(id), so a
// grammar allows one only where it names it (GBNF `<[id]>`), and ordinary tokens holding
// bytes 0xFE/0xFF (never UTF-8) are left out.
absl::StatusOr<std::shared_ptr<const grammar::TokenTrie>> VocabularyTrie(const gguf::Metadata& md);

class GrammarCache {
 public:
  using TrieSource = std::function<absl::StatusOr<std::shared_ptr<const grammar::TokenTrie>>()>;

  static constexpr size_t kDefaultMaxEntries = 64;
  static constexpr size_t kDefaultMaxBytes = size_t{256} << 20;

  // `vocab` is asked for the trie on the first Get (and again until it succeeds).
  explicit GrammarCache(TrieSource vocab, size_t max_entries = kDefaultMaxEntries,
                        size_t max_bytes = kDefaultMaxBytes);

  // The grammar compiled from `gbnf`: cached, or parsed now. INVALID_ARGUMENT when the text
  // is not a valid grammar; the trie source's error when there is no vocabulary.
  absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> Get(const std::string& gbnf);

  size_t size() const { return entries_.size(); }
  // Parses (misses) and lookups served from the cache (hits) so far.
  size_t misses() const { return misses_; }
  size_t hits() const { return hits_; }
  // The estimate Get bounds by max_bytes.
  size_t EstimatedBytes() const;

 private:
  struct Entry {
    std::string text;
    std::shared_ptr<const grammar::CompiledGrammar> compiled;
  };
  void Evict();

  TrieSource vocab_source_;
  std::shared_ptr<const grammar::TokenTrie> vocab_;
  size_t max_entries_;
  size_t max_bytes_;
  std::list<Entry> entries_;  // most recently used first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index_;
  size_t misses_ = 0;
  size_t hits_ = 0;
};

}  // namespace tessera::worker
