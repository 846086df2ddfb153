#include "controller/grpc/utf8_text.h"

#include <cstdint>

namespace tessera::grpc_api {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length of the well-formed sequence at s[i], or 0 with *consumed set to the length of the
// maximal subpart to replace. Ranges from the Unicode Standard, table 3-7.
size_t WellFormedLength(std::string_view s, size_t i, size_t* consumed) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    *consumed = 1;
    return 0;
  }
  size_t k = 1;
  for (; k <= need; ++k) {
    if (i + k >= s.size()) break;
    const uint8_t b = byte(i + k);
    const uint8_t min = k == 1 ? lo : 0x80;
    const uint8_t max = k == 1 ? hi : 0xBF;
    if (b < min || b > max) break;
  }
  if (k == need + 1) return need + 1;
  *consumed = k;
  return 0;
}

}  // namespace

std::string ToValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    size_t consumed = 0;
    const size_t n = WellFormedLength(bytes, i, &consumed);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out.append(kReplacement);
      i += consumed;
    }
  }
  return out;
}

std::optional<size_t> FirstInvalidUtf8Byte(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    size_t consumed = 0;
    const size_t n = WellFormedLength(bytes, i, &consumed);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

}  // namespace tessera::grpc_api
