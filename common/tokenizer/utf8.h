// UTF-8 helpers shared by the tokenizers and the streaming detokenizer. None of them throws
// or asserts on bad input: invalid bytes are reported, never trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::tokenizer {

// The length a UTF-8 sequence announces by its first byte, from the byte's high nibble
// (llama.cpp's `unicode_len_utf8`): 1 for ASCII and for stray continuation bytes.
inline size_t Utf8SequenceLength(uint8_t first_byte) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[first_byte >> 4];
}

// Appends the UTF-8 encoding of `code_point` (which must be <= 0x10FFFF).
void AppendUtf8(uint32_t code_point, std::string* out);

// Decodes one well-formed code point at the start of `text` (no overlongs, no surrogates).
// Returns the number of bytes consumed, or 0 when `text` does not start with a complete,
// valid sequence.
size_t DecodeUtf8(std::string_view text, uint32_t* code_point);

// The length of the longest prefix of `bytes` that cannot be the beginning of a valid UTF-8
// sequence still waiting for bytes: everything except a trailing, so far valid, incomplete
// sequence. A streaming decoder may emit that prefix and must hold back the rest.
size_t CompleteUtf8Prefix(std::string_view bytes);

}  // namespace tessera::tokenizer
