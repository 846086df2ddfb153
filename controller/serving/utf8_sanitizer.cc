#include "controller/serving/utf8_sanitizer.h"

#include <cstdint>

namespace tessera::serving {
namespace {

struct Lead {
  int length = 0;  // 0: the byte cannot start a sequence
  uint8_t second_lo = 0x80, second_hi = 0xBF;
};

// Table 3-7 of the Unicode Standard ("Well-Formed UTF-8 Byte Sequences"): the ranges of the
// second byte exclude overlong forms, surrogates and code points above U+10FFFF.
Lead LeadOf(uint8_t b) {
  if (b < 0x80) return {1};
  if (b >= 0xC2 && b <= 0xDF) return {2};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0};
}

// Converts the longest decidable prefix of `in` and returns how many bytes it consumed;
// the rest (a well-formed but unfinished sequence at the end) is left, unless `final`.
size_t Convert(std::string_view in, bool final, std::string* out) {
  size_t i = 0;
  while (i < in.size()) {
    const uint8_t b0 = static_cast<uint8_t>(in[i]);
    const Lead lead = LeadOf(b0);
    if (lead.length == 1) {
      out->push_back(static_cast<char>(b0));
      ++i;
      continue;
    }
    if (lead.length == 0) {
      out->append(kReplacementCharacter);
      ++i;
      continue;
    }
    int k = 1;
    for (; k < lead.length; ++k) {
      if (i + k >= in.size()) break;
      const uint8_t b = static_cast<uint8_t>(in[i + k]);
      const uint8_t lo = k == 1 ? lead.second_lo : 0x80;
      const uint8_t hi = k == 1 ? lead.second_hi : 0xBF;
      if (b < lo || b > hi) break;
    }
    if (k == lead.length) {
      out->append(in.substr(i, k));
    } else if (i + k >= in.size() && !final) {
      return i;  // well-formed so far: wait for the rest
    } else {
      out->append(kReplacementCharacter);  // the maximal subpart [i, i + k)
    }
    i += k;
  }
  return i;
}

}  // namespace

void Utf8Sanitizer::Append(std::string_view bytes, std::string* out) {
  if (pending_.empty()) {
    const size_t used = Convert(bytes, /*final=*/false, out);
    pending_.assign(bytes.substr(used));
    return;
  }
  pending_.append(bytes);
  const size_t used = Convert(pending_, /*final=*/false, out);
  pending_.erase(0, used);
}

void Utf8Sanitizer::Finish(std::string* out) {
  Convert(pending_, /*final=*/true, out);
  pending_.clear();
}

std::string SanitizeUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  Convert(bytes, /*final=*/true, &out);
  return out;
}

}  // namespace tessera::serving
