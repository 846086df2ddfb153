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
//
// The copies of a bounded repetition (x{0,40} is 40 nested rules) would each be contexts of
// their own. A context whose frames repetition_levels.h maps elsewhere is classified from
// the mapped context's walk instead, which is shared by all the copies and exact for every
// token it decides within CompiledGrammarOptions::repetition_horizon bytes; only the tokens
// still alive there are walked again from the context's own frames.
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

struct CompiledGrammarOptions {
  // Bytes of a token that a shared classification of repetition copies decides; longer
  // tokens alive there are walked again per context. 0 classifies every copy on its own
  // (the baseline of grammar_bench).
  uint32_t repetition_horizon = 16;
};

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
                                                       std::shared_ptr<const TokenTrie> vocab,
                                                       const CompiledGrammarOptions& options = {});

  const Grammar& grammar() const { return grammar_; }
  const TokenTrie& vocab() const { return *vocab_; }

  // The classification for the context of stack `node` of `arena` (a node whose position is
  // a kBytes element), computed on first use. The reference stays valid for the lifetime of
  // this object.
  const ContextTokens& TokensFor(const StackArena& arena, uint32_t node) const;

  // Contexts classified so far.
  size_t cached_contexts() const;
  // Walks over the whole vocabulary so far: contexts classified from scratch plus shared
  // classifications of repetition copies (at most cached_contexts() + the shared ones).
  size_t vocabulary_walks() const;

 private:
  // The classification of a mapped context, shared by the contexts that map to it: exact
  // for the accepted (a bitset) and uncertain ids; `deferred` (trie order) still to be
  // walked per context.
  struct SharedTokens {
    std::vector<uint64_t> accepted_bits;
    std::vector<uint32_t> uncertain, deferred, deferred_shared_prefix;
  };

  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTrie> vocab,
                  const CompiledGrammarOptions& options);
  // Key: positions of the top frames, top first; a trailing kAcceptNode marks a whole stack.
  std::unique_ptr<ContextTokens> Classify(const std::vector<uint32_t>& key) const;
  // `key` whose mapped form is `canonical` (!= key), through the shared classification.
  std::unique_ptr<ContextTokens> ClassifyCopy(const std::vector<uint32_t>& key,
                                              const std::vector<uint32_t>& canonical) const;
  std::unique_ptr<SharedTokens> ClassifyShared(const std::vector<uint32_t>& canonical) const;
  // `base_bits`, when given, are accepted too (the result is then a bitset).
  std::unique_ptr<ContextTokens> Pack(std::vector<uint32_t> accepted,
                                      std::vector<uint32_t> uncertain,
                                      const std::vector<uint64_t>* base_bits = nullptr) const;

  Grammar grammar_;
  std::shared_ptr<const TokenTrie> vocab_;
  CompiledGrammarOptions options_;
  std::vector<uint32_t> canonical_;  // position -> its repetition_levels.h equivalent
  std::vector<uint32_t> trie_rank_;  // token id -> index in vocab sorted order (if needed)
  mutable std::mutex mu_;
  mutable absl::flat_hash_map<std::vector<uint32_t>, std::unique_ptr<ContextTokens>> cache_;
  mutable absl::flat_hash_map<std::vector<uint32_t>, std::unique_ptr<SharedTokens>> shared_;
};

}  // namespace tessera::grammar
