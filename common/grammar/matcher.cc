#include "common/grammar/matcher.h"

#include <algorithm>
#include <utility>

namespace tessera::grammar {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> compiled)
    : compiled_(std::move(compiled)), arena_(&compiled_->grammar()) {
  Reset();
}

void Matcher::Reset() {
  history_.assign(1, {});
  arena_.Start(history_.back());
}

bool Matcher::Advance(std::string_view bytes) {
  scratch_ = history_.back();
  for (char c : bytes) {
    arena_.Advance(scratch_, static_cast<uint8_t>(c), scratch_next_);
    std::swap(scratch_, scratch_next_);
    if (scratch_.empty()) return false;
  }
  return true;
}

bool Matcher::AcceptBytes(std::string_view bytes) {
  const size_t mark = arena_.size();
  if (!Advance(bytes)) {
    arena_.Truncate(mark);
    return false;
  }
  history_.push_back(scratch_);
  return true;
}

bool Matcher::AcceptToken(uint32_t id) {
  const TokenTrie& vocab = compiled_->vocab();
  if (id >= vocab.vocab_size() || !vocab.eligible(id)) return false;
  return AcceptBytes(vocab.token(id));
}

bool Matcher::CanEnd() const {
  const std::vector<uint32_t>& now = history_.back();
  return std::find(now.begin(), now.end(), kAcceptNode) != now.end();
}

bool Matcher::MustEnd() const {
  const std::vector<uint32_t>& now = history_.back();
  return now.size() == 1 && now.front() == kAcceptNode;
}

bool Matcher::Rollback(size_t n) {
  if (n > steps()) return false;
  history_.resize(history_.size() - n);
  return true;
}

void Matcher::FillMask(absl::Span<uint64_t> words) {
  const TokenTrie& vocab = compiled_->vocab();
  const size_t n_words = vocab.mask_words();
  std::fill(words.begin(), words.begin() + static_cast<ptrdiff_t>(n_words), 0);
  const size_t mark = arena_.size();
  seen_contexts_.clear();
  std::vector<uint32_t>& start = scratch_;
  for (uint32_t node : history_.back()) {
    if (node == kAcceptNode) continue;
    const CompiledGrammar::ContextTokens& tokens = compiled_->TokensFor(arena_, node);
    // Stacks with the same top frames share their context-free part: add it once.
    if (std::find(seen_contexts_.begin(), seen_contexts_.end(), &tokens) == seen_contexts_.end()) {
      seen_contexts_.push_back(&tokens);
      if (!tokens.accepted_bits.empty()) {
        for (size_t w = 0; w < n_words; ++w) words[w] |= tokens.accepted_bits[w];
      }
      for (uint32_t id : tokens.accepted_ids) words[id >> 6] |= uint64_t{1} << (id & 63);
    }
    if (tokens.uncertain_ids.empty()) continue;
    start.assign(1, node);
    walk_.Run(arena_, vocab, tokens.uncertain_ids, tokens.uncertain_shared_prefix, start,
              /*follow=*/nullptr, [&](uint32_t id, TokenOutcome outcome) {
                if (outcome == TokenOutcome::kAccepted) words[id >> 6] |= uint64_t{1} << (id & 63);
              });
    arena_.Truncate(mark);
  }
}

}  // namespace tessera::grammar
