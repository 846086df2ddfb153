// The text of one request's generated tokens, as the API returns it: incremental
// detokenization that never splits a UTF-8 character, invalid bytes replaced with U+FFFD,
// special (control) tokens rendered as nothing, and stop strings matched across token
// boundaries with the text that may begin one held back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/tokenizer/streaming_detokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "controller/serving/stop_matcher.h"
#include "controller/serving/utf8_sanitizer.h"

namespace tessera::serving {

class OutputText {
 public:
  // `tokenizer` must outlive this object.
  OutputText(const tokenizer::Tokenizer* tokenizer, std::vector<std::string> stops);

  // Appends to `out` the text that became final with `token`. Returns true when a stop
  // string completed: `out` then ends right before it and the text is done. A token outside
  // the vocabulary adds no text (the model's head may be wider than its vocabulary).
  bool Append(int32_t token, std::string* out);
  // Generation ended for another reason: appends everything held back (an unfinished
  // character as U+FFFD, text that only looked like the start of a stop string).
  void Finish(std::string* out);
  // Whether Append can return true (the request has stop strings). When it cannot, the
  // text decides nothing about the generation and may be produced later.
  bool can_stop() const { return !stops_.empty(); }

 private:
  tokenizer::StreamingDetokenizer detokenizer_;
  Utf8Sanitizer utf8_;
  StopMatcher stops_;
};

}  // namespace tessera::serving
