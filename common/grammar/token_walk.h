// Walking a sorted token list (TokenTrie order) through the pushdown automaton, sharing the
// parse state of common prefixes and skipping every token that starts with a prefix the
// grammar refuses. Used to classify tokens (CompiledGrammar, RepetitionTokens) and to check
// the uncertain ones against a real stack (Matcher).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/types/span.h"
#include "common/grammar/stack_arena.h"
#include "common/grammar/token_trie.h"

namespace tessera::grammar {

// The sets of stacks a walk meets, interned, with the step from a set by a byte cached: a
// walk advances the same set by the same byte over and over (inside a string every
// character leads back to the same stacks), so each (set, byte) pair is advanced through
// the arena once per walk and is a table lookup afterwards.
class StackSets {
 public:
  static constexpr uint32_t kEmpty = 0;

  // The sets are scratch for one walk: a copy starts empty (its index refers to its own pool).
  StackSets() = default;
  StackSets(const StackSets&) : StackSets() {}
  StackSets& operator=(const StackSets&) {
    Clear();
    return *this;
  }

  // Forgets every set (the arena's nodes may be truncated between walks).
  void Clear() {
    begin_.assign({0, 0});
    stacks_.clear();
    index_.clear();
    index_.insert(kEmpty);
    next_.clear();
  }
  // The id of the set `stacks` (in the order given).
  uint32_t Add(absl::Span<const uint32_t> stacks) {
    auto it = index_.find(stacks);
    if (it != index_.end()) return *it;
    stacks_.insert(stacks_.end(), stacks.begin(), stacks.end());
    begin_.push_back(static_cast<uint32_t>(stacks_.size()));
    const uint32_t set = static_cast<uint32_t>(begin_.size() - 2);
    index_.insert(set);
    return set;
  }
  absl::Span<const uint32_t> stacks(uint32_t set) const {
    return absl::MakeConstSpan(stacks_).subspan(begin_[set], begin_[set + 1] - begin_[set]);
  }
  size_t size() const { return begin_.size() - 1; }
  // The set reached from `set` by `byte` (StackArena::Advance, cached).
  uint32_t Next(StackArena& arena, uint32_t set, uint8_t byte) {
    auto [it, inserted] = next_.try_emplace((uint64_t{set} << 8) | byte, kEmpty);
    if (inserted) {
      arena.Advance(stacks(set), byte, scratch_);  // reads stacks_, which only Add changes
      it->second = Add(scratch_);
    }
    return it->second;
  }

 private:
  // Sets are interned by their stacks, looked up as spans (no key is allocated).
  struct SetHash {
    using is_transparent = void;
    const StackSets* sets;
    size_t operator()(absl::Span<const uint32_t> stacks) const { return absl::HashOf(stacks); }
    size_t operator()(uint32_t set) const { return (*this)(sets->stacks(set)); }
  };
  struct SetEq {
    using is_transparent = void;
    const StackSets* sets;
    absl::Span<const uint32_t> Of(absl::Span<const uint32_t> stacks) const { return stacks; }
    absl::Span<const uint32_t> Of(uint32_t set) const { return sets->stacks(set); }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return Of(a) == Of(b);
    }
  };

  std::vector<uint32_t> begin_ = {0, 0};  // set -> its first stack in stacks_ (size sets + 1)
  std::vector<uint32_t> stacks_;
  absl::flat_hash_set<uint32_t, SetHash, SetEq> index_{0, SetHash{this}, SetEq{this}};
  absl::flat_hash_map<uint64_t, uint32_t> next_;  // (set << 8 | byte) -> set
  std::vector<uint32_t> scratch_;
};

enum class TokenOutcome : uint8_t { kRejected, kAccepted, kUncertain };

// The index past the tokens of `ids` from `i` on that start with the first `depth` bytes of
// ids[i]; a dead first byte of a walk over the whole vocabulary skips in one step.
inline size_t SkipDeadPrefix(const TokenTrie& vocab, absl::Span<const uint32_t> ids,
                             absl::Span<const uint32_t> shared_prefix, size_t i, size_t depth) {
  if (depth == 1 && ids.data() == vocab.sorted_ids().data()) {
    return vocab.first_byte_end(static_cast<uint8_t>(vocab.token(ids[i])[0]));
  }
  ++i;
  while (i < ids.size() && shared_prefix[i] >= depth) ++i;
  return i;
}

class TokenWalk {
 public:
  // Walks `ids` (token ids in trie order; `shared_prefix[i]` is the prefix ids[i] shares with
  // ids[i-1]) from the stack set `start`, calling on_outcome(id, TokenOutcome) for every
  // token that is not rejected. `follow`, when given, is the set of bytes that may follow the rule
  // the walk starts in: a path that pops into kContextNode and meets one of them makes the token
  // kUncertain if no path accepts it. Scratch nodes stay in `arena` (the caller truncates).
  template <typename OnOutcome>
  void Run(StackArena& arena, const TokenTrie& vocab, absl::Span<const uint32_t> ids,
           absl::Span<const uint32_t> shared_prefix, const std::vector<uint32_t>& start,
           const ByteSet* follow, OnOutcome&& on_outcome) {
    sets_.Clear();
    has_context_.clear();
    levels_.assign(1, sets_.Add(start));
    escaped_.assign(1, false);
    size_t valid = 0;  // levels_[0..valid] hold the states of the current prefix
    size_t i = 0;
    while (i < ids.size()) {
      std::string_view bytes = vocab.token(ids[i]);
      size_t depth = std::min<size_t>(i == 0 ? 0 : shared_prefix[i], valid);
      bool dead = false;
      while (depth < bytes.size()) {
        if (levels_.size() <= depth + 1) {
          levels_.resize(depth + 2);
          escaped_.resize(depth + 2);
        }
        const uint8_t byte = static_cast<uint8_t>(bytes[depth]);
        bool escaped = escaped_[depth];
        if (follow != nullptr && !escaped && follow->Contains(byte)) {
          escaped = HasContext(levels_[depth]);
        }
        levels_[depth + 1] = sets_.Next(arena, levels_[depth], byte);
        escaped_[depth + 1] = escaped;
        ++depth;
        if (levels_[depth] == StackSets::kEmpty) {
          dead = true;
          break;
        }
      }
      valid = depth;
      if (!dead) {
        on_outcome(ids[i++], TokenOutcome::kAccepted);
        continue;
      }
      // Every following token that starts with this dead prefix ends the same way.
      if (!escaped_[depth]) {
        i = SkipDeadPrefix(vocab, ids, shared_prefix, i, depth);
        continue;
      }
      on_outcome(ids[i++], TokenOutcome::kUncertain);
      while (i < ids.size() && shared_prefix[i] >= depth) {
        on_outcome(ids[i++], TokenOutcome::kUncertain);
      }
    }
  }

 private:
  // Whether set `set` holds kContextNode (a path popped below the walk's frames).
  bool HasContext(uint32_t set) {
    while (has_context_.size() <= set) {
      const absl::Span<const uint32_t> stacks = sets_.stacks(has_context_.size());
      has_context_.push_back(std::find(stacks.begin(), stacks.end(), kContextNode) != stacks.end());
    }
    return has_context_[set];
  }

  StackSets sets_;
  std::vector<bool> has_context_;  // per set
  std::vector<uint32_t> levels_;   // per depth: the set of the current prefix
  std::vector<bool> escaped_;
};

}  // namespace tessera::grammar
