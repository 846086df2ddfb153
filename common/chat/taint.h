// Provenance of rendered text: which bytes of a string came from request data (see TaintSpans
// in common/chat/value.h). The rules every string operation follows:
//   - concatenation, joining, formatting a string argument and emitting output shift the
//     spans of each piece to where the piece lands (TrackedText);
//   - an operation whose result is a piece of one input (strip, slicing, split...) keeps the
//     spans inside that piece, moved to its start (Substring);
//   - any other operation that builds a string from a tainted input taints the whole result
//     (StrValue, WholeIf): the text is still the request's, only no longer byte for byte.
// Untainted values carry a null pointer, so a render without request data pays one pointer
// test per string operation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/chat/value.h"

namespace tessera::chat {

// A string being assembled from pieces, with the request-data spans of what it holds so far.
class TrackedText {
 public:
  size_t size() const { return text_.size(); }
  const std::string& text() const { return text_; }
  const TaintSpans& spans() const { return spans_; }
  void Reserve(size_t n) { text_.reserve(n); }

  // Template text: untainted.
  void Append(std::string_view s) { text_.append(s); }
  // Text that came from request data as a whole.
  void AppendTainted(std::string_view s);
  // `s` tainted as a whole when `tainted`.
  void Append(std::string_view s, bool tainted) {
    if (tainted) {
      AppendTainted(s);
    } else {
      text_.append(s);
    }
  }
  // A string value with its spans. `s` must be a string.
  void Append(const Value& s) {
    if (s.taint() == nullptr) {
      text_.append(s.as_string());
    } else {
      AppendPart(s, 0, s.as_string().size());
    }
  }
  // Bytes [begin, end) of string value `s` with their spans; begin <= end <= size.
  void AppendPart(const Value& s, size_t begin, size_t end);
  // Another tracked text.
  void Append(const TrackedText& other);
  // Python str(v): a string with its spans, any other value as StrValue(v) says.
  void AppendStr(const Value& v) {
    if (v.is_string()) {
      Append(v);
    } else {
      AppendNonString(v);
    }
  }

  // The text as a string value (null taint when nothing is tainted). Leaves this empty.
  Value TakeValue();
  std::string TakeText() { return std::move(text_); }
  TaintSpans TakeSpans() { return std::move(spans_); }

 private:
  // Marks [begin, end) of text_ as request data; begin >= the end of the last span.
  void AddSpan(size_t begin, size_t end);
  void AppendNonString(const Value& v);

  std::string text_;
  TaintSpans spans_;
};

// Bytes [begin, end) of string value `s`, keeping the spans inside them.
Value Substring(const Value& s, size_t begin, size_t end);
// `text`, computed from bytes [begin, end) of string value `src`: when it is those very bytes
// it keeps their spans, otherwise it is tainted as a whole if any of them is.
Value PieceOf(const Value& src, size_t begin, size_t end, std::string text);
// Code points `indices` of string value `s`, whose code points are `cps` (DecodeUtf8), in
// that order: Python's s[i], slices and reversed(). Each keeps the taint of its bytes.
Value PickCodePoints(const Value& s, const std::u32string& cps,
                     const std::vector<int64_t>& indices);
// str.replace on string values, with PyReplace's text: the bytes kept from `s` keep their
// spans; each inserted copy of `new_sub` keeps its own, and is tainted as a whole where the
// text it replaces was (for an empty `old_sub`: the code point it precedes, or at the end the
// last one).
Value ReplaceValue(const Value& s, const std::string& old_sub, const Value& new_sub, int64_t count);
// `a` followed by `b` (both strings). Consumes `a`, so that `a + b + c` appends in place.
Value ConcatTainted(Value&& a, const Value& b);
inline Value Concat(Value&& a, const Value& b) {
  if (a.taint() != nullptr || b.taint() != nullptr) return ConcatTainted(std::move(a), b);
  std::string out = a.TakeString();
  out += b.as_string();
  return Value(std::move(out));
}
// A string value of `text`, tainted as a whole when `tainted` (and `text` is non-empty).
Value WholeIf(std::string text, bool tainted);
// Whether any byte of [begin, end) of string value `s` is tainted.
bool Overlaps(const Value& s, size_t begin, size_t end);
// Whether `v` holds request data: a tainted string, or a list, dict or namespace with one
// inside (dict keys included).
bool ContainsTaint(const Value& v);
// Python str(v) as a value: a string as it is; any other value's text, tainted as a whole
// when the value holds request data.
Value StrValue(const Value& v);
// Python repr(v) as a value, tainted as a whole when `v` holds request data.
Value ReprValue(const Value& v);

}  // namespace tessera::chat
