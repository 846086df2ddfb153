// Writing GBNF text (the syntax gbnf_parser.h reads) for the front ends that compile to it:
// JSON Schema (json_schema.h), regular expressions (regex.h) and choices (choices.h).
//
//   GbnfRules rules;
//   std::string root = rules.Reserve("root");
//   rules.Define(root, GbnfLiteral("yes") + " | " + GbnfLiteral("no"));
//   std::string text = rules.Text();   // root ::= "yes" | "no"
//
// The front ends emit text rather than a Grammar so that the serving side parses every
// grammar, hand-written or compiled, through ParseGbnf and its GrammarLimits.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/grammar/utf8_ranges.h"

namespace tessera::grammar {

// `bytes` as a GBNF string literal "...": '"', '\' and control characters are escaped, every
// other byte (UTF-8 included) is written as it is. The empty string gives "".
std::string GbnfLiteral(std::string_view bytes);

// A non-empty code-point set (NormalizeRanges form) as a GBNF character class [...]; every
// character outside printable ASCII, and the class syntax characters, are escaped.
std::string GbnfClass(const std::vector<CodePointRange>& ranges);

// The rules of a grammar under construction, written out in the order they were reserved.
// It also keeps a size estimate, `cost()`: one per rule plus what the caller adds for
// repetitions that ParseGbnf will expand (a bounded x{m,n} becomes n-m helper rules), so
// a front end can refuse an input whose grammar would be too large before writing it.
class GbnfRules {
 public:
  // A fresh rule name made from `hint` (characters other than letters, digits and '-'
  // become '-', at most 40 of them; "-2", "-3", ... appended when taken), reserved.
  std::string Reserve(std::string_view hint);
  // Sets the body (alternatives) of a reserved rule.
  void Define(const std::string& name, std::string body);
  // A rule with `body`, reusing an earlier one defined by Helper with the same body.
  std::string Helper(std::string_view hint, std::string body);

  bool Has(std::string_view name) const { return index_.contains(std::string(name)); }
  size_t cost() const { return cost_; }
  void AddCost(size_t n) { cost_ = cost_ + n < cost_ ? static_cast<size_t>(-1) : cost_ + n; }

  // One line per rule, "name ::= body"; a reserved rule never defined is written with an
  // empty body (it matches the empty string), which callers avoid.
  std::string Text() const;

 private:
  struct Rule {
    std::string name;
    std::string body;
  };
  std::vector<Rule> rules_;
  absl::flat_hash_map<std::string, size_t> index_;
  absl::flat_hash_map<std::string, std::string> helper_by_body_;
  absl::flat_hash_map<std::string, size_t> next_suffix_;
  size_t cost_ = 0;
};

}  // namespace tessera::grammar
