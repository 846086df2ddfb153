#include "common/grammar/grammar.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::grammar {

ByteSet ByteSet::Range(uint8_t lo, uint8_t hi) {
  ByteSet set;
  for (int b = lo; b <= hi; ++b) set.Add(static_cast<uint8_t>(b));
  return set;
}

void ByteSet::AddAll(const ByteSet& other) {
  for (int i = 0; i < 4; ++i) words[i] |= other.words[i];
}

namespace {

// Rules a rule can call before consuming any byte: for each alternative, the references up
// to and including the first symbol that cannot match empty.
std::vector<std::vector<uint32_t>> LeadingCalls(const std::vector<RuleDefinition>& rules,
                                                const std::vector<bool>& nullable) {
  std::vector<std::vector<uint32_t>> calls(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    for (const auto& alt : rules[r].alternatives) {
      for (const Symbol& s : alt) {
        if (s.kind == Symbol::Kind::kBytes) break;
        calls[r].push_back(s.rule);
        const bool skippable = s.kind == Symbol::Kind::kRepeat && s.min == 0;
        if (!skippable && !nullable[s.rule]) break;
      }
    }
  }
  return calls;
}

// Which rules can match the empty string; a worklist over "symbols not yet known nullable"
// counts, linear in the grammar size.
std::vector<bool> Nullable(const std::vector<RuleDefinition>& rules) {
  struct Alt {
    uint32_t rule;
    size_t pending;
  };
  std::vector<Alt> alts;
  std::vector<std::vector<size_t>> used_in(rules.size());  // rule -> alts, per occurrence
  std::vector<bool> nullable(rules.size(), false);
  std::vector<uint32_t> work;
  for (size_t r = 0; r < rules.size(); ++r) {
    for (const auto& alt : rules[r].alternatives) {
      bool has_bytes = false;
      for (const Symbol& s : alt) has_bytes |= s.kind == Symbol::Kind::kBytes;
      if (has_bytes) continue;
      // A repetition that may match no copy is satisfied already; others wait for their rule.
      size_t pending = 0;
      for (const Symbol& s : alt) {
        if (s.kind == Symbol::Kind::kRepeat && s.min == 0) continue;
        used_in[s.rule].push_back(alts.size());
        ++pending;
      }
      if (pending == 0 && !nullable[r]) {
        nullable[r] = true;
        work.push_back(static_cast<uint32_t>(r));
      }
      alts.push_back({static_cast<uint32_t>(r), pending});
    }
  }
  while (!work.empty()) {
    uint32_t r = work.back();
    work.pop_back();
    for (size_t a : used_in[r]) {
      if (--alts[a].pending == 0 && !nullable[alts[a].rule]) {
        nullable[alts[a].rule] = true;
        work.push_back(alts[a].rule);
      }
    }
  }
  return nullable;
}

// A cycle in the leading-call graph as "a -> b -> a", or empty when there is none.
std::string FindLeftRecursion(const std::vector<RuleDefinition>& rules,
                              const std::vector<std::vector<uint32_t>>& calls) {
  enum Color : uint8_t { kWhite, kGrey, kBlack };
  std::vector<Color> color(rules.size(), kWhite);
  // Iterative depth-first search: (rule, next call index) frames.
  std::vector<std::pair<uint32_t, size_t>> path;
  for (size_t start = 0; start < rules.size(); ++start) {
    if (color[start] != kWhite) continue;
    path.push_back({static_cast<uint32_t>(start), 0});
    color[start] = kGrey;
    while (!path.empty()) {
      auto& [rule, next] = path.back();
      if (next == calls[rule].size()) {
        color[rule] = kBlack;
        path.pop_back();
        continue;
      }
      uint32_t callee = calls[rule][next++];
      if (color[callee] == kGrey) {
        std::vector<std::string> names;
        size_t i = 0;
        while (path[i].first != callee) ++i;
        for (; i < path.size(); ++i) names.push_back(rules[path[i].first].name);
        names.push_back(rules[callee].name);
        return absl::StrJoin(names, " -> ");
      }
      if (color[callee] == kWhite) {
        color[callee] = kGrey;
        path.push_back({callee, 0});
      }
    }
  }
  return "";
}

// Least solution of sets[to] |= sets[from] over `edges` (from -> list of to).
void Propagate(const std::vector<std::vector<uint32_t>>& edges, std::vector<ByteSet>& sets) {
  std::vector<uint32_t> work;
  for (size_t i = 0; i < sets.size(); ++i) work.push_back(static_cast<uint32_t>(i));
  std::vector<bool> queued(sets.size(), true);
  while (!work.empty()) {
    uint32_t from = work.back();
    work.pop_back();
    queued[from] = false;
    for (uint32_t to : edges[from]) {
      ByteSet merged = sets[to];
      merged.AddAll(sets[from]);
      if (merged == sets[to]) continue;
      sets[to] = merged;
      if (!queued[to]) {
        queued[to] = true;
        work.push_back(to);
      }
    }
  }
}

}  // namespace

