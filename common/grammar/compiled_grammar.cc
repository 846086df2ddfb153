#include "common/grammar/compiled_grammar.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "common/grammar/token_walk.h"

namespace tessera::grammar {

namespace {

std::vector<uint32_t> SharedPrefixes(const TokenTrie& trie, const std::vector<uint32_t>& ids) {
  std::vector<uint32_t> shared(ids.size(), 0);
  for (size_t i = 1; i < ids.size(); ++i) {
    shared[i] = SharedPrefixLength(trie.token(ids[i - 1]), trie.token(ids[i]));
  }
  return shared;
}

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTrie> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {}

std::shared_ptr<const CompiledGrammar> CompiledGrammar::Create(
    Grammar grammar, std::shared_ptr<const TokenTrie> vocab) {
  return std::shared_ptr<const CompiledGrammar>(
      new CompiledGrammar(std::move(grammar), std::move(vocab)));
}

size_t CompiledGrammar::cached_contexts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

size_t CompiledGrammar::vocabulary_walks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return vocabulary_walks_;
}

const CompiledGrammar::ContextTokens& CompiledGrammar::TokensFor(const StackArena& arena,
                                                                 uint32_t node) const {
  ContextKey key;
  // A repetition's frame sits between a copy's frames and its caller's; it is not counted,
  // so that a context reaches as far down as one without repetitions.
  for (size_t depth = 0; depth < kContextDepth && node != kAcceptNode; node = arena.parent(node)) {
    key.push_back({arena.position(node), arena.count(node)});
    if (grammar_.element(key.back().pos).kind != Element::Kind::kRepeat) ++depth;
  }
  if (node == kAcceptNode) key.push_back(kWholeStack);
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<ContextTokens>& slot = cache_[key];
  // Classified under the lock: matchers meeting a new context wait for the first one.
  if (slot != nullptr) return *slot;
  // The topmost repetition frame, if any, is classified for every count at once.
  for (size_t at = 0; at < key.size(); ++at) {
    if (key[at] == kWholeStack) break;
    if (grammar_.element(key[at].pos).kind == Element::Kind::kRepeat) {
      slot = ClassifyRepetition(key, at);
      return *slot;
    }
  }
  slot = Classify(key);
  return *slot;
}

const CompiledGrammar::ContextTokens* CompiledGrammar::PrefixTokens(const ContextKey& key) const {
  const size_t frames = key.back() == kWholeStack ? key.size() - 1 : key.size();
  if (frames <= kPrefixDepth) return nullptr;
  for (size_t i = 0; i < kPrefixDepth; ++i) {
    if (grammar_.element(key[i].pos).kind == Element::Kind::kRepeat) return nullptr;
  }
  ContextKey prefix(key.begin(), key.begin() + kPrefixDepth);
  std::unique_ptr<ContextTokens>& slot = prefixes_[prefix];
  if (slot == nullptr) {
    const TokenTrie& trie = *vocab_;
    slot = Walk(prefix, trie.sorted_ids(), trie.shared_prefix(), {});
    ++vocabulary_walks_;
  }
  return slot.get();
}

// Walks `ids` (trie order) from the frames of `key` over a stand-in bottom, as the context's
// classification sees them: below the frames lies an unknown stack (kContextNode) whose
// first byte may be any of the FOLLOW set of the deepest frame's rule, or nothing at all
// when the key is a whole stack. `accepted_bits`, when not empty, are accepted too.
std::unique_ptr<CompiledGrammar::ContextTokens> CompiledGrammar::Walk(
    const ContextKey& key, absl::Span<const uint32_t> ids, absl::Span<const uint32_t> shared_prefix,
    std::vector<uint64_t> accepted_bits) const {
  const TokenTrie& trie = *vocab_;
  const bool whole_stack = key.back() == kWholeStack;
  const size_t frames = whole_stack ? key.size() - 1 : key.size();
  StackArena arena(&grammar_);
  uint32_t node = whole_stack ? kAcceptNode : kContextNode;
  for (size_t i = frames; i-- > 0;) node = arena.Push(key[i], node);
  const ByteSet* follow =
      whole_stack ? nullptr : &grammar_.follow(grammar_.rule_of(key[frames - 1].pos));
  std::vector<uint32_t> accepted, uncertain;
  TokenWalk walk;
  walk.Run(arena, trie, ids, shared_prefix, {node}, follow, [&](uint32_t id, TokenOutcome outcome) {
    if (outcome == TokenOutcome::kAccepted) accepted.push_back(id);
    if (outcome == TokenOutcome::kUncertain) uncertain.push_back(id);
  });
  if (accepted_bits.empty()) return Pack(std::move(accepted), std::move(uncertain));
  for (uint32_t id : accepted) accepted_bits[id >> 6] |= uint64_t{1} << (id & 63);
  return PackBits(std::move(accepted_bits), std::move(uncertain));
}

// A context deeper than kPrefixDepth frames starts from the classification of its top
// frames: what they accept is accepted and what they reject is rejected whatever lies below
// (a stack popping below them meets only bytes of the FOLLOW set they were classified
// with), so only the tokens uncertain there are walked from the whole context.
std::unique_ptr<CompiledGrammar::ContextTokens> CompiledGrammar::Classify(
    const ContextKey& key) const {
  const TokenTrie& trie = *vocab_;
  const ContextTokens* prefix = PrefixTokens(key);
  if (prefix == nullptr) {
    ++vocabulary_walks_;
    return Walk(key, trie.sorted_ids(), trie.shared_prefix(), {});
  }
  return Walk(key, prefix->uncertain_ids, prefix->uncertain_shared_prefix, AcceptedBits(*prefix));
}

std::vector<uint64_t> CompiledGrammar::AcceptedBits(const ContextTokens& tokens) const {
  if (!tokens.accepted_bits.empty()) return tokens.accepted_bits;
  std::vector<uint64_t> bits(vocab_->mask_words(), 0);
  for (uint32_t id : tokens.accepted_ids) bits[id >> 6] |= uint64_t{1} << (id & 63);
  return bits;
}

std::unique_ptr<CompiledGrammar::ContextTokens> CompiledGrammar::ClassifyRepetition(
    const ContextKey& key, size_t at) const {
  ContextKey any_count = key;
  any_count[at].count = 0;
  std::unique_ptr<RepetitionTokens>& shared = repetitions_[any_count];
  if (shared == nullptr) {
    const TokenTrie& trie = *vocab_;
    const bool whole_stack = key.back() == kWholeStack;
    const size_t frames = whole_stack ? key.size() - 1 : key.size();
    const absl::Span<const Frame> context = absl::MakeConstSpan(key).first(frames);
    // As in Classify, when the repetition's frame lies below the shared top frames.
    const ContextTokens* prefix = PrefixTokens(key);
    if (prefix == nullptr) {
      ++vocabulary_walks_;
      shared = RepetitionTokens::Classify(grammar_, trie, context, whole_stack, at,
                                          trie.sorted_ids(), trie.shared_prefix(), {});
    } else {
      shared = RepetitionTokens::Classify(grammar_, trie, context, whole_stack, at,
                                          prefix->uncertain_ids, prefix->uncertain_shared_prefix,
                                          AcceptedBits(*prefix));
    }
  }
  std::vector<uint64_t> accepted_bits;
  std::vector<uint32_t> uncertain;
  shared->Resolve(key[at].count, accepted_bits, uncertain);
  return PackBits(std::move(accepted_bits), std::move(uncertain));
}

std::unique_ptr<CompiledGrammar::ContextTokens> CompiledGrammar::Pack(
    std::vector<uint32_t> accepted, std::vector<uint32_t> uncertain) const {
  const TokenTrie& trie = *vocab_;
  auto out = std::make_unique<ContextTokens>();
  // A list costs 32 bits per token, the bitset one bit per vocabulary entry.
  if (accepted.size() * 32 > trie.vocab_size()) {
    out->accepted_bits.assign(trie.mask_words(), 0);
    for (uint32_t id : accepted) out->accepted_bits[id >> 6] |= uint64_t{1} << (id & 63);
  } else {
    out->accepted_ids = std::move(accepted);
  }
  out->uncertain_shared_prefix = SharedPrefixes(trie, uncertain);
  out->uncertain_ids = std::move(uncertain);
  return out;
}

std::unique_ptr<CompiledGrammar::ContextTokens> CompiledGrammar::PackBits(
    std::vector<uint64_t> accepted_bits, std::vector<uint32_t> uncertain) const {
  const TokenTrie& trie = *vocab_;
  size_t count = 0;
  for (uint64_t word : accepted_bits) count += std::popcount(word);
  if (count * 32 <= trie.vocab_size()) {
    std::vector<uint32_t> accepted;
    accepted.reserve(count);
    for (uint32_t w = 0; w < accepted_bits.size(); ++w) {
      for (uint64_t word = accepted_bits[w]; word != 0; word &= word - 1) {
        accepted.push_back(w * 64 + static_cast<uint32_t>(std::countr_zero(word)));
      }
    }
    return Pack(std::move(accepted), std::move(uncertain));
  }
  auto out = std::make_unique<ContextTokens>();
  out->accepted_bits = std::move(accepted_bits);
  out->uncertain_shared_prefix = SharedPrefixes(trie, uncertain);
  out->uncertain_ids = std::move(uncertain);
  return out;
}

}  // namespace tessera::grammar
