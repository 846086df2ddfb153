#include "common/grammar/json_schema_values.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::grammar::json_schema_internal {

namespace {

// The magnitude of a (possibly negative) int64, INT64_MIN included.
uint64_t Magnitude(int64_t v) {
  return v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
}

std::string Digits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return absl::StrCat("[0-9]{", n, "}");
}

std::string DigitClass(char lo, char hi) {
  if (lo == hi) return absl::StrCat("\"", std::string(1, lo), "\"");
  return absl::StrCat("[", std::string(1, lo), "-", std::string(1, hi), "]");
}

void AppendItem(std::string& seq, std::string_view item) {
  if (item.empty()) return;
  if (!seq.empty()) seq += ' ';
  seq += item;
}

// Sequences for the decimal strings between lo and hi, both of the same length (a classic
// digit-range construction: fix the common leading digits, then split the first differing
// digit into its low end, a middle of free digits, and its high end). `prefix`: literal
// digits already fixed.
void SameLength(std::string_view lo, std::string_view hi, const std::string& prefix,
                std::vector<std::string>& out) {
  auto with_prefix = [&](std::string_view rest) {
    std::string seq;
    if (!prefix.empty()) seq = absl::StrCat("\"", prefix, "\"");
    AppendItem(seq, rest);
    return seq;
  };
  if (lo.empty()) {
    out.push_back(with_prefix(""));
    return;
  }
  if (lo == hi) {
    out.push_back(absl::StrCat("\"", prefix, std::string(lo), "\""));
    return;
  }
  if (lo[0] == hi[0]) {
    SameLength(lo.substr(1), hi.substr(1), absl::StrCat(prefix, std::string(1, lo[0])), out);
    return;
  }
  const size_t rest = lo.size() - 1;
  const bool lo_tail_zero = lo.find_first_not_of('0', 1) == std::string_view::npos;
  const bool hi_tail_nine = hi.find_first_not_of('9', 1) == std::string_view::npos;
  const char first_full = lo_tail_zero ? lo[0] : static_cast<char>(lo[0] + 1);
  const char last_full = hi_tail_nine ? hi[0] : static_cast<char>(hi[0] - 1);
  if (!lo_tail_zero)
    SameLength(lo.substr(1), std::string(rest, '9'), absl::StrCat(prefix, std::string(1, lo[0])),
               out);
  if (first_full <= last_full) {
    std::string seq = DigitClass(first_full, last_full);
    AppendItem(seq, Digits(rest));
    out.push_back(with_prefix(seq));
  }
  if (!hi_tail_nine)
    SameLength(std::string(rest, '0'), hi.substr(1), absl::StrCat(prefix, std::string(1, hi[0])),
               out);
}

// Sequences for the canonical decimal strings of [lo, hi] (strings without leading zeros,
// lo <= hi as numbers).
std::vector<std::string> UnsignedRange(const std::string& lo, const std::string& hi) {
  std::vector<std::string> out;
  for (size_t len = lo.size(); len <= hi.size(); ++len) {
    const std::string from = len == lo.size() ? lo : absl::StrCat("1", std::string(len - 1, '0'));
    const std::string to = len == hi.size() ? hi : std::string(len, '9');
    SameLength(from, to, "", out);
  }
  return out;
}

// The largest number an open side reaches: kMaxFreeDigits nines, or as many as `other` has.
std::string OpenEnd(const std::string& other) {
  return std::string(std::max(kMaxFreeDigits, other.size()), '9');
}

std::string Group(const std::vector<std::string>& alternatives) {
  if (alternatives.size() == 1) return alternatives.front();
  return absl::StrCat("( ", absl::StrJoin(alternatives, " | "), " )");
}

// Fractions: any (f in [0, 1)), zero only, or positive.
constexpr char kAnyFraction[] = R"(( "." [0-9]{1,15} )?)";
constexpr char kZeroFraction[] = R"(( "." "0"{1,15} )?)";
constexpr char kPositiveFraction[] = R"("." "0"{0,14} [1-9] [0-9]{0,14})";

// Alternatives for magnitudes n.f (n an integer part, f a fraction) with a <= n.f <= b,
// either end exclusive, b absent for open.
std::vector<std::string> MagnitudeRange(uint64_t a, bool a_exclusive, std::optional<uint64_t> b,
                                        bool b_exclusive) {
  std::vector<std::string> out;
  const std::string a_text = std::to_string(a);
  if (b && *b == a) {
    if (!a_exclusive && !b_exclusive)
      out.push_back(absl::StrCat("\"", a_text, "\" ", kZeroFraction));
    return out;
  }
  out.push_back(absl::StrCat("\"", a_text, "\" ", a_exclusive ? kPositiveFraction : kAnyFraction));
  const std::string inner_lo = std::to_string(a + 1);
  if (!b || *b - 1 >= a + 1) {
    const std::string inner_hi = b ? std::to_string(*b - 1) : OpenEnd(inner_lo);
    out.push_back(absl::StrCat(Group(UnsignedRange(inner_lo, inner_hi)), " ", kAnyFraction));
  }
  if (b && !b_exclusive)
    out.push_back(absl::StrCat("\"", std::to_string(*b), "\" ", kZeroFraction));
  return out;
}

}  // namespace