absl::StatusOr<Grammar> Grammar::Compile(std::vector<RuleDefinition> rules, uint32_t root,
                                         const GrammarLimits& limits) {
  if (rules.empty()) return absl::InvalidArgumentError("grammar has no rules");
  if (rules.size() > limits.max_rules) {
    return absl::InvalidArgumentError(absl::StrCat("grammar has ", rules.size(),
                                                   " rules (after expanding repetitions); the "
                                                   "limit is ",
                                                   limits.max_rules));
  }
  if (root >= rules.size()) {
    return absl::InvalidArgumentError(absl::StrCat("grammar root rule ", root, " does not exist"));
  }
  size_t elements = 0;
  for (const RuleDefinition& rule : rules) {
    if (rule.alternatives.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("grammar rule '", rule.name, "' has no alternatives"));
    }
    for (const auto& alt : rule.alternatives) {
      elements += alt.size() + 1;
      for (const Symbol& s : alt) {
        if (s.kind != Symbol::Kind::kBytes && s.rule >= rules.size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "grammar rule '", rule.name, "' refers to rule ", s.rule, ", which does not exist"));
        }
        if (s.kind == Symbol::Kind::kRepeat &&
            (s.max == 0 || s.min > s.max || s.max > kMaxRepetitionCount)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "grammar rule '", rule.name, "' repeats rule '", rules[s.rule].name, "' {", s.min,
              ",", s.max, "}: expected 0 <= min <= max, 1 <= max <= ", kMaxRepetitionCount));
        }
      }
    }
  }
  if (elements > limits.max_elements) {
    return absl::InvalidArgumentError(absl::StrCat("grammar has ", elements,
                                                   " elements (after expanding repetitions); "
                                                   "the limit is ",
                                                   limits.max_elements));
  }
  std::vector<bool> nullable = Nullable(rules);
  std::vector<std::vector<uint32_t>> calls = LeadingCalls(rules, nullable);
  if (std::string cycle = FindLeftRecursion(rules, calls); !cycle.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("left recursion: rule '", cycle.substr(0, cycle.find(' ')),
                     "' can reach itself without consuming input: ", cycle,
                     " (left-recursive grammars are not supported; rewrite with repetition, e.g. "
                     "list ::= item (\",\" item)*)"));
  }
  Grammar g;
  g.root_ = root;
  g.Lay(rules);
  g.ComputeFollow(nullable);
  return g;
}

void Grammar::Lay(const std::vector<RuleDefinition>& rules) {
  absl::flat_hash_map<std::array<uint64_t, 4>, uint32_t> set_index;
  rule_alt_begin_.push_back(0);
  for (size_t r = 0; r < rules.size(); ++r) {
    rule_names_.push_back(rules[r].name);
    for (const auto& alt : rules[r].alternatives) {
      alt_starts_.push_back(static_cast<uint32_t>(elements_.size()));
      for (const Symbol& s : alt) {
        Element e;
        if (s.kind == Symbol::Kind::kRule) {
          e = {Element::Kind::kRule, s.rule};
        } else if (s.kind == Symbol::Kind::kRepeat) {
          e = {Element::Kind::kRepeat, static_cast<uint32_t>(repetitions_.size())};
          repetitions_.push_back({s.rule, s.min, s.max});
        } else {
          auto [it, inserted] =
              set_index.try_emplace(s.bytes.words, static_cast<uint32_t>(byte_sets_.size()));
          if (inserted) byte_sets_.push_back(s.bytes);
          e = {Element::Kind::kBytes, it->second};
        }
        elements_.push_back(e);
        rule_of_.push_back(static_cast<uint32_t>(r));
      }
      elements_.push_back({Element::Kind::kEnd, 0});
      rule_of_.push_back(static_cast<uint32_t>(r));
    }
    rule_alt_begin_.push_back(static_cast<uint32_t>(alt_starts_.size()));
  }
}

// FIRST and FOLLOW sets of the rules at byte level (the textbook construction, e.g. Aho et
// al., "Compilers", 4.4.2), solved as set-inclusion constraints over a worklist. A counted
// repetition counts as a call of its body that may follow itself (max >= 2) and may be
// skipped (min == 0).
void Grammar::ComputeFollow(const std::vector<bool>& nullable) {
  const size_t n = rule_count();
  // Whether the element at a (kRule or kRepeat) position can match the empty string.
  auto skippable = [&](const Element& e) {
    if (e.kind == Element::Kind::kRule) return static_cast<bool>(nullable[e.value]);
    const Repetition& rep = repetitions_[e.value];
    return rep.min == 0 || nullable[rep.rule];
  };
  auto callee_of = [&](const Element& e) {
    return e.kind == Element::Kind::kRule ? e.value : repetitions_[e.value].rule;
  };
  std::vector<ByteSet> first(n);
  std::vector<std::vector<uint32_t>> first_edges(n);  // callee -> caller
  for (uint32_t r = 0; r < n; ++r) {
    for (uint32_t pos : alternatives(r)) {
      for (; elements_[pos].kind != Element::Kind::kEnd; ++pos) {
        const Element& e = elements_[pos];
        if (e.kind == Element::Kind::kBytes) {
          first[r].AddAll(byte_sets_[e.value]);
          break;
        }
        first_edges[callee_of(e)].push_back(r);
        if (!skippable(e)) break;
      }
    }
  }
  Propagate(first_edges, first);

  follow_.assign(n, ByteSet{});
  std::vector<std::vector<uint32_t>> follow_edges(n);  // caller -> callee at a tail
  for (uint32_t pos = 0; pos < elements_.size(); ++pos) {
    const Element& call = elements_[pos];
    if (call.kind != Element::Kind::kRule && call.kind != Element::Kind::kRepeat) continue;
    uint32_t callee = callee_of(call);
    if (call.kind == Element::Kind::kRepeat && repetitions_[call.value].max >= 2) {
      follow_[callee].AddAll(first[callee]);
    }
    uint32_t next = pos + 1;
    for (; elements_[next].kind != Element::Kind::kEnd; ++next) {
      const Element& e = elements_[next];
      if (e.kind == Element::Kind::kBytes) {
        follow_[callee].AddAll(byte_sets_[e.value]);
        break;
      }
      follow_[callee].AddAll(first[callee_of(e)]);
      if (!skippable(e)) break;
    }
    if (elements_[next].kind == Element::Kind::kEnd) {
      follow_edges[rule_of_[pos]].push_back(callee);
    }
  }
  Propagate(follow_edges, follow_);
}

}  // namespace tessera::grammar
