#include "common/grammar/gbnf_parser.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/grammar/token_trie.h"
#include "common/grammar/utf8_ranges.h"
#include "common/util/status_macros.h"

namespace tessera::grammar {

namespace {

using Sequence = std::vector<Symbol>;
using Alternatives = std::vector<Sequence>;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Repetition bounds; max nullopt for unbounded.
struct Repeat {
  size_t min = 1;
  std::optional<size_t> max = 1;
};

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GbnfOptions& options) : text_(text), options_(options) {}

  absl::StatusOr<Grammar> Parse() {
    SkipSpace();
    if (AtEnd()) return absl::InvalidArgumentError("grammar is empty (no rules)");
    while (!AtEnd()) TESSERA_RETURN_IF_ERROR(ParseRule());
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (!defined_[r]) return ErrorAt(first_use_[r], "undefined rule '" + rules_[r].name + "'");
    }
    auto root = rule_ids_.find(std::string(options_.root));
    if (root == rule_ids_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("grammar has no '", std::string(options_.root), "' rule (the start rule)"));
    }
    return Grammar::Compile(std::move(rules_), root->second, options_.limits);
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  absl::Status ErrorAt(size_t at, std::string_view message) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("grammar line ", line, ", column ", column, ": ", std::string(message)));
  }
  absl::Status Error(std::string_view message) const { return ErrorAt(pos_, message); }

  // Blanks, newlines and comments.
  void SkipSpace() {
    while (!AtEnd()) {
      char c = Peek();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view ScanName(size_t from) const {
    size_t end = from;
    while (end < text_.size() && IsNameChar(text_[end])) ++end;
    return text_.substr(from, end - from);
  }

  // Whether a rule definition `name ::=` starts at the current position.
  bool AtRuleStart() const {
    std::string_view name = ScanName(pos_);
    if (name.empty()) return false;
    size_t at = pos_ + name.size();
    while (at < text_.size() && (text_[at] == ' ' || text_[at] == '\t')) ++at;
    return text_.substr(at, 3) == "::=";
  }

  uint32_t RuleId(std::string_view name, size_t use_at) {
    auto [it, inserted] =
        rule_ids_.try_emplace(std::string(name), static_cast<uint32_t>(rules_.size()));
    if (inserted) {
      rules_.push_back({std::string(name), {}});
      defined_.push_back(false);
      first_use_.push_back(use_at);
    }
    return it->second;
  }

  absl::StatusOr<uint32_t> NewHelperRule(Alternatives alternatives) {
    if (rules_.size() >= options_.limits.max_rules) {
      return Error(absl::StrCat("grammar needs more than ", options_.limits.max_rules,
                                " rules (after expanding repetitions)"));
    }
    uint32_t id = static_cast<uint32_t>(rules_.size());
    rules_.push_back({absl::StrCat(current_rule_, "_", ++helper_count_), std::move(alternatives)});
    defined_.push_back(true);
    first_use_.push_back(pos_);
    return id;
  }

  absl::Status CountElements(size_t n) {
    elements_ += n;
    if (elements_ > options_.limits.max_elements) {
      return Error(absl::StrCat("grammar needs more than ", options_.limits.max_elements,
                                " elements (after expanding repetitions)"));
    }
    return absl::OkStatus();
  }

  absl::Status ParseRule() {
    size_t start = pos_;
    std::string_view name = ScanName(pos_);
    if (name.empty()) {
      if (Peek() == ')') return Error("unexpected ')' (unbalanced parentheses)");
      return Error(absl::StrCat("expected a rule name, found '", std::string(1, Peek()), "'"));
    }
    pos_ += name.size();
    while (Peek() == ' ' || Peek() == '\t') ++pos_;
    if (text_.substr(pos_, 3) != "::=") {
      return Error(absl::StrCat("expected '::=' after rule name '", std::string(name), "'"));
    }
    pos_ += 3;
    uint32_t id = RuleId(name, start);
    if (defined_[id])
      return ErrorAt(start, absl::StrCat("rule '", std::string(name), "' is defined twice"));
    defined_[id] = true;
    current_rule_ = std::string(name);
    helper_count_ = 0;
    absl::StatusOr<Alternatives> alts = ParseAlternatives(0);
    if (!alts.ok()) return alts.status();
    rules_[id].alternatives = std::move(*alts);
    SkipSpace();
    return absl::OkStatus();
  }

  absl::StatusOr<Alternatives> ParseAlternatives(size_t depth) {
    if (depth > options_.max_nesting) {
      return Error(absl::StrCat("parentheses nested deeper than ", options_.max_nesting));
    }
    Alternatives alts;
    while (true) {
      absl::StatusOr<Sequence> seq = ParseSequence(depth);
      if (!seq.ok()) return seq.status();
      TESSERA_RETURN_IF_ERROR(CountElements(1));
      alts.push_back(std::move(*seq));
      if (Peek() != '|') return alts;
      ++pos_;
    }
  }

  absl::StatusOr<Sequence> ParseSequence(size_t depth) {
    Sequence seq;
    while (true) {
      SkipSpace();
      if (AtEnd() || Peek() == '|' || Peek() == ')' || AtRuleStart()) return seq;
      absl::StatusOr<Sequence> item = ParseItem(depth);
      if (!item.ok()) return item.status();
      while (true) {
        absl::StatusOr<std::optional<Repeat>> repeat = ParseRepeat();
        if (!repeat.ok()) return repeat.status();
        if (!repeat->has_value()) break;
        absl::StatusOr<Sequence> repeated = Repetition(std::move(*item), **repeat);
        if (!repeated.ok()) return repeated.status();
        item = std::move(repeated);
      }
      TESSERA_RETURN_IF_ERROR(CountElements(item->size()));
      seq.insert(seq.end(), item->begin(), item->end());
    }
  }

  absl::StatusOr<Sequence> ParseItem(size_t depth) {
    char c = Peek();
    if (c == '"') return ParseLiteral();
    if (c == '[') return ParseClass();
    if (c == '<') return ParseTokenReference();
    if (c == '.') {
      ++pos_;
      return ClassSymbol({{0, kMaxCodePoint}});
    }
    if (c == '(') {
      size_t open = pos_++;
      absl::StatusOr<Alternatives> alts = ParseAlternatives(depth + 1);
      if (!alts.ok()) return alts.status();
      if (Peek() != ')') {
        return Error(absl::StrCat("expected ')' to close the '(' at ", LocationOf(open)));
      }
      ++pos_;
      if (alts->size() == 1) return std::move(alts->front());
      absl::StatusOr<uint32_t> helper = NewHelperRule(std::move(*alts));
      if (!helper.ok()) return helper.status();
      return Sequence{Symbol::Rule(*helper)};
    }
    std::string_view name = ScanName(pos_);
    if (!name.empty()) {
      uint32_t id = RuleId(name, pos_);
      pos_ += name.size();
      return Sequence{Symbol::Rule(id)};
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      return Error(absl::StrCat("'", std::string(1, c), "' must follow an element"));
    }
    return Error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
  }

  std::string LocationOf(size_t at) const {
    std::string message(ErrorAt(at, "").message());
    // "grammar line L, column C: " -> "line L, column C"
    return message.substr(8, message.size() - 10);
  }

  // After a backslash: the escaped code point.
  absl::StatusOr<uint32_t> ParseEscape() {
    size_t at = pos_ - 1;
    if (AtEnd()) return ErrorAt(at, "bad escape: '\\' at the end of the grammar");
    char c = text_[pos_++];
    switch (c) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '/':
      case '^':
        return static_cast<uint8_t>(c);
      case 'x':
      case 'u':
      case 'U': {
        int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t value = 0;
        for (int i = 0; i < digits; ++i) {
          int h = HexValue(Peek());
          if (h < 0) {
            return ErrorAt(at, absl::StrCat("bad escape: '\\", std::string(1, c), "' needs ",
                                            digits, " hex digits"));
          }
          value = value * 16 + static_cast<uint32_t>(h);
          ++pos_;
        }
        if (value > kMaxCodePoint || (value >= 0xD800 && value <= 0xDFFF)) {
          return ErrorAt(at, absl::StrCat("bad escape: U+", absl::Hex(value),
                                          " is not a Unicode scalar value"));
        }
        return value;
      }
      default:
        return ErrorAt(at, absl::StrCat("bad escape '\\", std::string(1, c), "'"));
    }
  }

  // `<[123]>`: special token 123 of the vocabulary, as SpecialTokenBytes spells it.
  absl::StatusOr<Sequence> ParseTokenReference() {
    const size_t open = pos_++;
    if (Peek() != '[') {
      return ErrorAt(open, "a token reference is written <[id]> (a token id in decimal)");
    }
    ++pos_;
    uint64_t id = 0;
    size_t digits = 0;
    while (Peek() >= '0' && Peek() <= '9' && digits < 10) {
      id = id * 10 + static_cast<uint64_t>(Peek() - '0');
      ++pos_;
      ++digits;
    }
    if (digits == 0 || Peek() != ']' || id > 0xFFFFFFFFull) {
      return ErrorAt(open, "a token reference is written <[id]> (a token id in decimal)");
    }
    ++pos_;
    if (Peek() != '>') {
      return ErrorAt(open, "a token reference is written <[id]> (a token id in decimal)");
    }
    ++pos_;
    Sequence seq;
    for (char b : SpecialTokenBytes(static_cast<uint32_t>(id))) {
      seq.push_back(Symbol::Bytes(ByteSet::Single(static_cast<uint8_t>(b))));
    }
    return seq;
  }

  absl::StatusOr<Sequence> ParseLiteral() {
    size_t open = pos_++;
    Sequence seq;
    std::vector<uint8_t> bytes;
    while (true) {
      if (AtEnd()) return ErrorAt(open, "unterminated string literal");
      char c = text_[pos_++];
      if (c == '"') break;
      if (c == '\\') {
        absl::StatusOr<uint32_t> cp = ParseEscape();
        if (!cp.ok()) return cp.status();
        AppendUtf8(*cp, bytes);
      } else {
        // 0xFE and 0xFF are never UTF-8; they spell special tokens (<[id]>) only.
        if (c == '\xFE' || c == '\xFF') {
          return ErrorAt(pos_ - 1, "invalid UTF-8 in string literal (byte 0xFE or 0xFF)");
        }
        bytes.push_back(static_cast<uint8_t>(c));
      }
    }
    for (uint8_t b : bytes) seq.push_back(Symbol::Bytes(ByteSet::Single(b)));
    return seq;
  }

  // One code point of a class: an escape or a UTF-8 character of the grammar text.
  absl::StatusOr<uint32_t> ParseClassChar() {
    size_t at = pos_;
    uint8_t b = static_cast<uint8_t>(text_[pos_++]);
    if (b == '\\') return ParseEscape();
    if (b < 0x80) return b;
    const int extra = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : 0;
    const absl::Status invalid = ErrorAt(at, "invalid UTF-8 in character class");
    if (extra == 0 || b > 0xF4) return invalid;
    uint32_t cp = b & (0x3Fu >> extra);
    for (int i = 0; i < extra; ++i) {
      const uint8_t cont = static_cast<uint8_t>(Peek());
      if ((cont & 0xC0) != 0x80) return invalid;
      cp = (cp << 6) | (cont & 0x3F);
      ++pos_;
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8 (RFC 3629).
    static constexpr uint32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[extra] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return invalid;
    }
    return cp;
  }

  absl::StatusOr<Sequence> ParseClass() {
    size_t open = pos_++;
    bool negated = Peek() == '^';
    if (negated) ++pos_;
    std::vector<CodePointRange> ranges;
    while (true) {
      if (AtEnd()) return ErrorAt(open, "unterminated character class (missing ']')");
      if (Peek() == ']') {
        ++pos_;
        break;
      }
      absl::StatusOr<uint32_t> lo = ParseClassChar();
      if (!lo.ok()) return lo.status();
      uint32_t hi = *lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
        size_t dash = pos_++;
        absl::StatusOr<uint32_t> end = ParseClassChar();
        if (!end.ok()) return end.status();
        if (*end < *lo) return ErrorAt(dash, "character class range is reversed (end < start)");
        hi = *end;
      }
      ranges.push_back({*lo, hi});
    }
    ranges = NormalizeRanges(std::move(ranges));
    if (negated) ranges = ComplementRanges(ranges);
    return ClassSymbol(std::move(ranges));
  }

  // A class as one byte-set symbol when it is ASCII-only, else a (shared) helper rule with
  // one alternative per UTF-8 byte-range sequence.
  absl::StatusOr<Sequence> ClassSymbol(std::vector<CodePointRange> ranges) {
    ByteSet ascii;
    std::vector<CodePointRange> multi_byte;
    std::string key;
    for (const CodePointRange& r : ranges) {
      absl::StrAppend(&key, r.lo, "-", r.hi, ",");
      for (uint32_t cp = r.lo; cp <= std::min<uint32_t>(r.hi, 0x7F); ++cp) {
        ascii.Add(static_cast<uint8_t>(cp));
      }
      if (r.hi >= 0x80) multi_byte.push_back({std::max<uint32_t>(r.lo, 0x80), r.hi});
    }
    if (multi_byte.empty()) return Sequence{Symbol::Bytes(ascii)};
    if (auto it = class_rules_.find(key); it != class_rules_.end()) {
      return Sequence{Symbol::Rule(it->second)};
    }
    Alternatives alts;
    if (!ascii.Empty()) alts.push_back({Symbol::Bytes(ascii)});
    for (const ByteRangeSequence& seq : Utf8Sequences(multi_byte)) {
      Sequence alt;
      for (auto [lo, hi] : seq) alt.push_back(Symbol::Bytes(ByteSet::Range(lo, hi)));
      TESSERA_RETURN_IF_ERROR(CountElements(alt.size() + 1));
      alts.push_back(std::move(alt));
    }
    absl::StatusOr<uint32_t> helper = NewHelperRule(std::move(alts));
    if (!helper.ok()) return helper.status();
    rules_[*helper].name = current_rule_ + "_class";
    class_rules_[key] = *helper;
    return Sequence{Symbol::Rule(*helper)};
  }

  absl::StatusOr<size_t> ParseCount() {
    size_t value = 0, digits = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      if (++digits > 9) return Error("repetition count is too large");
      value = value * 10 + static_cast<size_t>(Peek() - '0');
      ++pos_;
    }
    if (digits == 0) return Error("expected a repetition count");
    return value;
  }

  void SkipBlanks() {
    while (Peek() == ' ' || Peek() == '\t') ++pos_;
  }

  // A postfix operator after an item, or nullopt when none follows.
  absl::StatusOr<std::optional<Repeat>> ParseRepeat() {
    char c = Peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      if (c == '*') return Repeat{0, std::nullopt};
      if (c == '+') return Repeat{1, std::nullopt};
      return Repeat{0, 1};
    }
    if (c != '{') return std::optional<Repeat>();
    size_t open = pos_++;
    SkipBlanks();
    Repeat repeat{0, std::nullopt};
    if (Peek() != ',') {
      absl::StatusOr<size_t> min = ParseCount();
      if (!min.ok()) return min.status();
      repeat = {*min, *min};
      SkipBlanks();
    }
    if (Peek() == ',') {
      ++pos_;
      SkipBlanks();
      repeat.max = std::nullopt;
      if (Peek() != '}') {
        absl::StatusOr<size_t> max = ParseCount();
        if (!max.ok()) return max.status();
        repeat.max = *max;
        SkipBlanks();
      }
    }
    if (Peek() != '}') return Error("expected '}' to close the repetition");
    ++pos_;
    if (repeat.max && *repeat.max < repeat.min) {
      return ErrorAt(open, absl::StrCat("repetition {", repeat.min, ",", *repeat.max,
                                        "} has its maximum below its minimum"));
    }
    return std::optional<Repeat>(repeat);
  }

  // Appends x* to `out`: the helper rule R ::= x R | "".
  absl::Status AppendStar(const Symbol& x, Sequence& out) {
    const uint32_t star = static_cast<uint32_t>(rules_.size());
    absl::StatusOr<uint32_t> helper = NewHelperRule({{x, Symbol::Rule(star)}, {}});
    if (!helper.ok()) return helper.status();
    TESSERA_RETURN_IF_ERROR(CountElements(4));
    out.push_back(Symbol::Rule(star));
    return absl::OkStatus();
  }

  // Lowers `item` repeated per `repeat` to symbols and helper rules: x{m,n} with n >= 2 is
  // one counted repetition (Symbol::Repeat); x{m,} is x{m} then R ::= x R | ""; x? is
  // R ::= x | "". With expand_repetitions, x{m,n} is x ... x (m times) then n-m nested
  // optionals (R1 ::= x | "", Ri ::= x R(i-1) | ""). The element count is that of the
  // expanded form either way, so GrammarLimits bound both alike.
  absl::StatusOr<Sequence> Repetition(Sequence item, Repeat repeat) {
    Symbol x;
    if (item.size() == 1) {
      x = item.front();
    } else {
      absl::StatusOr<uint32_t> helper = NewHelperRule({std::move(item)});
      if (!helper.ok()) return helper.status();
      x = Symbol::Rule(*helper);
    }
    size_t optional_count = repeat.max ? *repeat.max - repeat.min : 0;
    TESSERA_RETURN_IF_ERROR(CountElements(repeat.min + 3 * optional_count));
    const size_t counted = repeat.max ? *repeat.max : repeat.min;
    if (!options_.expand_repetitions && counted >= 2) {
      uint32_t body = x.rule;
      if (x.kind != Symbol::Kind::kRule) {
        absl::StatusOr<uint32_t> helper = NewHelperRule({{x}});
        if (!helper.ok()) return helper.status();
        body = *helper;
      }
      Sequence out = {
          Symbol::Repeat(body, static_cast<uint32_t>(repeat.min), static_cast<uint32_t>(counted))};
      if (!repeat.max) TESSERA_RETURN_IF_ERROR(AppendStar(x, out));
      return out;
    }
    Sequence out(repeat.min, x);
    if (!repeat.max) {
      TESSERA_RETURN_IF_ERROR(AppendStar(x, out));
      return out;
    }
    if (optional_count == 0) return out;
    absl::StatusOr<uint32_t> inner = NewHelperRule({{x}, {}});
    if (!inner.ok()) return inner.status();
    for (size_t i = 1; i < optional_count; ++i) {
      inner = NewHelperRule({{x, Symbol::Rule(*inner)}, {}});
      if (!inner.ok()) return inner.status();
    }
    out.push_back(Symbol::Rule(*inner));
    return out;
  }

  std::string_view text_;
  const GbnfOptions& options_;
  size_t pos_ = 0;
  std::vector<RuleDefinition> rules_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;  // where each rule was first named, for "undefined rule"
  absl::flat_hash_map<std::string, uint32_t> rule_ids_;
  absl::flat_hash_map<std::string, uint32_t> class_rules_;  // class ranges -> helper rule
  std::string current_rule_;
  size_t helper_count_ = 0;
  size_t elements_ = 0;
};

}  // namespace

absl::StatusOr<Grammar> ParseGbnf(std::string_view text, const GbnfOptions& options) {
  return GbnfParser(text, options).Parse();
}

}  // namespace tessera::grammar
