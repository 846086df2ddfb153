#include "common/tokenizer/byte_level.h"

#include <array>

#include "common/tokenizer/utf8.h"

namespace tessera::tokenizer {
namespace {

struct ByteTables {
  std::array<std::string, 256> byte_to_char;
  std::array<int16_t, 0x144> char_to_byte;  // code points 0..0x143; -1 where unused

  ByteTables() {
    char_to_byte.fill(-1);
    // Printable Latin-1 bytes keep their code point; the other 68, in increasing order, take
    // U+0100 onwards.
    uint32_t next = 0x100;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable =
          (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? b : next++;
      AppendUtf8(cp, &byte_to_char[b]);
      char_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables* tables = new ByteTables();
  return *tables;
}

}  // namespace

const std::string& ByteToChar(uint8_t b) { return Tables().byte_to_char[b]; }

void AppendByteLevel(std::string_view bytes, std::string* out) {
  const ByteTables& t = Tables();
  for (char c : bytes) out->append(t.byte_to_char[static_cast<uint8_t>(c)]);
}

std::string DecodeByteLevel(std::string_view text) {
  const ByteTables& t = Tables();
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp = 0;
    size_t n = DecodeUtf8(text.substr(i), &cp);
    if (n == 0) {  // not valid UTF-8: keep the byte as it is
      out.push_back(text[i]);
      ++i;
      continue;
    }
    if (cp < t.char_to_byte.size() && t.char_to_byte[cp] >= 0) {
      out.push_back(static_cast<char>(t.char_to_byte[cp]));
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

}  // namespace tessera::tokenizer
