// Grammars of JSON scalar values for the JSON Schema front end (json_schema.h): integers and
// numbers within bounds, and the string formats. Internal to common/grammar.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/grammar/gbnf_writer.h"

namespace tessera::grammar::json_schema_internal {

// Unbounded integers and numbers are written with at most this many integer digits (and
// numbers with at most this many fraction digits): exact in a double, and a model cannot
// stall in an endless run of digits.
inline constexpr size_t kMaxFreeDigits = 15;

// Canonical JSON integers (no leading zeros, no "-0") up to kMaxFreeDigits digits.
inline constexpr char kIntegerBody[] = R"("0" | "-"? [1-9] [0-9]{0,14})";
// JSON numbers: an integer part of at most 15 digits, at most 15 fraction digits and an
// exponent of at most 2 digits (so that every number is finite in a double).
inline constexpr char kNumberBody[] =
    R"("-"? ( "0" | [1-9] [0-9]{0,14} ) ( "." [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,2} )?)";

// GBNF alternatives (a rule body) for the canonical JSON integers in [lo, hi]; an absent
// bound is open, its side then limited to max(kMaxFreeDigits, digits of the other bound)
// digits. Requires lo <= hi when both are given.
std::string IntegerRangeBody(std::optional<int64_t> lo, std::optional<int64_t> hi);

// An integer bound of a number: x >= value (x > value when exclusive), or <= / <.
struct NumberBound {
  int64_t value = 0;
  bool exclusive = false;
};

// GBNF alternatives for JSON numbers without exponent (fraction up to kMaxFreeDigits digits)
// within the bounds. Requires a non-empty interval.
std::string NumberRangeBody(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

// A rule (defined in `rules` on first use) matching the characters of a string in `format`
// (between the quotes; none of them needs escaping): date, time, date-time (RFC 3339
// full-date, full-time, date-time), uuid (RFC 4122 text form) and email (RFC 5321 mailbox,
// dot-atom local part). nullopt for any other format.
std::optional<std::string> StringFormatRule(std::string_view format, GbnfRules& rules);

}  // namespace tessera::grammar::json_schema_internal
