// Unicode code-point sets lowered to UTF-8 byte sequences, for character classes.
//
// A class such as [a-zé] or [^"\\] is a set of code points; the byte-level grammar matches
// it with alternatives of byte-range sequences, e.g. U+0080..U+07FF is [C2-DF][80-BF].
// Surrogates (U+D800..U+DFFF) are never part of a set: they have no UTF-8 encoding.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace tessera::grammar {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct CodePointRange {
  uint32_t lo = 0;
  uint32_t hi = 0;  // inclusive
};

// Sorted, merged ranges within [0, kMaxCodePoint] with the surrogates removed. Ranges with
// lo > hi are dropped.
std::vector<CodePointRange> NormalizeRanges(std::vector<CodePointRange> ranges);

// The code points (surrogates excluded) that `ranges` (normalized) does not contain.
std::vector<CodePointRange> ComplementRanges(const std::vector<CodePointRange>& ranges);

// One UTF-8 byte sequence pattern: byte i of the encoding lies in [first, second].
using ByteRangeSequence = std::vector<std::pair<uint8_t, uint8_t>>;

// Byte-range sequences whose union is exactly the UTF-8 encodings of the code points in
// `ranges` (normalized), each code point matched by exactly one sequence.
std::vector<ByteRangeSequence> Utf8Sequences(const std::vector<CodePointRange>& ranges);

// Appends the UTF-8 encoding of `cp` (a scalar value) to `out`.
void AppendUtf8(uint32_t cp, std::vector<uint8_t>& out);

}  // namespace tessera::grammar
