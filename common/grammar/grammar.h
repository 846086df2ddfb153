// A compiled context-free grammar over bytes, the input of the structured-output matcher.
//
// A grammar is a list of rules; a rule is a list of alternatives; an alternative is a
// sequence of symbols, each a set of bytes (one byte of input), a reference to a rule, or a
// counted repetition of a rule (body{min,max}: one symbol however large max is; the parse
// stack counts the copies, see stack_arena.h).
// Literal strings, Unicode character classes and repetitions are lowered to this form by
// the front end (gbnf_parser.h): a class like [^"\\] becomes a helper rule whose
// alternatives are the UTF-8 byte sequences of its code points, so a multi-byte character
// is matched one byte at a time and a token may stop in the middle of one.
//
//   std::vector<RuleDefinition> rules = ...;
//   absl::StatusOr<Grammar> g = Grammar::Compile(std::move(rules), /*root=*/0);
//
// Compile checks the grammar once so that matching never has to: every referenced rule
// exists, no rule is left-recursive (a rule that can reach itself without consuming a byte;
// such grammars are refused, not supported), and the size is within GrammarLimits.
//
// The compiled form is flat, the layout the matcher walks: every alternative is a run of
// elements in one array ended by a kEnd element, and a "position" is an index into that
// array. A Grammar is immutable after Compile and safe to share between threads.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tessera::grammar {

// A set of byte values, the terminal of the grammar.
struct ByteSet {
  std::array<uint64_t, 4> words = {0, 0, 0, 0};

  static ByteSet Single(uint8_t b) { return Range(b, b); }
  static ByteSet Range(uint8_t lo, uint8_t hi);
  bool Contains(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  void Add(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddAll(const ByteSet& other);
  bool Empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

// Largest `max` of a counted repetition (the stack's copy counts keep their top bit free).
inline constexpr uint32_t kMaxRepetitionCount = (1u << 30) - 1;

// One symbol of an alternative before compilation.
struct Symbol {
  enum class Kind : uint8_t { kBytes, kRule, kRepeat };
  Kind kind = Kind::kBytes;
  ByteSet bytes;      // kBytes
  uint32_t rule = 0;  // kRule, kRepeat (the body): index into the rule list
  uint32_t min = 0;   // kRepeat: the body matches min..max times in a row
  uint32_t max = 0;

  static Symbol Bytes(const ByteSet& set) { return {Kind::kBytes, set, 0}; }
  static Symbol Rule(uint32_t id) { return {Kind::kRule, {}, id}; }
  static Symbol Repeat(uint32_t body, uint32_t min, uint32_t max) {
    return {Kind::kRepeat, {}, body, min, max};
  }
};

// A rule before compilation: a name (for error messages) and its alternatives; an empty
// alternative matches the empty string.
struct RuleDefinition {
  std::string name;
  std::vector<std::vector<Symbol>> alternatives;
};

// Size bounds that keep compilation and matching cheap; grammars over them are refused.
struct GrammarLimits {
  size_t max_rules = 1 << 16;
  size_t max_elements = 1 << 20;  // symbols plus one end marker per alternative
};

// One element of the flat layout.
struct Element {
  enum class Kind : uint8_t { kEnd, kBytes, kRule, kRepeat };
  Kind kind = Kind::kEnd;
  uint32_t value = 0;  // kBytes: index into byte_sets(); kRule: rule id; kRepeat: repetition()
};

// A counted repetition: `rule` matched min..max times (1 <= max <= kMaxRepetitionCount).
struct Repetition {
  uint32_t rule = 0;
  uint32_t min = 0;
  uint32_t max = 0;
};

class Grammar {
 public:
  // Compiles `rules` with `root` as the start rule. InvalidArgument naming the rule when a
  // reference is out of range, a repetition's bounds are not 0 <= min <= max, 1 <= max <=
  // kMaxRepetitionCount, a rule has no alternative, a rule is left-recursive
  // ("left recursion: rule 'expr' can reach itself without consuming input: expr -> term ->
  // expr"), or the grammar exceeds `limits`.
  static absl::StatusOr<Grammar> Compile(std::vector<RuleDefinition> rules, uint32_t root,
                                         const GrammarLimits& limits = {});

  uint32_t root() const { return root_; }
  size_t rule_count() const { return rule_names_.size(); }
  const std::string& rule_name(uint32_t rule) const { return rule_names_[rule]; }
  // Start positions of the rule's alternatives.
  absl::Span<const uint32_t> alternatives(uint32_t rule) const {
    return absl::MakeConstSpan(alt_starts_)
        .subspan(rule_alt_begin_[rule], rule_alt_begin_[rule + 1] - rule_alt_begin_[rule]);
  }

  size_t element_count() const { return elements_.size(); }
  const Element& element(uint32_t pos) const { return elements_[pos]; }
  const ByteSet& byte_set(uint32_t index) const { return byte_sets_[index]; }
  // The repetition of a kRepeat position.
  const Repetition& repetition_at(uint32_t pos) const { return repetitions_[elements_[pos].value]; }
  // The byte set of a kBytes position.
  const ByteSet& bytes_at(uint32_t pos) const { return byte_sets_[elements_[pos].value]; }
  // The rule whose alternative holds `pos`.
  uint32_t rule_of(uint32_t pos) const { return rule_of_[pos]; }
  // Bytes that can come first after `rule` has matched, in any context (FOLLOW set).
  const ByteSet& follow(uint32_t rule) const { return follow_[rule]; }

 private:
  Grammar() = default;
  void Lay(const std::vector<RuleDefinition>& rules);
  void ComputeFollow(const std::vector<bool>& nullable);

  uint32_t root_ = 0;
  std::vector<std::string> rule_names_;
  std::vector<uint32_t> rule_alt_begin_;  // rule -> first index in alt_starts_ (size rules+1)
  std::vector<uint32_t> alt_starts_;
  std::vector<Element> elements_;
  std::vector<uint32_t> rule_of_;
  std::vector<ByteSet> byte_sets_;
  std::vector<Repetition> repetitions_;
  std::vector<ByteSet> follow_;
};

}  // namespace tessera::grammar
