#include "common/chat/py_string.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>

#include "common/chat/template_error.h"
#include "common/util/utf8.h"

namespace tessera::chat {
namespace {

// Unicode case tables come from glibc's C.UTF-8 locale, used through the *_l functions so
// that the process locale is never touched. Without it only ASCII letters change case.
locale_t Utf8Locale() {
  static const locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  return loc;
}

bool InSet(char32_t cp, std::u32string_view set) {
  return set.find(cp) != std::u32string_view::npos;
}

}  // namespace

void CheckWidth(int64_t width) {
  if (width > kMaxPadWidth) {
    throw TemplateError("MemoryError: width " + std::to_string(width) + " is too large");
  }
}

int64_t ParseDecimal(std::string_view digits, const char* what) {
  if (digits.empty()) throw TemplateError(std::string("ValueError: empty ") + what);
  int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') throw TemplateError(std::string("ValueError: invalid ") + what);
    if (v > (INT64_MAX - (c - '0')) / 10) {
      throw TemplateError(std::string("OverflowError: ") + what + " too large");
    }
    v = v * 10 + (c - '0');
  }
  return v;
}

namespace {

// The code point starting at s[i] (i < s.size()) and its length in bytes; a byte that does
// not start a valid sequence is U+DC80+byte, one byte long.
char32_t DecodeAt(std::string_view s, size_t i, size_t* length) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  bool ok = len > 0 && i + len <= s.size();
  for (int k = 1; ok && k < len; ++k) {
    unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) ok = false;
    cp = (cp << 6) | (cc & 0x3F);
  }
  if (!ok) {
    *length = 1;
    return 0xDC00 + c;
  }
  *length = static_cast<size_t>(len);
  return cp;
}

}  // namespace

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t len = 0;
  for (size_t i = 0; i < s.size(); i += len) out.push_back(DecodeAt(s, i, &len));
  return out;
}

std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  size_t len = 0;
  for (size_t i = 0; i < s.size(); i += len) {
    offsets.push_back(i);
    DecodeAt(s, i, &len);
  }
  offsets.push_back(s.size());
  return offsets;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp >= 0xDC80 && cp <= 0xDCFF) {  // surrogateescape: the original byte
    out->push_back(static_cast<char>(cp - 0xDC00));
  } else {
    AppendUtf8CodePoint(cp, out);
  }
}

std::string EncodeUtf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) AppendUtf8(cp, &out);
  return out;
}

size_t CodePointCount(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool IsPySpace(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

namespace {

// Length of the UTF-8 sequence starting with byte `c` (1 for a stray byte).
size_t SequenceLength(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}

}  // namespace

std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left,
                    bool right) {
  const auto [b, e] = PyStripBounds(s, chars, left, right);
  return std::string(s.substr(b, e - b));
}

ByteRange PyStripBounds(std::string_view s, const std::optional<std::string>& chars, bool left,
                        bool right) {
  // Only the code points at the two ends are decoded: strip() is called on whole messages.
  std::u32string set = chars ? DecodeUtf8(*chars) : std::u32string();
  auto strip = [&](std::string_view piece) {
    std::u32string cp = DecodeUtf8(piece);
    if (cp.size() != 1) return false;
    return chars ? InSet(cp[0], set) : IsPySpace(cp[0]);
  };
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      size_t len = std::min(SequenceLength(static_cast<unsigned char>(s[b])), e - b);
      if (!strip(s.substr(b, len))) break;
      b += len;
    }
  }
  if (right) {
    while (e > b) {
      size_t start = e - 1;
      while (start > b && e - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
        --start;
      if (SequenceLength(static_cast<unsigned char>(s[start])) != e - start) start = e - 1;
      if (!strip(s.substr(start, e - start))) break;
      e = start;
    }
  }
  return {b, e};
}

std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep,
                                 int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  for (const auto& [b, e] : PySplitBounds(s, sep, maxsplit, from_right)) {
    // A whitespace split works on code points, so its pieces are re-encoded from them (which
    // differs from the bytes only for malformed UTF-8).
    parts.push_back(sep ? std::string(s.substr(b, e - b))
                        : EncodeUtf8(DecodeUtf8(s.substr(b, e - b))));
  }
  return parts;
}

std::vector<ByteRange> PySplitBounds(std::string_view s, const std::optional<std::string>& sep,
                                     int64_t maxsplit, bool from_right) {
  std::vector<ByteRange> parts;
  auto limit_reached = [&] {
    return maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit;
  };
  if (sep) {
    if (sep->empty()) throw TemplateError("ValueError: empty separator");
    if (!from_right) {
      size_t pos = 0;
      while (!limit_reached()) {
        size_t f = s.find(*sep, pos);
        if (f == std::string_view::npos) break;
        parts.emplace_back(pos, f);
        pos = f + sep->size();
      }
      parts.emplace_back(pos, s.size());
    } else {
      size_t end = s.size();
      while (!limit_reached()) {
        if (end < sep->size()) break;
        size_t f = s.rfind(*sep, end - sep->size());
        if (f == std::string_view::npos) break;
        parts.emplace_back(f + sep->size(), end);
        end = f;
      }
      parts.emplace_back(0, end);
      std::reverse(parts.begin(), parts.end());
    }
    return parts;
  }
  // Whitespace split: runs of whitespace separate, leading/trailing whitespace is dropped,
  // and the unsplit remainder keeps the whitespace on its far side.
  const std::u32string cps = DecodeUtf8(s);
  const std::vector<size_t> at = CodePointOffsets(s);
  const size_t n = cps.size();
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < n && IsPySpace(cps[i])) ++i;
      if (i >= n) break;
      if (limit_reached()) {
        parts.emplace_back(at[i], s.size());
        break;
      }
      size_t b = i;
      while (i < n && !IsPySpace(cps[i])) ++i;
      parts.emplace_back(at[b], at[i]);
    }
    return parts;
  }
  size_t j = n;  // pieces end before code point j
  while (true) {
    while (j > 0 && IsPySpace(cps[j - 1])) --j;
    if (j == 0) break;
    if (limit_reached()) {
      parts.emplace_back(0, at[j]);
      break;
    }
    size_t e = j;
    while (j > 0 && !IsPySpace(cps[j - 1])) --j;
    parts.emplace_back(at[j], at[e]);
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> PySplitLines(std::string_view s) {
  std::vector<std::string> lines;
  for (const auto& [b, e] : PySplitLinesBounds(s)) {
    lines.push_back(EncodeUtf8(DecodeUtf8(s.substr(b, e - b))));
  }
  return lines;
}

std::vector<ByteRange> PySplitLinesBounds(std::string_view s) {
  std::vector<ByteRange> lines;
  const std::u32string cps = DecodeUtf8(s);
  const std::vector<size_t> at = CodePointOffsets(s);
  size_t b = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t c = cps[i];
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
               c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    lines.emplace_back(at[b], at[i]);
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    b = i + 1;
  }
  if (b < cps.size()) lines.emplace_back(at[b], s.size());
  return lines;
}

