#include "common/grammar/regex_parser.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/util/status_macros.h"

namespace tessera::grammar::regex_internal {

namespace {

constexpr size_t kMaxNesting = 64;
constexpr size_t kMaxRepeat = 1000;
constexpr size_t kMaxExpandedSize = 100000;

size_t SaturatingMul(size_t a, size_t b) {
  if (a != 0 && b > kUnbounded / a) return kUnbounded;
  return a * b;
}
size_t SaturatingAdd(size_t a, size_t b) { return a + b < a ? kUnbounded : a + b; }

Node SetNode(Ranges ranges) {
  Node n;
  n.kind = Node::Kind::kSet;
  n.set = NormalizeRanges(std::move(ranges));
  n.size = 1;
  return n;
}

Node Combine(Node::Kind kind, std::vector<Node> children) {
  if (children.empty()) return Node{};
  if (children.size() == 1) return std::move(children.front());
  Node n;
  n.kind = kind;
  for (const Node& c : children) n.size = SaturatingAdd(n.size, c.size);
  n.children = std::move(children);
  return n;
}

Node Repeat(Node child, size_t min, size_t max) {
  Node n;
  n.kind = Node::Kind::kRepeat;
  n.min = min;
  n.max = max;
  n.size = SaturatingMul(child.size, max == kUnbounded ? min + 1 : max);
  n.children.push_back(std::move(child));
  return n;
}

// Whether the node matches the empty string.
bool Nullable(const Node& n) {
  switch (n.kind) {
    case Node::Kind::kEmpty:
      return true;
    case Node::Kind::kSet:
      return false;
    case Node::Kind::kConcat:
      for (const Node& c : n.children) {
        if (!Nullable(c)) return false;
      }
      return true;
    case Node::Kind::kAlt:
      for (const Node& c : n.children) {
        if (Nullable(c)) return true;
      }
      return false;
    case Node::Kind::kRepeat:
      return n.min == 0 || Nullable(n.children.front());
  }
  return false;
}

// The node's language without the empty string; nullopt when nothing is left. Needed for
// X* with a nullable X: GBNF's expansion R ::= X R | "" would be left-recursive, and
// X* = (X minus the empty string)*.
std::optional<Node> NonEmpty(const Node& n) {
  switch (n.kind) {
    case Node::Kind::kEmpty:
      return std::nullopt;
    case Node::Kind::kSet:
      return n;
    case Node::Kind::kAlt: {
      std::vector<Node> kept;
      for (const Node& c : n.children) {
        if (std::optional<Node> ne = NonEmpty(c)) kept.push_back(std::move(*ne));
      }
      if (kept.empty()) return std::nullopt;
      return Combine(Node::Kind::kAlt, std::move(kept));
    }
    case Node::Kind::kRepeat: {
      if (n.max == 0) return std::nullopt;
      if (!Nullable(n)) return n;
      std::optional<Node> ne = NonEmpty(n.children.front());
      if (!ne) return std::nullopt;
      // Up to max pieces, each possibly empty = one to max non-empty pieces.
      return Repeat(std::move(*ne), 1, n.max);
    }
    case Node::Kind::kConcat: {
      if (!Nullable(n)) return n;
      // Every child is nullable: the first non-empty child is the i-th, then anything.
      std::vector<Node> alternatives;
      for (size_t i = 0; i < n.children.size(); ++i) {
        std::optional<Node> ne = NonEmpty(n.children[i]);
        if (!ne) continue;
        std::vector<Node> seq = {std::move(*ne)};
        seq.insert(seq.end(), n.children.begin() + static_cast<ptrdiff_t>(i) + 1, n.children.end());
        alternatives.push_back(Combine(Node::Kind::kConcat, std::move(seq)));
      }
      if (alternatives.empty()) return std::nullopt;
      return Combine(Node::Kind::kAlt, std::move(alternatives));
    }
  }
  return std::nullopt;
}

// ECMAScript's character class escapes (ECMA-262, CharacterClassEscape; WhiteSpace and
// LineTerminator for \s).
Ranges DigitRanges() { return {{'0', '9'}}; }
Ranges WordRanges() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
Ranges SpaceRanges() {
  return {{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
          {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
}
Ranges DotRanges() {
  return ComplementRanges(NormalizeRanges({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
}

int HexDigit(uint32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

bool IsAsciiPunctuation(uint32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}

std::string Show(uint32_t c) {
  if (c >= 0x20 && c < 0x7F) return std::string(1, static_cast<char>(c));
  return absl::StrFormat("U+%04X", c);
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view pattern) : pattern_(pattern) {}

  absl::StatusOr<std::vector<TopAlternative>> Parse() {
    TESSERA_RETURN_IF_ERROR(Decode());
    std::vector<TopAlternative> top;
    while (true) {
      TopAlternative alt;
      if (Peek() == '^') {
        alt.anchored_start = true;
        ++pos_;
      }
      absl::StatusOr<Node> seq = ParseSequence(0);
      if (!seq.ok()) return seq.status();
      alt.node = std::move(*seq);
      if (Peek() == '$') {
        alt.anchored_end = true;
        ++pos_;
      }
      total_ = SaturatingAdd(total_, alt.node.size);
      top.push_back(std::move(alt));
      if (AtEnd()) break;
      if (Peek() == '|') {
        ++pos_;
        continue;
      }
      if (Peek() == ')') return Error("unbalanced ')'");
      if (Peek() == '$') return Error("'$' is only supported at the end of the pattern");
      return Error(absl::StrCat("unexpected '", Show(Peek()), "'"));
    }
    if (total_ > kMaxExpandedSize) {
      return ErrorAt(0, absl::StrCat("the pattern expands to more than ", kMaxExpandedSize,
                                     " characters and classes"));
    }
    return top;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  uint32_t Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : 0xFFFFFFFF;
  }
  absl::Status ErrorAt(size_t at, std::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrCat("regex at offset ", at, ": ", std::string(message)));
  }
  absl::Status Error(std::string_view message) const { return ErrorAt(pos_, message); }

  // The pattern as code points, so that offsets count characters.
  absl::Status Decode() {
    size_t i = 0;
    while (i < pattern_.size()) {
      const auto b = static_cast<uint8_t>(pattern_[i]);
      const int extra = b < 0x80 ? 0 : b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : -1;
      const absl::Status invalid = ErrorAt(text_.size(), "invalid UTF-8 in the pattern");
      if (extra < 0 || b > 0xF4 || i + static_cast<size_t>(extra) >= pattern_.size()) {
        return invalid;
      }
      uint32_t cp = extra == 0 ? b : b & (0x3Fu >> extra);
      for (int k = 1; k <= extra; ++k) {
        const auto cont = static_cast<uint8_t>(pattern_[i + static_cast<size_t>(k)]);
        if ((cont & 0xC0) != 0x80) return invalid;
        cp = (cp << 6) | (cont & 0x3F);
      }
      // Overlong forms, surrogates and values past U+10FFFF are not UTF-8 (RFC 3629).
      static constexpr uint32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
      if (cp < kMinForLength[extra] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
        return invalid;
      }
      text_.push_back(cp);
      i += static_cast<size_t>(extra) + 1;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Node> ParseAlternation(size_t depth) {
    Node alt;
    alt.kind = Node::Kind::kAlt;
    while (true) {
      absl::StatusOr<Node> seq = ParseSequence(depth);
      if (!seq.ok()) return seq.status();
      alt.size = SaturatingAdd(alt.size, seq->size);
      alt.children.push_back(std::move(*seq));
      if (Peek() != '|') break;
      ++pos_;
    }
    if (alt.children.size() == 1) return std::move(alt.children.front());
    return alt;
  }

  absl::StatusOr<Node> ParseSequence(size_t depth) {
    Node seq;
    seq.kind = Node::Kind::kConcat;
    while (!AtEnd()) {
      const uint32_t c = Peek();
      if (c == '|' || c == ')') break;
      if (c == '$') {
        // Accepted only as the last character of a top-level alternative.
        const uint32_t next = Peek(1);
        if (depth == 0 && (next == '|' || pos_ + 1 == text_.size())) break;
        return Error(
            "'$' is only supported at the end of the pattern (or of a top-level "
            "alternative)");
      }
      if (c == '^') {
        return Error(
            "'^' is only supported at the start of the pattern (or of a top-level "
            "alternative)");
      }
      absl::StatusOr<Node> item = ParseQuantified(depth);
      if (!item.ok()) return item.status();
      seq.size = SaturatingAdd(seq.size, item->size);
      if (item->kind == Node::Kind::kConcat) {
        for (Node& child : item->children) seq.children.push_back(std::move(child));
      } else if (item->kind != Node::Kind::kEmpty) {
        seq.children.push_back(std::move(*item));
      }
    }
    if (seq.children.empty()) return Node{};
    if (seq.children.size() == 1) return std::move(seq.children.front());
    return seq;
  }

  static bool IsQuantifierStart(uint32_t c) { return c == '*' || c == '+' || c == '?'; }

  bool AtQuantifier() const {
    return IsQuantifierStart(Peek()) || (Peek() == '{' && QuantifierEnd().has_value());
  }

  absl::StatusOr<Node> ParseQuantified(size_t depth) {
    if (AtQuantifier()) return Error(absl::StrCat("nothing to repeat before '", Show(Peek()), "'"));
    absl::StatusOr<Node> atom = ParseAtom(depth);
    if (!atom.ok()) return atom.status();
    if (!AtQuantifier()) return atom;
    const size_t quantifier_at = pos_;
    std::pair<size_t, size_t> bounds;
    const uint32_t c = Peek();
    if (c == '{') {
      absl::StatusOr<std::pair<size_t, size_t>> counted = ParseCountedQuantifier();
      if (!counted.ok()) return counted.status();
      bounds = *counted;
    } else {
      ++pos_;
      bounds = c == '*'   ? std::make_pair(size_t{0}, kUnbounded)
               : c == '+' ? std::make_pair(size_t{1}, kUnbounded)
                          : std::make_pair(size_t{0}, size_t{1});
    }
    if (Peek() == '?') ++pos_;  // lazy: the same language
    if (AtQuantifier()) return Error(absl::StrCat("nothing to repeat before '", Show(Peek()), "'"));
    if (bounds.second == 0) return Node{};
    Node child = std::move(*atom);
    if (bounds.second == kUnbounded && Nullable(child)) {
      std::optional<Node> ne = NonEmpty(child);
      if (!ne) return Node{};
      child = std::move(*ne);
      bounds.first = 0;
    }
    Node repeat = Repeat(std::move(child), bounds.first, bounds.second);
    if (repeat.size > kMaxExpandedSize) {
      return ErrorAt(quantifier_at,
                     absl::StrCat("this repetition expands the pattern to more than ",
                                  kMaxExpandedSize, " characters and classes"));
    }
    return repeat;
  }

  // When a valid {m}, {m,} or {m,n} starts at pos_, the offset of its '}'.
  std::optional<size_t> QuantifierEnd() const {
    size_t i = pos_ + 1;
    auto digits = [&]() {
      size_t start = i;
      while (i < text_.size() && text_[i] >= '0' && text_[i] <= '9') ++i;
      return i > start;
    };
    if (!digits()) return std::nullopt;
    if (i < text_.size() && text_[i] == ',') {
      ++i;
      digits();
    }
    if (i < text_.size() && text_[i] == '}') return i;
    return std::nullopt;
  }

  // {m}, {m,} or {m,n} at pos_; leaves pos_ after the '}'.
  absl::StatusOr<std::pair<size_t, size_t>> ParseCountedQuantifier() {
    const size_t open = pos_;
    if (!QuantifierEnd()) {
      return Error("'{' does not start a quantifier {m}, {m,} or {m,n} (write \\{ for a brace)");
    }
    ++pos_;
    auto number = [&]() -> absl::StatusOr<size_t> {
      size_t value = 0;
      const size_t start = pos_;
      while (Peek() >= '0' && Peek() <= '9') {
        value = value > kMaxRepeat ? value : value * 10 + (Peek() - '0');
        ++pos_;
      }
      if (value > kMaxRepeat) {
        return ErrorAt(start, absl::StrCat("repetition count is above the limit of ", kMaxRepeat));
      }
      return value;
    };
    absl::StatusOr<size_t> min = number();
    if (!min.ok()) return min.status();
    size_t max = *min;
    if (Peek() == ',') {
      ++pos_;
      max = kUnbounded;
      if (Peek() != '}') {
        absl::StatusOr<size_t> parsed = number();
        if (!parsed.ok()) return parsed.status();
        max = *parsed;
      }
    }
    ++pos_;  // '}'
    if (max < *min) {
      return ErrorAt(open, absl::StrCat("repetition {", *min, ",", max,
                                        "} has its maximum below its minimum"));
    }
    return std::make_pair(*min, max);
  }

  absl::StatusOr<Node> ParseAtom(size_t depth) {
    const uint32_t c = Peek();
    if (c == '(') return ParseGroup(depth);
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      return SetNode(DotRanges());
    }
    if (c == '\\') {
      const size_t at = pos_++;
      absl::StatusOr<Ranges> set = ParseEscape(at, /*in_class=*/false);
      if (!set.ok()) return set.status();
      return SetNode(std::move(*set));
    }
    if (c == '{') {
      return Error("'{' does not start a quantifier {m}, {m,} or {m,n} (write \\{ for a brace)");
    }
    ++pos_;
    return SetNode({{c, c}});
  }

  absl::StatusOr<Node> ParseGroup(size_t depth) {
    const size_t open = pos_++;
    if (depth + 1 > kMaxNesting) {
      return ErrorAt(open, absl::StrCat("groups nested deeper than ", kMaxNesting));
    }
    if (Peek() == '?') {
      const uint32_t kind = Peek(1);
      if (kind == ':') {
        pos_ += 2;
      } else if (kind == '=' || kind == '!') {
        return ErrorAt(open, "lookahead assertions are not supported");
      } else if (kind == '<' && (Peek(2) == '=' || Peek(2) == '!')) {
        return ErrorAt(open, "lookbehind assertions are not supported");
      } else if (kind == '<') {
        // A named group: the name is skipped, its contents matched.
        size_t i = pos_ + 2;
        while (i < text_.size() && text_[i] != '>' && text_[i] != ')') ++i;
        if (i >= text_.size() || text_[i] != '>' || i == pos_ + 2) {
          return ErrorAt(open, "a named group needs a name: (?<name>...)");
        }
        pos_ = i + 1;
      } else {
        return ErrorAt(open, "inline flags and other (?...) groups are not supported");
      }
    }
    absl::StatusOr<Node> inner = ParseAlternation(depth + 1);
    if (!inner.ok()) return inner.status();
    if (Peek() != ')') return ErrorAt(open, "unbalanced '(' (missing ')')");
    ++pos_;
    return inner;
  }

  absl::StatusOr<Node> ParseClass() {
    const size_t open = pos_++;
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    Ranges ranges;
    while (true) {
      if (AtEnd()) return ErrorAt(open, "unterminated character class (missing ']')");
      if (Peek() == ']') {
        ++pos_;
        break;
      }
      const size_t lo_at = pos_;
      absl::StatusOr<Ranges> lo = ParseClassAtom();
      if (!lo.ok()) return lo.status();
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
        const size_t dash = pos_++;
        absl::StatusOr<Ranges> hi = ParseClassAtom();
        if (!hi.ok()) return hi.status();
        const bool single_lo = lo->size() == 1 && lo->front().lo == lo->front().hi;
        const bool single_hi = hi->size() == 1 && hi->front().lo == hi->front().hi;
        if (!single_lo || !single_hi) {
          return ErrorAt(lo_at, "a class escape such as \\d cannot be the end of a range");
        }
        if (hi->front().lo < lo->front().lo) {
          return ErrorAt(dash, "character class range is reversed (end < start)");
        }
        ranges.push_back({lo->front().lo, hi->front().lo});
        continue;
      }
      ranges.insert(ranges.end(), lo->begin(), lo->end());
    }
    ranges = NormalizeRanges(std::move(ranges));
    if (negated) ranges = ComplementRanges(ranges);
    if (ranges.empty()) return ErrorAt(open, "the character class matches no character");
    return SetNode(std::move(ranges));
  }

  absl::StatusOr<Ranges> ParseClassAtom() {
    const uint32_t c = Peek();
    if (c != '\\') {
      ++pos_;
      return Ranges{{c, c}};
    }
    const size_t at = pos_++;
    return ParseEscape(at, /*in_class=*/true);
  }

  // After a backslash at `at`: the set the escape stands for.
  absl::StatusOr<Ranges> ParseEscape(size_t at, bool in_class) {
    if (AtEnd()) return ErrorAt(at, "the pattern ends with '\\'");
    const uint32_t c = text_[pos_++];
    auto single = [](uint32_t cp) { return Ranges{{cp, cp}}; };
    switch (c) {
      case 'd':
        return DigitRanges();
      case 'D':
        return ComplementRanges(NormalizeRanges(DigitRanges()));
      case 'w':
        return WordRanges();
      case 'W':
        return ComplementRanges(NormalizeRanges(WordRanges()));
      case 's':
        return SpaceRanges();
      case 'S':
        return ComplementRanges(NormalizeRanges(SpaceRanges()));
      case 't':
        return single('\t');
      case 'n':
        return single('\n');
      case 'r':
        return single('\r');
      case 'v':
        return single('\v');
      case 'f':
        return single('\f');
      case 'b':
        if (in_class) return single('\b');
        return ErrorAt(at, "word boundary assertions (\\b) are not supported");
      case 'B':
        return ErrorAt(at, "word boundary assertions (\\B) are not supported");
      case '0':
        if (Peek() >= '0' && Peek() <= '9') {
          return ErrorAt(at, "octal escapes are not supported (use \\xHH)");
        }
        return single(0);
      case 'c': {
        const uint32_t letter = Peek();
        if (!((letter >= 'a' && letter <= 'z') || (letter >= 'A' && letter <= 'Z'))) {
          return ErrorAt(at, "'\\c' must be followed by a letter");
        }
        ++pos_;
        return single(letter % 32);
      }
      case 'x': {
        absl::StatusOr<uint32_t> value = HexDigits(at, 2);
        if (!value.ok()) return value.status();
        return single(*value);
      }
      case 'u': {
        absl::StatusOr<uint32_t> cp = ParseUnicodeEscape(at);
        if (!cp.ok()) return cp.status();
        return single(*cp);
      }
      case 'k':
        return ErrorAt(at, "backreferences are not supported");
      case 'p':
      case 'P':
        return ErrorAt(at, "Unicode property escapes (\\p{...}) are not supported");
      default:
        break;
    }
    if (c >= '1' && c <= '9') return ErrorAt(at, "backreferences are not supported");
    if (IsAsciiPunctuation(c)) return single(c);
    return ErrorAt(at, absl::StrCat("unknown escape '\\", Show(c), "'"));
  }

  absl::StatusOr<uint32_t> HexDigits(size_t at, int count) {
    uint32_t value = 0;
    for (int i = 0; i < count; ++i) {
      const int h = AtEnd() ? -1 : HexDigit(Peek());
      if (h < 0) {
        return ErrorAt(
            at, absl::StrCat("'\\", count == 2 ? "x" : "u", "' needs ", count, " hex digits"));
      }
      value = value * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    return value;
  }

  // After "\u": \uHHHH (a high surrogate followed by \uHHHH of a low one is one character)
  // or \u{H...}.
  absl::StatusOr<uint32_t> ParseUnicodeEscape(size_t at) {
    if (Peek() == '{') {
      ++pos_;
      uint32_t value = 0;
      size_t digits = 0;
      while (!AtEnd() && HexDigit(Peek()) >= 0) {
        value = value * 16 + static_cast<uint32_t>(HexDigit(Peek()));
        if (value > kMaxCodePoint) return ErrorAt(at, "\\u{...} is above U+10FFFF");
        ++pos_;
        ++digits;
      }
      if (digits == 0 || Peek() != '}') return ErrorAt(at, "'\\u{' needs hex digits and '}'");
      ++pos_;
      if (value >= 0xD800 && value <= 0xDFFF) {
        return ErrorAt(at, "a lone surrogate is not a character");
      }
      return value;
    }
    absl::StatusOr<uint32_t> unit = HexDigits(at, 4);
    if (!unit.ok()) return unit.status();
    if (*unit >= 0xDC00 && *unit <= 0xDFFF) {
      return ErrorAt(at, "a lone surrogate is not a character");
    }
    if (*unit < 0xD800 || *unit > 0xDBFF) return *unit;
    if (Peek() != '\\' || Peek(1) != 'u') {
      return ErrorAt(at, "a high surrogate must be followed by a low one (\\uDC00-\\uDFFF)");
    }
    pos_ += 2;
    absl::StatusOr<uint32_t> low = HexDigits(at, 4);
    if (!low.ok()) return low.status();
    if (*low < 0xDC00 || *low > 0xDFFF) {
      return ErrorAt(at, "a high surrogate must be followed by a low one (\\uDC00-\\uDFFF)");
    }
    return 0x10000 + ((*unit - 0xD800) << 10) + (*low - 0xDC00);
  }

  std::string_view pattern_;
  std::vector<uint32_t> text_;
  size_t pos_ = 0;
  size_t total_ = 0;
};

}  // namespace

bool IsSingle(const Node& n) {
  return n.kind == Node::Kind::kSet && n.set.size() == 1 && n.set[0].lo == n.set[0].hi;
}

Ranges Intersect(const Ranges& a, const Ranges& b) {
  Ranges out;
  for (const CodePointRange& x : a) {
    for (const CodePointRange& y : b) {
      const uint32_t lo = std::max(x.lo, y.lo), hi = std::min(x.hi, y.hi);
      if (lo <= hi) out.push_back({lo, hi});
    }
  }
  return NormalizeRanges(std::move(out));
}

absl::StatusOr<std::vector<TopAlternative>> ParseRegex(std::string_view pattern) {
  return RegexParser(pattern).Parse();
}

}  // namespace tessera::grammar::regex_internal
