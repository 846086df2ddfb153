// Stop strings matched on streamed text, across the boundaries of the pieces it arrives in.
// Text that could be the beginning of a stop string is held back until the next piece
// decides it; the stop string itself, and anything after it, is never released (OpenAI's
// behaviour: the output ends right before the stop sequence).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::serving {

class StopMatcher {
 public:
  // Empty strings in `stops` are ignored.
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends to `out` the text that can no longer be part of a stop string. Returns true when
  // a stop string is complete: `out` then ends right before it, and the matcher is done
  // (later calls append nothing).
  bool Append(std::string_view text, std::string* out);
  // End of the stream: appends what is held back.
  void Flush(std::string* out);

  bool stopped() const { return stopped_; }
  // No stop strings: Append never returns true.
  bool empty() const { return stops_.empty(); }
  // The stop string that matched (empty until then).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace tessera::serving
