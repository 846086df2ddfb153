#include "common/grammar/compiled_grammar.h"

#include <algorithm>
#include <bit>
#include <numeric>
#include <utility>

#include "common/grammar/repetition_levels.h"
#include "common/grammar/token_walk.h"

namespace tessera::grammar {

namespace {

// Walks `ids` (trie order) from the frames of `key` over a stand-in bottom, as the context's
// classification sees them: below the frames lies an unknown stack (kContextNode) whose
// first byte may be any of the FOLLOW set of the deepest frame's rule, or nothing at all
// when the key is a whole stack.
template <typename OnOutcome>
void WalkContext(const Grammar& g, const TokenTrie& trie, const std::vector<uint32_t>& key,
                 absl::Span<const uint32_t> ids, absl::Span<const uint32_t> shared_prefix,
                 size_t horizon, OnOutcome&& on_outcome) {
  const bool whole_stack = key.back() == kAcceptNode;
  const size_t frames = whole_stack ? key.size() - 1 : key.size();
  StackArena arena(&g);
  uint32_t node = whole_stack ? kAcceptNode : kContextNode;
  for (size_t i = frames; i-- > 0;) node = arena.Push(key[i], node);
  const ByteSet* follow = whole_stack ? nullptr : &g.follow(g.rule_of(key[frames - 1]));
  TokenWalk walk;
  walk.Run(arena, trie, ids, shared_prefix, {node}, follow, on_outcome, horizon);
}

std::vector<uint32_t> SharedPrefixes(const TokenTrie& trie, const std::vector<uint32_t>& ids) {
  std::vector<uint32_t> shared(ids.size(), 0);
  for (size_t i = 1; i < ids.size(); ++i) {
    shared[i] = SharedPrefixLength(trie.token(ids[i - 1]), trie.token(ids[i]));
  }
  return shared;
}

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTrie> vocab,
                                 const CompiledGrammarOptions& options)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), options_(options) {
  if (options_.repetition_horizon == 0) {
    canonical_.resize(grammar_.element_count());
    std::iota(canonical_.begin(), canonical_.end(), 0u);
    return;
  }
  canonical_ = CanonicalPositions(grammar_, options_.repetition_horizon);
  bool mapped = false;
  for (uint32_t pos = 0; pos < canonical_.size(); ++pos) mapped |= canonical_[pos] != pos;
  if (mapped) {
    trie_rank_.assign(vocab_->vocab_size(), 0);
    absl::Span<const uint32_t> sorted = vocab_->sorted_ids();
    for (uint32_t i = 0; i < sorted.size(); ++i) trie_rank_[sorted[i]] = i;
  }
}

std::shared_ptr<const CompiledGrammar> CompiledGrammar::Create(
    Grammar grammar, std::shared_ptr<const TokenTrie> vocab,
    const CompiledGrammarOptions& options) {
  return std::shared_ptr<const CompiledGrammar>(
      new CompiledGrammar(std::move(grammar), std::move(vocab), options));
}

size_t CompiledGrammar::cached_contexts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

size_t CompiledGrammar::vocabulary_walks() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t walks = shared_.size();
  for (const auto& entry : cache_) {
    bool mapped = false;
    for (uint32_t pos : entry.first) mapped |= pos != kAcceptNode && canonical_[pos] != pos;
    walks += mapped ? 0 : 1;
  }
  return walks;
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
  if (slot != nullptr) return *slot;
  std::vector<uint32_t> canonical = key;
  for (uint32_t& pos : canonical) {
    if (pos != kAcceptNode) pos = canonical_[pos];
  }
  slot = canonical == key ? Classify(key) : ClassifyCopy(key, canonical);
  return *slot;
}

std::unique_ptr<CompiledGrammar::ContextTokens> CompiledGrammar::Classify(
    const std::vector<uint32_t>& key) const {
  const TokenTrie& trie = *vocab_;
  std::vector<uint32_t> accepted, uncertain;
  WalkContext(grammar_, trie, key, trie.sorted_ids(), trie.shared_prefix(), SIZE_MAX,
              [&](uint32_t id, TokenOutcome outcome) {
                if (outcome == TokenOutcome::kAccepted) accepted.push_back(id);
                if (outcome == TokenOutcome::kUncertain) uncertain.push_back(id);
              });
  return Pack(std::move(accepted), std::move(uncertain));
}

