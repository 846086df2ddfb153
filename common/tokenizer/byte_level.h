// GPT-2's byte-level alphabet (spec section 14.2): every byte maps to one printable code
// point, so byte-level BPE vocabularies store arbitrary bytes as ordinary text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::tokenizer {

// The UTF-8 text of the code point byte `b` maps to ("Ġ" for 0x20, "Ċ" for 0x0A).
const std::string& ByteToChar(uint8_t b);

// Appends the byte-level form of `bytes` (each byte replaced by its code point's UTF-8).
void AppendByteLevel(std::string_view bytes, std::string* out);

// Decodes a byte-level token text back to raw bytes. A code point outside the alphabet (an
// added token stored verbatim) is copied through unchanged as its UTF-8.
std::string DecodeByteLevel(std::string_view text);

}  // namespace tessera::tokenizer