std::string IntegerRangeBody(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alternatives;
  if (!lo || *lo < 0) {
    // Negative values: "-" and a magnitude in [max(1, -hi), -lo].
    const uint64_t low = hi && *hi < 0 ? Magnitude(*hi) : 1;
    const std::string low_text = std::to_string(low);
    const std::string high_text = lo ? std::to_string(Magnitude(*lo)) : OpenEnd(low_text);
    alternatives.push_back(absl::StrCat("\"-\" ", Group(UnsignedRange(low_text, high_text))));
  }
  if (!hi || *hi >= 0) {
    const std::string low_text = std::to_string(lo ? std::max<int64_t>(*lo, 0) : 0);
    const std::string high_text = hi ? std::to_string(*hi) : OpenEnd(low_text);
    for (std::string& seq : UnsignedRange(low_text, high_text)) alternatives.push_back(seq);
  }
  return absl::StrJoin(alternatives, " | ");
}

std::string NumberRangeBody(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  std::vector<std::string> alternatives;
  // x >= 0: magnitudes from max(lo, 0) to hi.
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {
    const bool lo_positive = lo && lo->value >= 0;
    std::optional<uint64_t> b;
    if (hi) b = static_cast<uint64_t>(hi->value);
    for (std::string& seq : MagnitudeRange(lo_positive ? static_cast<uint64_t>(lo->value) : 0,
                                           lo_positive && lo->exclusive, b, hi && hi->exclusive)) {
      alternatives.push_back(seq);
    }
  }
  // x < 0: "-" and a magnitude above 0 (or above -hi) up to -lo.
  if (!lo || lo->value < 0) {
    const bool hi_negative = hi && hi->value < 0;
    std::optional<uint64_t> b;
    if (lo) b = Magnitude(lo->value);
    std::vector<std::string> magnitudes =
        MagnitudeRange(hi_negative ? Magnitude(hi->value) : 0, hi_negative ? hi->exclusive : true,
                       b, lo && lo->exclusive);
    if (!magnitudes.empty()) alternatives.push_back(absl::StrCat("\"-\" ", Group(magnitudes)));
  }
  return absl::StrJoin(alternatives, " | ");
}

std::optional<std::string> StringFormatRule(std::string_view format, GbnfRules& rules) {
  // RFC 3339 section 5.6, with the day limited by the month and February 29 by leap years
  // (divisible by 4, centuries only when divisible by 400); year 0000 is left out, as most
  // date libraries refuse it. Seconds stop at 59 (no leap second); 'T' and 'Z' upper case.
  auto date = [&]() {
    const std::string year = rules.Helper(
        "year", R"([0-9]{3} [1-9] | [0-9]{2} [1-9] "0" | [0-9] [1-9] "00" | [1-9] "000")");
    const std::string leap_pair =
        rules.Helper("leap-pair", R"("0" [48] | [2468] [048] | [13579] [26])");
    const std::string leap_year = rules.Helper(
        "leap-year", absl::StrCat("[0-9]{2} ", leap_pair, " | ", leap_pair, " \"00\""));
    const std::string days = rules.Helper(
        "month-day", R"(( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | )"
                     R"(( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | )"
                     R"("02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ))");
    return rules.Helper("date",
                        absl::StrCat(year, " \"-\" ", days, " | ", leap_year, " \"-02-29\""));
  };
  auto time = [&]() {
    const std::string hour = rules.Helper("hour", R"([01] [0-9] | "2" [0-3])");
    return rules.Helper(
        "time", absl::StrCat(hour, R"( ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? )",
                             R"(( "Z" | [+\-] )", hour, R"( ":" [0-5] [0-9] ))"));
  };
  if (format == "date") return date();
  if (format == "time") return time();
  if (format == "date-time") {
    const std::string d = date();
    const std::string t = time();
    return rules.Helper("date-time", absl::StrCat(d, " \"T\" ", t));
  }
  if (format == "uuid") {
    return rules.Helper("uuid", R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" )"
                                R"([0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})");
  }
  if (format == "email") {
    // A dot-atom local part of at most 64 characters and two to four domain labels of at
    // most 32 (RFC 5321's limits: 64 for the local part, 255 in all).
    const std::string atext = R"([A-Za-z0-9!#$%&'*+/=?\^_`{|}~\-])";
    const std::string local =
        rules.Helper("email-local", absl::StrCat(atext, "{1,32} ( \".\" ", atext, "{1,15} ){0,2}"));
    const std::string label =
        rules.Helper("email-label", R"([A-Za-z0-9] ( [A-Za-z0-9\-]{0,30} [A-Za-z0-9] )?)");
    return rules.Helper("email",
                        absl::StrCat(local, " \"@\" ", label, " ( \".\" ", label, " ){1,3}"));
  }
  return std::nullopt;
}

}  // namespace tessera::grammar::json_schema_internal
