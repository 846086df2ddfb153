// Makes arbitrary bytes valid UTF-8, for text the model produced: a model may emit any byte
// sequence (byte tokens, a character cut between two tokens that never gets finished, a
// random-weight model's noise), and the API must answer with text, never an error.
//
// Replacement follows the Unicode Standard's "maximal subpart" practice (chapter 3, U+FFFD
// substitution; also WHATWG's decoder): each maximal prefix of a well-formed sequence that
// is cut short, and each byte that cannot start one, becomes one U+FFFD.
#pragma once

#include <string>
#include <string_view>

namespace tessera::serving {

inline constexpr char kReplacementCharacter[] = "\xEF\xBF\xBD";  // U+FFFD

// Streaming form: bytes arrive in pieces; a well-formed sequence still waiting for its
// remaining bytes is held back until they come (or Finish).
class Utf8Sanitizer {
 public:
  // Appends to `out` the valid UTF-8 that `bytes` completes.
  void Append(std::string_view bytes, std::string* out);
  // Appends what is held back (an incomplete sequence: one U+FFFD) and resets.
  void Finish(std::string* out);
  bool has_pending() const { return !pending_.empty(); }

 private:
  std::string pending_;
};

// One-shot form: `bytes` as valid UTF-8.
std::string SanitizeUtf8(std::string_view bytes);

}  // namespace tessera::serving
