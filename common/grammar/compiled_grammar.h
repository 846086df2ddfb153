// A Grammar bound to a vocabulary, with a cache of token classifications that makes token
// masks cheap (the idea of XGrammar, Dong et al. 2024, "adaptive token mask cache").
//
// A stack's top frames decide most tokens on their own. For a stack context — the frames
// (positions and copy counts) of its top kContextDepth nodes, top first, repetition frames
// not counted — each eligible token is classified once:
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
//
// A bounded repetition x{m,n} is one grammar element whose frame counts its copies
// (stack_arena.h), so the contexts inside its n copies differ only in that count. A context
// with a repetition frame among its top frames is classified for every count at once
// (repetition_tokens.h: one vocabulary walk with the count left relative), and each count
// met is read from that classification (a bitset copy and a few adjustments) into the
// context's own entry, exact for every token.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/grammar/grammar.h"
#include "common/grammar/repetition_tokens.h"
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
  // Walks over the whole vocabulary so far (at most cached_contexts() plus the shared top
  // frames): the other classifications walk a subset or none.
  size_t vocabulary_walks() const;

 private:
  // Top frames of a stack, top first; a trailing kWholeStack frame marks a whole stack.
  using ContextKey = std::vector<Frame>;
  static constexpr Frame kWholeStack = {UINT32_MAX, UINT32_MAX};

  // Top frames of a deeper context classified on their own (unknown below) and shared.
  static constexpr size_t kPrefixDepth = 2;

  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTrie> vocab);
  std::unique_ptr<ContextTokens> Classify(const ContextKey& key) const;
  // The classification of the top kPrefixDepth frames of `key`, or nullptr when `key` is not
  // deeper or they hold a repetition's frame.
  const ContextTokens* PrefixTokens(const ContextKey& key) const;
  std::unique_ptr<ContextTokens> Walk(const ContextKey& key, absl::Span<const uint32_t> ids,
                                      absl::Span<const uint32_t> shared_prefix,
                                      std::vector<uint64_t> accepted_bits) const;
  std::vector<uint64_t> AcceptedBits(const ContextTokens& tokens) const;
  // `key` whose frame `at` is a repetition's, through the classification for every count.
  std::unique_ptr<ContextTokens> ClassifyRepetition(const ContextKey& key, size_t at) const;
  std::unique_ptr<ContextTokens> Pack(std::vector<uint32_t> accepted,
                                      std::vector<uint32_t> uncertain) const;
  std::unique_ptr<ContextTokens> PackBits(std::vector<uint64_t> accepted_bits,
                                          std::vector<uint32_t> uncertain) const;

  Grammar grammar_;
  std::shared_ptr<const TokenTrie> vocab_;
  mutable std::mutex mu_;
  mutable absl::flat_hash_map<ContextKey, std::unique_ptr<ContextTokens>> cache_;
  // Keyed by the context with the repetition frame's count set to 0.
  mutable absl::flat_hash_map<ContextKey, std::unique_ptr<RepetitionTokens>> repetitions_;
  mutable absl::flat_hash_map<ContextKey, std::unique_ptr<ContextTokens>> prefixes_;
  mutable size_t vocabulary_walks_ = 0;
};

}  // namespace tessera::grammar
