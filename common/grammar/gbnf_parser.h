// GBNF, the grammar text format llama.cpp / llama-server accept, compiled to a Grammar.
//
//   root   ::= object
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"   # comments run to the end of the line
//   pair   ::= string ":" ws [0-9]+
//
// Supported: rules `name ::= alternatives` (names of letters, digits, '-' and '_'; a rule's
// body runs until the next `name ::=` or the end of the text, so bodies may span lines);
// alternatives with `|` (an empty alternative matches nothing); groups `( ... )`;
// literals "..." (raw UTF-8 bytes are taken as they are; 0xFE and 0xFF are refused);
// token references `<[id]>` (special token `id` of the vocabulary, e.g. a tool-call marker:
// special tokens are allowed nowhere else, see SpecialTokenBytes); character classes [a-z_é],
// negated [^"\\]; `.` (any Unicode character, newline included); repetition `*`, `+`, `?`,
// `{m}`, `{m,}`, `{m,n}`, `{,n}`; escapes in literals and classes: \n \r \t \\ \" \' \[ \]
// \- \/ \xHH \uHHHH \UHHHHHHHH (code points, encoded as UTF-8 as in llama.cpp, so "\xE9"
// is the two bytes of "é"). Classes are matched as whole UTF-8 characters.
// Not supported: left recursion (refused with an error naming the cycle), tokens named by
// their text (`<think>`: name them by id), and raw byte classes outside UTF-8.
//
// Errors are InvalidArgument and name the place: "grammar line 3, column 12: undefined rule
// 'valeu'". Any input — including random bytes — returns a Grammar or an error; parsing is
// linear in the text except for repetition expansion, which GrammarLimits bounds.
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/grammar/grammar.h"

namespace tessera::grammar {

struct GbnfOptions {
  GrammarLimits limits;
  // Deepest nesting of parentheses accepted (the parser is recursive).
  size_t max_nesting = 200;
  // The start rule.
  std::string_view root = "root";
  // Lower x{m,n} to n copies of x (nested rules for the optional ones) instead of one
  // counted repetition: the same language, the form the engine used before counted
  // repetitions; a reference for tests and benchmarks.
  bool expand_repetitions = false;
};

absl::StatusOr<Grammar> ParseGbnf(std::string_view text, const GbnfOptions& options = {});

}  // namespace tessera::grammar
