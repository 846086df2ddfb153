// Walking a sorted token list (TokenTrie order) through the pushdown automaton, sharing the
// parse state of common prefixes and skipping every token that starts with a prefix the
// grammar refuses. Used to classify tokens (CompiledGrammar) and to check the uncertain ones
// against a real stack (Matcher).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/grammar/stack_arena.h"
#include "common/grammar/token_trie.h"

namespace tessera::grammar {

// kDeferred: the token is longer than the walk's horizon and still alive there (below).
enum class TokenOutcome : uint8_t { kRejected, kAccepted, kUncertain, kDeferred };

class TokenWalk {
 public:
  // Walks `ids` (token ids in trie order; `shared_prefix[i]` is the prefix ids[i] shares with
  // ids[i-1]) from the stack set `start`, calling on_outcome(id, TokenOutcome) for every
  // token. `follow`, when given, is the set of bytes that may follow the rule the walk starts
  // in: a path that pops into kContextNode and meets one of them makes the token kUncertain
  // if no path accepts it. A token longer than `horizon` bytes whose first `horizon` bytes
  // are alive is kDeferred, unwalked past them. Scratch nodes stay in `arena` (the caller
  // truncates).
  template <typename OnOutcome>
  void Run(StackArena& arena, const TokenTrie& vocab, absl::Span<const uint32_t> ids,
           absl::Span<const uint32_t> shared_prefix, const std::vector<uint32_t>& start,
           const ByteSet* follow, OnOutcome&& on_outcome, size_t horizon = SIZE_MAX) {
    if (levels_.empty()) levels_.resize(1);
    levels_[0] = start;
    escaped_.assign(1, false);
    size_t valid = 0;  // levels_[0..valid] hold the states of the current prefix
    size_t i = 0;
    while (i < ids.size()) {
      std::string_view bytes = vocab.token(ids[i]);
      size_t depth = std::min<size_t>(i == 0 ? 0 : shared_prefix[i], valid);
      bool dead = false;
      bool deferred = false;
      while (depth < bytes.size()) {
        if (depth == horizon) {
          deferred = true;
          break;
        }
        if (levels_.size() <= depth + 1) levels_.resize(depth + 2);
        if (escaped_.size() <= depth + 1) escaped_.resize(depth + 2);
        const uint8_t byte = static_cast<uint8_t>(bytes[depth]);
        bool escaped = escaped_[depth];
        if (follow != nullptr && !escaped && follow->Contains(byte)) {
          for (uint32_t node : levels_[depth]) escaped |= node == kContextNode;
        }
        arena.Advance(levels_[depth], byte, levels_[depth + 1]);
        escaped_[depth + 1] = escaped;
        ++depth;
        if (levels_[depth].empty()) {
          dead = true;
          break;
        }
      }
      valid = depth;
      if (deferred) {
        // Every following token that starts with this live prefix is longer than it too.
        on_outcome(ids[i++], TokenOutcome::kDeferred);
        while (i < ids.size() && shared_prefix[i] >= depth) {
          on_outcome(ids[i++], TokenOutcome::kDeferred);
        }
        continue;
      }
      if (!dead) {
        on_outcome(ids[i++], TokenOutcome::kAccepted);
        continue;
      }
      // Every following token that starts with this dead prefix ends the same way.
      TokenOutcome outcome = escaped_[depth] ? TokenOutcome::kUncertain : TokenOutcome::kRejected;
      on_outcome(ids[i++], outcome);
      while (i < ids.size() && shared_prefix[i] >= depth) on_outcome(ids[i++], outcome);
    }
  }

 private:
  std::vector<std::vector<uint32_t>> levels_;
  std::vector<bool> escaped_;
};

}  // namespace tessera::grammar
