// The parsing half of the regex front end (regex.h documents the syntax, errors and bounds):
// a pattern as a tree of character sets, concatenations, alternations and repetitions.
// Internal to common/grammar; regex.cc writes the tree as GBNF.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/grammar/utf8_ranges.h"

namespace tessera::grammar::regex_internal {

inline constexpr size_t kUnbounded = static_cast<size_t>(-1);

using Ranges = std::vector<CodePointRange>;

struct Node {
  enum class Kind { kEmpty, kSet, kConcat, kAlt, kRepeat };
  Kind kind = Kind::kEmpty;
  Ranges set;                  // kSet: normalized, non-empty
  std::vector<Node> children;  // kConcat, kAlt: two or more; kRepeat: one
  size_t min = 0, max = 0;     // kRepeat; max is kUnbounded for none. Never X* with a
                               // nullable X (rewritten as (X minus "")*), never max 0.
  size_t size = 0;             // characters and classes with the repetitions expanded
};

// One top-level alternative and the anchors written around it.
struct TopAlternative {
  Node node;
  bool anchored_start = false;
  bool anchored_end = false;
};

// The pattern's top-level alternatives; InvalidArgument "regex at offset N: ..." otherwise.
absl::StatusOr<std::vector<TopAlternative>> ParseRegex(std::string_view pattern);

// Whether a set node holds exactly one character.
bool IsSingle(const Node& node);

// a ∩ b, for normalized range lists.
Ranges Intersect(const Ranges& a, const Ranges& b);

}  // namespace tessera::grammar::regex_internal
