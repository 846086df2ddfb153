#include "common/tokenizer/utf8.h"

#include "common/util/utf8.h"

namespace tessera::tokenizer {
namespace {

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// The valid range of the second byte of a sequence starting with `first` (RFC 3629 table 3.7
// in the Unicode standard): excludes overlongs, surrogates and code points past U+10FFFF.
void SecondByteRange(uint8_t first, uint8_t* lo, uint8_t* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (first == 0xE0) *lo = 0xA0;
  if (first == 0xED) *hi = 0x9F;
  if (first == 0xF0) *lo = 0x90;
  if (first == 0xF4) *hi = 0x8F;
}

// Expected total length for a valid lead byte, 0 for bytes that can never start a sequence.
size_t LeadLength(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

}  // namespace

void AppendUtf8(uint32_t cp, std::string* out) { AppendUtf8CodePoint(cp, out); }

size_t DecodeUtf8(std::string_view text, uint32_t* code_point) {
  if (text.empty()) return 0;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = LeadLength(s[0]);
  if (n == 0 || n > text.size()) return 0;
  if (n == 1) {
    *code_point = s[0];
    return 1;
  }
  uint8_t lo, hi;
  SecondByteRange(s[0], &lo, &hi);
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (!IsContinuation(s[i])) return 0;
  }
  uint32_t cp = s[0] & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (s[i] & 0x3F);
  *code_point = cp;
  return n;
}

size_t CompleteUtf8Prefix(std::string_view bytes) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t size = bytes.size();
  // A pending sequence is at most 3 bytes long (a 4-byte sequence missing its last byte), so
  // only the last 3 bytes can be held back.
  const size_t first_candidate = size > 3 ? size - 3 : 0;
  for (size_t start = first_candidate; start < size; ++start) {
    const size_t n = LeadLength(s[start]);
    if (n <= 1 || start + n <= size) continue;  // ASCII, invalid, or complete
    // An incomplete sequence: hold it back only if the bytes so far are a valid beginning.
    bool valid = true;
    if (start + 1 < size) {
      uint8_t lo, hi;
      SecondByteRange(s[start], &lo, &hi);
      valid = s[start + 1] >= lo && s[start + 1] <= hi;
      for (size_t i = start + 2; valid && i < size; ++i) valid = IsContinuation(s[i]);
    }
    if (valid) return start;
  }
  return size;
}

}  // namespace tessera::tokenizer
