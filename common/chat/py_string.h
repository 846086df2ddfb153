// Python str semantics over UTF-8 bytes: templates index, slice, strip and split strings by
// code point, and Python's notion of whitespace is Unicode's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::chat {

// Widths (padding, centering, indentation, format widths) above this are refused: a template
// must not be able to make the server allocate gigabytes with one number.
constexpr int64_t kMaxPadWidth = int64_t{1} << 24;

// Throws TemplateError when `width` is above kMaxPadWidth.
void CheckWidth(int64_t width);

// A run of decimal digits as an integer; TemplateError naming `what` when it is empty, has
// another character, or does not fit in int64.
int64_t ParseDecimal(std::string_view digits, const char* what);

// Code points of `s`. A byte that does not start a valid UTF-8 sequence becomes U+DC80+byte
// (Python's surrogateescape), so EncodeUtf8(DecodeUtf8(s)) == s for any bytes.
std::u32string DecodeUtf8(std::string_view s);
void AppendUtf8(char32_t cp, std::string* out);
std::string EncodeUtf8(std::u32string_view cps);
size_t CodePointCount(std::string_view s);
// Byte offset of each code point DecodeUtf8(s) yields, then s.size(): code point i is bytes
// [offsets[i], offsets[i + 1]).
std::vector<size_t> CodePointOffsets(std::string_view s);

// str.isspace() for one code point.
bool IsPySpace(char32_t cp);

// A piece of a string as the byte range [first, second) it came from.
using ByteRange = std::pair<size_t, size_t>;

// str.strip/lstrip/rstrip; `chars` = nullopt strips whitespace.
std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left,
                    bool right);
// The bytes of `s` that PyStrip keeps.
ByteRange PyStripBounds(std::string_view s, const std::optional<std::string>& chars, bool left,
                        bool right);
// str.split / str.rsplit; `sep` = nullopt splits on whitespace runs. maxsplit < 0: no limit.
std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep,
                                 int64_t maxsplit, bool from_right);
// Where each piece of PySplit comes from in `s`, in order. A piece is those very bytes, except
// that a whitespace split re-encodes them from code points (as DecodeUtf8/EncodeUtf8 do).
std::vector<ByteRange> PySplitBounds(std::string_view s, const std::optional<std::string>& sep,
                                     int64_t maxsplit, bool from_right);
// str.splitlines() (without keepends).
std::vector<std::string> PySplitLines(std::string_view s);
// Where each line of PySplitLines comes from in `s` (the lines are re-encoded from code
// points, as for a whitespace split).
std::vector<ByteRange> PySplitLinesBounds(std::string_view s);
// str.replace; count < 0 replaces all.
std::string PyReplace(std::string_view s, std::string_view old_sub, std::string_view new_sub,
                      int64_t count);
// str.find/rfind in code points, -1 when absent.
int64_t PyFind(std::string_view s, std::string_view sub, bool from_right);
int64_t PyCount(std::string_view s, std::string_view sub);

std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
// str.title(): a cased letter after an uncased character starts a word.
std::string PyTitle(std::string_view s);
// str.capitalize(): first character upper, the rest lower.
std::string PyCapitalize(std::string_view s);
bool IsPyUpperCp(char32_t cp);
bool IsPyLowerCp(char32_t cp);
char32_t ToUpperCp(char32_t cp);
char32_t ToLowerCp(char32_t cp);
bool IsAlphaCp(char32_t cp);
bool IsDigitCp(char32_t cp);

// Python's slice of a sequence of length `n` (negative indices, negative steps): the indices
// selected, in order. Throws TemplateError for a zero step.
std::vector<int64_t> SliceIndices(int64_t n, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, std::optional<int64_t> step);

}  // namespace tessera::chat
