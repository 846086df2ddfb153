// The tokens of a stack context inside a counted repetition, classified once for every copy
// count of the repetition (CompiledGrammar).
//
// x{m,n} is one grammar element whose frame counts the copies (stack_arena.h), so a context
// whose top frames hold a repetition frame differs between copies only in that frame's count
// c (1..n, the copy under way). Classify walks the vocabulary once from the context with the
// count left relative: every stack the walk reaches records j, the copies begun after the
// current one (a token of a character-class repetition begins one per character), and
// whether it has left the repetition. A stack with j copies begun is possible for count c
// iff c + j <= n, and one that left the repetition iff also c + j >= m. So each token's
// outcome over c is a union of intervals:
//   accepted   for c in [1, n - j] (a stack alive at the token's end, inside the
//              repetition) or [max(1, m - j), n - j] (one that left it),
//   uncertain  (CompiledGrammar's meaning: decided per request) for c in
//              [max(1, m - j), n - j] where a stack pops below the context's frames,
//   rejected   elsewhere,
// the same sets a walk from the context with count c yields (its stacks are exactly the
// relative walk's stacks that are possible for c). Resolve(c) reads the outcome for one
// count: tokens accepted for every count are one bitset; those accepted for c <= t only (t
// < n, the usual shape: a token of k characters needs k - 1 more copies) are grouped by t,
// so a count costs a bitset copy plus the smaller side of its threshold; the rest keep
// their intervals.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "common/grammar/grammar.h"
#include "common/grammar/stack_arena.h"
#include "common/grammar/token_trie.h"

namespace tessera::grammar {

class RepetitionTokens {
 public:
  // Classifies the tokens `ids` (trie order; `shared_prefix` as TokenTrie's) of the context
  // `frames` (top first, as CompiledGrammar keys contexts; the unknown stack below them is
  // kContextNode, or nothing when `whole_stack`) for every count of `frames[at]`, a kRepeat
  // frame (its count is ignored). The tokens of `accepted_bits` (empty, or a mask) are
  // accepted for every count, the others not in `ids` rejected.
  static std::unique_ptr<RepetitionTokens> Classify(const Grammar& grammar, const TokenTrie& vocab,
                                                    absl::Span<const Frame> frames,
                                                    bool whole_stack, size_t at,
                                                    absl::Span<const uint32_t> ids,
                                                    absl::Span<const uint32_t> shared_prefix,
                                                    std::vector<uint64_t> accepted_bits);

  // The outcome for count `count` (1..max of the repetition): `accepted_bits` (resized to
  // the vocabulary's mask words) gets the accepted ids, `uncertain` (cleared first) the
  // uncertain ids in trie order.
  void Resolve(uint32_t count, std::vector<uint64_t>& accepted_bits,
               std::vector<uint32_t>& uncertain) const;

  // Bytes held, for cache accounting.
  size_t memory_bytes() const;

 private:
  struct Range {
    uint32_t lo, hi;  // counts, inclusive
  };
  // A token whose outcome is neither "accepted for every count" nor a threshold.
  struct Varying {
    uint32_t id;
    uint32_t begin, accepted_end, end;  // ranges_[begin, accepted_end) accepted, then uncertain
  };

  uint32_t max_ = 0;
  std::vector<uint64_t> always_bits_;      // accepted for every count
  std::vector<uint64_t> all_bits_;         // always_bits_ and every threshold token
  std::vector<uint32_t> threshold_ids_;    // accepted iff count <= t, ascending t
  std::vector<uint32_t> below_threshold_;  // [c]: how many of threshold_ids_ have t < c
  std::vector<Varying> varying_;           // trie order
  std::vector<Range> ranges_;
};

}  // namespace tessera::grammar
