#include "common/grammar/compiled_grammar.h"

#include <utility>

#include "common/grammar/token_walk.h"

namespace tessera::grammar {

std::shared_ptr<const CompiledGrammar> CompiledGrammar::Create(
    Grammar grammar, std::shared_ptr<const TokenTrie> vocab) {
  return std::shared_ptr<const CompiledGrammar>(
      new CompiledGrammar(std::move(grammar), std::move(vocab)));
}

size_t CompiledGrammar::cached_contexts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

const CompiledGrammar::ContextTokens& CompiledGrammar::TokensFor(const StackArena& arena,
                                                                 uint32_t node) const {
  std::vector<uint32_t> key;
  for (; key.size() < kContextDepth && node != kAcceptNode; node = arena.parent(node)) {
    key.push_back(arena.position(node));
  }
  if (node == kAcceptNode) key.push_back(kAcceptNode);
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<ContextTokens>& slot = cache_[key];
  // Classified under the lock: matchers meeting a new context wait for the first one.
  if (slot == nullptr) slot = Classify(key);
  return *slot;
}

std::unique_ptr<CompiledGrammar::ContextTokens> CompiledGrammar::Classify(
    const std::vector<uint32_t>& key) const {
  const Grammar& g = grammar_;
  const TokenTrie& trie = *vocab_;
  const bool whole_stack = key.back() == kAcceptNode;
  const size_t frames = whole_stack ? key.size() - 1 : key.size();
  // Rebuild the frames over a stand-in bottom.
  StackArena arena(&g);
  uint32_t node = whole_stack ? kAcceptNode : kContextNode;
  for (size_t i = frames; i-- > 0;) node = arena.Push(key[i], node);
  const ByteSet* follow = whole_stack ? nullptr : &g.follow(g.rule_of(key[frames - 1]));

  auto out = std::make_unique<ContextTokens>();
  std::vector<uint32_t> accepted;
  TokenWalk walk;
  walk.Run(arena, trie, trie.sorted_ids(), trie.shared_prefix(), {node}, follow,
           [&](uint32_t id, TokenOutcome outcome) {
             if (outcome == TokenOutcome::kAccepted) accepted.push_back(id);
             if (outcome == TokenOutcome::kUncertain) out->uncertain_ids.push_back(id);
           });
  // A list costs 32 bits per token, the bitset one bit per vocabulary entry.
  if (accepted.size() * 32 > trie.vocab_size()) {
    out->accepted_bits.assign(trie.mask_words(), 0);
    for (uint32_t id : accepted) out->accepted_bits[id >> 6] |= uint64_t{1} << (id & 63);
  } else {
    out->accepted_ids = std::move(accepted);
  }
  out->uncertain_shared_prefix.resize(out->uncertain_ids.size(), 0);
  for (size_t i = 1; i < out->uncertain_ids.size(); ++i) {
    out->uncertain_shared_prefix[i] = SharedPrefixLength(trie.token(out->uncertain_ids[i - 1]),
                                                         trie.token(out->uncertain_ids[i]));
  }
  return out;
}

}  // namespace tessera::grammar
