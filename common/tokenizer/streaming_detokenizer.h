// Streaming detokenization for generated text: bytes of a character split across tokens are
// held back until the character is complete.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "common/tokenizer/tokenizer.h"

namespace tessera::tokenizer {

// Streaming detokenization: feed generated tokens one at a time and get text that never ends
// inside a UTF-8 character. The concatenation of everything emitted (Finish included) equals
// Tokenizer::Decode of the same ids with the same options (clean_spaces aside).
class StreamingDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  explicit StreamingDetokenizer(const Tokenizer* tokenizer, DecodeOptions options = {});

  // Appends to `out` the text that became complete with `id`; bytes of an unfinished
  // character are held back. InvalidArgument (nothing appended) for an id outside the
  // vocabulary.
  absl::Status Feed(TokenId id, std::string* out);
  // Appends whatever is held back (an incomplete trailing sequence, as its raw bytes) and
  // resets the stream.
  void Finish(std::string* out);
  // Bytes currently held back.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  bool strip_next_ = false;
  std::string pending_;
};

}  // namespace tessera::tokenizer
