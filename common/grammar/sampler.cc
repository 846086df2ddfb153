#include "common/grammar/sampler.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/grammar/matcher.h"
#include "common/grammar/stack_arena.h"

namespace tessera::grammar {

namespace {

constexpr size_t kInfinite = static_cast<size_t>(-1);

size_t SaturatingAdd(size_t a, size_t b) { return a + b < a ? kInfinite : a + b; }
size_t SaturatingMultiply(size_t a, size_t b) {
  return b != 0 && a > kInfinite / b ? kInfinite : a * b;
}

// Copies a repetition frame still owes: count c is the copy under way, done when it ends.
size_t CopiesOwed(const Repetition& rep, uint32_t count) {
  return rep.min > count ? rep.min - count : 0;
}

std::shared_ptr<const TokenTrie> ByteVocabulary() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  return TokenTrie::Build(tokens, {});
}

// The byte a completion writes for a set: a readable one when there is one.
uint8_t PreferredByte(const ByteSet& set) {
  for (uint8_t b : {'a', '0', ' '}) {
    if (set.Contains(b)) return b;
  }
  for (int b = 0x21; b < 0x7F; ++b) {
    if (set.Contains(static_cast<uint8_t>(b))) return static_cast<uint8_t>(b);
  }
  for (int b = 0; b < 256; ++b) {
    if (set.Contains(static_cast<uint8_t>(b))) return static_cast<uint8_t>(b);
  }
  return 0;
}

}  // namespace

GrammarSampler::GrammarSampler(Grammar grammar)
    : compiled_(CompiledGrammar::Create(std::move(grammar), ByteVocabulary())) {
  const Grammar& g = compiled_->grammar();
  const size_t rules = g.rule_count();
  // Knuth's algorithm: an alternative's length is known once every rule it calls is; the
  // shortest known alternative of any rule is final (lengths only add up).
  struct Alternative {
    uint32_t rule, start;
    size_t length = 0, pending = 0;
  };
  std::vector<Alternative> alts;
  // rule -> (alternative, times the alternative needs the rule), per call
  std::vector<std::vector<std::pair<size_t, size_t>>> callers(rules);
  for (uint32_t r = 0; r < rules; ++r) {
    for (uint32_t start : g.alternatives(r)) {
      Alternative alt{r, start};
      for (uint32_t pos = start; g.element(pos).kind != Element::Kind::kEnd; ++pos) {
        const Element& e = g.element(pos);
        if (e.kind == Element::Kind::kBytes) {
          ++alt.length;
        } else if (e.kind == Element::Kind::kRule) {
          ++alt.pending;
          callers[e.value].push_back({alts.size(), 1});
        } else if (g.repetition_at(pos).min > 0) {
          ++alt.pending;
          callers[g.repetition_at(pos).rule].push_back({alts.size(), g.repetition_at(pos).min});
        }
      }
      alts.push_back(alt);
    }
  }
  using Candidate = std::pair<size_t, size_t>;  // (length, alternative)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  for (size_t a = 0; a < alts.size(); ++a) {
    if (alts[a].pending == 0) queue.push({alts[a].length, a});
  }
  rule_length_.assign(rules, kInfinite);
  rule_best_.assign(rules, 0);
  while (!queue.empty()) {
    const auto [length, a] = queue.top();
    queue.pop();
    const uint32_t r = alts[a].rule;
    if (rule_length_[r] != kInfinite) continue;
    rule_length_[r] = length;
    rule_best_[r] = alts[a].start;
    for (const auto& [caller, times] : callers[r]) {
      Alternative& alt = alts[caller];
      alt.length = SaturatingAdd(alt.length, SaturatingMultiply(length, times));
      if (--alt.pending == 0) queue.push({alt.length, caller});
    }
  }
}

size_t GrammarSampler::RestLength(uint32_t pos, uint32_t count) const {
  const Grammar& g = compiled_->grammar();
  size_t length = 0;
  for (; g.element(pos).kind != Element::Kind::kEnd; ++pos, count = 0) {
    const Element& e = g.element(pos);
    if (e.kind == Element::Kind::kBytes) {
      length = SaturatingAdd(length, 1);
    } else if (e.kind == Element::Kind::kRule) {
      length = SaturatingAdd(length, rule_length_[e.value]);
    } else {
      const Repetition& rep = g.repetition_at(pos);
      length =
          SaturatingAdd(length, SaturatingMultiply(rule_length_[rep.rule], CopiesOwed(rep, count)));
    }
  }
  return length;
}