std::string PyReplace(std::string_view s, std::string_view old_sub, std::string_view new_sub,
                      int64_t count) {
  std::string out;
  if (old_sub.empty()) {
    // Python inserts `new` before every code point and at the end.
    std::u32string cps = DecodeUtf8(s);
    int64_t done = 0;
    for (char32_t cp : cps) {
      if (count < 0 || done < count) {
        out.append(new_sub);
        ++done;
      }
      AppendUtf8(cp, &out);
    }
    if (count < 0 || done < count) out.append(new_sub);
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t f = s.find(old_sub, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(new_sub);
    pos = f + old_sub.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t PyFind(std::string_view s, std::string_view sub, bool from_right) {
  size_t f = from_right ? s.rfind(sub) : s.find(sub);
  if (f == std::string_view::npos) return -1;
  return static_cast<int64_t>(CodePointCount(s.substr(0, f)));
}

int64_t PyCount(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(CodePointCount(s)) + 1;
  int64_t n = 0;
  for (size_t f = s.find(sub); f != std::string_view::npos; f = s.find(sub, f + sub.size())) ++n;
  return n;
}

char32_t ToUpperCp(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  locale_t loc = Utf8Locale();
  return loc ? static_cast<char32_t>(towupper_l(static_cast<wint_t>(cp), loc)) : cp;
}

char32_t ToLowerCp(char32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  locale_t loc = Utf8Locale();
  return loc ? static_cast<char32_t>(towlower_l(static_cast<wint_t>(cp), loc)) : cp;
}

bool IsPyUpperCp(char32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z';
  locale_t loc = Utf8Locale();
  return loc && iswupper_l(static_cast<wint_t>(cp), loc);
}

bool IsPyLowerCp(char32_t cp) {
  if (cp < 0x80) return cp >= 'a' && cp <= 'z';
  locale_t loc = Utf8Locale();
  return loc && iswlower_l(static_cast<wint_t>(cp), loc);
}

bool IsAlphaCp(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  locale_t loc = Utf8Locale();
  return loc && iswalpha_l(static_cast<wint_t>(cp), loc);
}

bool IsDigitCp(char32_t cp) { return cp >= '0' && cp <= '9'; }

std::string PyUpper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : DecodeUtf8(s)) {
    if (cp == 0xDF) {  // ß: Python applies the full (one-to-two) case mapping
      out += "SS";
      continue;
    }
    AppendUtf8(ToUpperCp(cp), &out);
  }
  return out;
}

std::string PyLower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : DecodeUtf8(s)) AppendUtf8(ToLowerCp(cp), &out);
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t cp : DecodeUtf8(s)) {
    bool cased = IsPyUpperCp(cp) || IsPyLowerCp(cp);
    AppendUtf8(prev_cased ? ToLowerCp(cp) : ToUpperCp(cp), &out);
    prev_cased = cased;
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (char32_t cp : DecodeUtf8(s)) {
    AppendUtf8(first ? ToUpperCp(cp) : ToLowerCp(cp), &out);
    first = false;
  }
  return out;
}

std::vector<int64_t> SliceIndices(int64_t n, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, std::optional<int64_t> step) {
  // Mirrors CPython's PySlice_AdjustIndices.
  int64_t st = step.value_or(1);
  if (st == 0) throw TemplateError("ValueError: slice step cannot be zero");
  int64_t lo, hi;
  if (st > 0) {
    lo = start.value_or(0);
    hi = stop.value_or(n);
    if (lo < 0) lo = std::max<int64_t>(lo + n, 0);
    if (lo > n) lo = n;
    if (hi < 0) hi = std::max<int64_t>(hi + n, 0);
    if (hi > n) hi = n;
  } else {
    lo = start ? *start : n - 1;
    hi = stop ? *stop : -1 - n;  // sentinel: "before index 0"
    if (start) {
      if (lo < 0) lo = std::max<int64_t>(lo + n, -1);
      if (lo >= n) lo = n - 1;
    }
    if (stop) {
      if (hi < 0) hi = std::max<int64_t>(hi + n, -1);
      if (hi >= n) hi = n - 1;
    } else {
      hi = -1;
    }
  }
  std::vector<int64_t> idx;
  for (int64_t i = lo; st > 0 ? i < hi : i > hi;) {
    idx.push_back(i);
    if (__builtin_add_overflow(i, st, &i)) break;  // past the end either way
  }
  return idx;
}

}  // namespace tessera::chat