std::unique_ptr<CompiledGrammar::SharedTokens> CompiledGrammar::ClassifyShared(
    const std::vector<uint32_t>& canonical) const {
  const TokenTrie& trie = *vocab_;
  auto out = std::make_unique<SharedTokens>();
  out->accepted_bits.assign(trie.mask_words(), 0);
  WalkContext(grammar_, trie, canonical, trie.sorted_ids(), trie.shared_prefix(),
              options_.repetition_horizon, [&](uint32_t id, TokenOutcome outcome) {
                if (outcome == TokenOutcome::kAccepted) {
                  out->accepted_bits[id >> 6] |= uint64_t{1} << (id & 63);
                }
                if (outcome == TokenOutcome::kUncertain) out->uncertain.push_back(id);
                if (outcome == TokenOutcome::kDeferred) out->deferred.push_back(id);
              });
  out->deferred_shared_prefix = SharedPrefixes(trie, out->deferred);
  return out;
}

std::unique_ptr<CompiledGrammar::ContextTokens> CompiledGrammar::ClassifyCopy(
    const std::vector<uint32_t>& key, const std::vector<uint32_t>& canonical) const {
  std::unique_ptr<SharedTokens>& shared = shared_[canonical];
  if (shared == nullptr) shared = ClassifyShared(canonical);
  std::vector<uint32_t> accepted;
  std::vector<uint32_t> uncertain = shared->uncertain;
  const size_t first_own = uncertain.size();
  WalkContext(grammar_, *vocab_, key, shared->deferred, shared->deferred_shared_prefix, SIZE_MAX,
              [&](uint32_t id, TokenOutcome outcome) {
                if (outcome == TokenOutcome::kAccepted) accepted.push_back(id);
                if (outcome == TokenOutcome::kUncertain) uncertain.push_back(id);
              });
  // Both runs are in trie order; the walk of uncertain tokens needs one.
  std::inplace_merge(uncertain.begin(), uncertain.begin() + static_cast<ptrdiff_t>(first_own),
                     uncertain.end(),
                     [&](uint32_t a, uint32_t b) { return trie_rank_[a] < trie_rank_[b]; });
  return Pack(std::move(accepted), std::move(uncertain), &shared->accepted_bits);
}

std::unique_ptr<CompiledGrammar::ContextTokens> CompiledGrammar::Pack(
    std::vector<uint32_t> accepted, std::vector<uint32_t> uncertain,
    const std::vector<uint64_t>* base_bits) const {
  const TokenTrie& trie = *vocab_;
  auto out = std::make_unique<ContextTokens>();
  size_t count = accepted.size();
  if (base_bits != nullptr) {
    for (uint64_t word : *base_bits) count += std::popcount(word);
  }
  // A list costs 32 bits per token, the bitset one bit per vocabulary entry.
  if (base_bits != nullptr && count * 32 > trie.vocab_size()) {
    out->accepted_bits = *base_bits;
    for (uint32_t id : accepted) out->accepted_bits[id >> 6] |= uint64_t{1} << (id & 63);
  } else if (base_bits != nullptr) {
    for (uint32_t w = 0; w < base_bits->size(); ++w) {
      for (uint64_t word = (*base_bits)[w]; word != 0; word &= word - 1) {
        accepted.push_back(w * 64 + static_cast<uint32_t>(std::countr_zero(word)));
      }
    }
    out->accepted_ids = std::move(accepted);
  } else if (count * 32 > trie.vocab_size()) {
    out->accepted_bits.assign(trie.mask_words(), 0);
    for (uint32_t id : accepted) out->accepted_bits[id >> 6] |= uint64_t{1} << (id & 63);
  } else {
    out->accepted_ids = std::move(accepted);
  }
  out->uncertain_shared_prefix = SharedPrefixes(trie, uncertain);
  out->uncertain_ids = std::move(uncertain);
  return out;
}

}  // namespace tessera::grammar
