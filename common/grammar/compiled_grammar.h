// A Grammar bound to a vocabulary, with a cache of token classifications that makes token
// masks cheap (the idea of XGrammar, Dong et al. 2024, "adaptive token mask cache").
//
// A stack's top frames decide most tokens on their own. For a stack context — the positions
// of its top kContextDepth nodes, top first — each eligible token is classified once:
//   accepted   - some path consumes the whole token without popping below those frames:
//                allowed whatever the rest of the stack is;
//   rejected   - every path fails within the frames, or pops below them at a byte that
//                cannot follow the deepest frame's rule anywhere in the grammar (FOLLOW);
//   uncertain  - only paths that pop below the frames can go on: decided per request by
//                walking the real stack (Matcher::FillMask).
// A stack no deeper than kContextDepth is its own context and has no uncertain tokens.
//
// Classifying a context walks the vocabulary once (pruned at the first byte that leaves the
// grammar); it happens the first time a matcher meets the context and is cached here for
// every matcher of this grammar: the cost of a grammar is paid by its first requests. One
// instance per (grammar, vocabulary) pair, shared; thread-safe (the cache takes a lock).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/grammar/grammar.h"
#include "common/grammar/stack_arena.h"
#include "common/grammar/token_trie.h"

namespace tessera::grammar {

class CompiledGrammar {
 public:
  // Frames of a stack that key the classification cache.
  static constexpr size_t kContextDepth = 4;

  // The classification of the tokens for one stack context.
  struct ContextTokens {
    // Accepted ids: a bitset over the vocabulary when there are many, else a list.
    std::vector<uint64_t> accepted_bits;
    std::vector<uint32_t> accepted_ids;
    // Uncertain tokens as ids in trie order, with the prefix each shares with the previous.
    std::vector<uint32_t> uncertain_ids;
    std::vector<uint32_t> uncertain_shared_prefix;
  };

  static std::shared_ptr<const CompiledGrammar> Create(Grammar grammar,
                                                       std::shared_ptr<const TokenTrie> vocab);

  const Grammar& grammar() const { return grammar_; }
  const TokenTrie& vocab() const { return *vocab_; }

  // The classification for the context of stack `node` of `arena` (a node whose position is
  // a kBytes element), computed on first use. The reference stays valid for the lifetime of
  // this object.
  const ContextTokens& TokensFor(const StackArena& arena, uint32_t node) const;

  // Contexts classified so far.
  size_t cached_contexts() const;

 private:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTrie> vocab)
      : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {}
  // Key: positions of the top frames, top first; a trailing kAcceptNode marks a whole stack.
  std::unique_ptr<ContextTokens> Classify(const std::vector<uint32_t>& key) const;

  Grammar grammar_;
  std::shared_ptr<const TokenTrie> vocab_;
  mutable std::mutex mu_;
  mutable absl::flat_hash_map<std::vector<uint32_t>, std::unique_ptr<ContextTokens>> cache_;
};

}  // namespace tessera::grammar