void GrammarSampler::WriteRest(uint32_t pos, uint32_t count, std::string& out) const {
  // An explicit stack of frames still to write: chains of calls may be deep.
  const Grammar& g = compiled_->grammar();
  std::vector<Frame> todo = {{pos, count}};
  while (!todo.empty()) {
    const Frame at = todo.back();
    const Element& e = g.element(at.pos);
    if (e.kind == Element::Kind::kEnd) {
      todo.pop_back();
      continue;
    }
    todo.back() = {at.pos + 1, 0};
    if (e.kind == Element::Kind::kBytes) {
      out += static_cast<char>(PreferredByte(g.byte_set(e.value)));
    } else if (e.kind == Element::Kind::kRule) {
      todo.push_back({rule_best_[e.value], 0});
    } else {
      const Repetition& rep = g.repetition_at(at.pos);
      for (size_t i = CopiesOwed(rep, at.count); i > 0; --i) {
        todo.push_back({rule_best_[rep.rule], 0});
      }
    }
  }
}

absl::StatusOr<std::string> GrammarSampler::ShortestEnding(std::string_view prefix,
                                                           size_t max_bytes) const {
  StackArena arena(&compiled_->grammar());
  std::vector<uint32_t> stacks, next;
  arena.Start(stacks);
  for (size_t i = 0; i < prefix.size(); ++i) {
    arena.Advance(stacks, static_cast<uint8_t>(prefix[i]), next);
    std::swap(stacks, next);
    if (stacks.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "no sentence of the grammar starts with these bytes (byte ", i, " is refused)"));
    }
  }
  // The stack whose frames add up to the shortest completion.
  size_t best_length = kInfinite;
  uint32_t best = kAcceptNode;
  for (uint32_t node : stacks) {
    size_t length = 0;
    for (uint32_t n = node; !arena.IsBottom(n); n = arena.parent(n)) {
      length = SaturatingAdd(length, RestLength(arena.position(n), arena.count(n)));
    }
    if (node == kAcceptNode) length = 0;
    if (length < best_length) {
      best_length = length;
      best = node;
    }
  }
  if (best_length == kInfinite || prefix.size() + best_length > max_bytes) {
    return absl::FailedPreconditionError(absl::StrCat("the grammar cannot end within ", max_bytes,
                                                      " bytes (after ", prefix.size(), " bytes)"));
  }
  std::string ending;
  for (uint32_t n = best; !arena.IsBottom(n); n = arena.parent(n)) {
    WriteRest(arena.position(n), arena.count(n), ending);
  }
  return ending;
}

absl::StatusOr<std::string> GrammarSampler::Sample(std::mt19937_64& rng,
                                                   const SampleOptions& options) const {
  Matcher matcher(compiled_);
  std::string out;
  std::vector<uint64_t> words(compiled_->vocab().mask_words());
  std::vector<uint8_t> allowed, ascii;
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  while (!matcher.MustEnd()) {
    if (matcher.CanEnd() && coin(rng) < options.end_probability) break;
    if (out.size() >= options.soft_max_bytes) {
      absl::StatusOr<std::string> ending = ShortestEnding(out, options.max_bytes);
      if (!ending.ok()) return ending.status();
      if (!matcher.AcceptBytes(*ending) || !matcher.CanEnd()) {
        return absl::InternalError(absl::StrCat("the matcher refused the shortest ending of '", out,
                                                "': '", *ending, "'"));
      }
      out += *ending;
      break;
    }
    matcher.FillMask(absl::MakeSpan(words));
    allowed.clear();
    ascii.clear();
    for (int b = 0; b < 256; ++b) {
      if (!((words[b >> 6] >> (b & 63)) & 1)) continue;
      allowed.push_back(static_cast<uint8_t>(b));
      if (b < 0x80) ascii.push_back(static_cast<uint8_t>(b));
    }
    if (allowed.empty()) {
      if (matcher.CanEnd()) break;
      return absl::InternalError(absl::StrCat("the mask is empty after '", out, "'"));
    }
    const std::vector<uint8_t>& pool =
        !ascii.empty() && coin(rng) < options.ascii_preference ? ascii : allowed;
    const uint8_t byte = pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
    const char c = static_cast<char>(byte);
    if (!matcher.AcceptBytes(std::string_view(&c, 1))) {
      return absl::InternalError(absl::StrCat("the matcher refused byte ", byte,
                                              " that its mask allowed after '", out, "'"));
    }
    out += c;
  }
  return out;
}

}  // namespace tessera::grammar
