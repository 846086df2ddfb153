// Regular expressions -> GBNF, for structured output constrained by a pattern (vLLM's
// guided_regex, JSON Schema's `pattern`).
//
//   absl::StatusOr<std::string> gbnf = RegexToGbnf("[A-Z]{2}-\\d{4}");
//   // root ::= [A-Z]{2} "-" [0-9]{4}
//
// The subset of ECMAScript (JavaScript) syntax accepted:
//   literals (any UTF-8 text), `.` (any character except the line terminators \n \r U+2028
//   U+2029), classes `[a-z_]` and `[^...]` with ranges and the escapes below (`[]` matches
//   nothing and is refused, `[^]` is any character), groups `(...)`, `(?:...)` and named
//   `(?<name>...)` (captures mean nothing here), alternation `|`, quantifiers `* + ?
//   {m} {m,} {m,n}` and their lazy forms `*?` etc. (the same language), escapes \d \D \w \W
//   \s \S (ECMAScript's sets: \d is [0-9], \w is [A-Za-z0-9_], \s is the Unicode spaces of
//   ECMAScript), \t \n \r \v \f \0, \b inside a class (backspace), \cX, \xHH, \uHHHH (a
//   surrogate pair \uD83D\uDE00 is one character), \u{H...}, and `\` before any ASCII
//   punctuation (that character). `]` and `}` on their own are literals (ECMAScript Annex B).
//   `^` at the start and `$` at the end of the pattern, or of a top-level alternative, are
//   accepted: a pattern always matches the whole output, so they change nothing there.
// Refused, with an error: backreferences (\1, \k<name>), lookarounds ((?=, (?!, (?<=, (?<!),
// word boundaries \b \B, inline flags (?i), Unicode property escapes \p{..}, octal escapes,
// anchors anywhere else, quantifiers with nothing to repeat, and a '{' that starts no
// quantifier (write \{; Python would read x{,2} as a quantifier, ECMAScript as text).
//
// Errors are InvalidArgument and name the 0-based offset in Unicode characters (code points)
// of the pattern: "regex at offset 7: unbalanced ')'". Bounds keep any input cheap: groups
// nest at most 64 deep, a counted repetition is at most 1000, and the pattern with its
// repetitions expanded has at most 100,000 characters and classes.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/grammar/gbnf_writer.h"

namespace tessera::grammar {

// GBNF whose `root` rule matches exactly the strings the whole pattern matches (implicitly
// anchored at both ends, like vLLM's guided_regex and std::regex_match).
absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern);

// How a pattern is embedded by DefineRegexRule.
enum class RegexTarget {
  // The rule matches the text itself, whole (what RegexToGbnf writes).
  kWholeText,
  // JSON Schema's `pattern`: the rule matches the content of a JSON string (the text between
  // the quotes, escapes included) whose decoded value contains a match of the pattern (an
  // unanchored search; `^` and `$` anchor a top-level alternative at the start or the end of
  // the value). Characters are written in one JSON form each: '"', '\' and the controls
  // escaped (\" \\ \n \t \r \b \f, others \u00XX), everything else raw. Outside the match,
  // the value's other characters use `json_char_rule`, a rule (the caller's) matching one
  // character of a JSON string in any form.
  kJsonStringSearch,
};

// Defines the rule `name` (already reserved in `rules` by the caller) and its helper rules
// for `pattern`; adds to rules.cost() what the expanded repetitions will cost. Errors as
// RegexToGbnf's.
absl::Status DefineRegexRule(std::string_view pattern, RegexTarget target, const std::string& name,
                             std::string_view json_char_rule, GbnfRules& rules);

}  // namespace tessera::grammar
