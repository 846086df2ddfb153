#include "controller/serving/stop_matcher.h"

#include <algorithm>

namespace tessera::serving {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

bool StopMatcher::Append(std::string_view text, std::string* out) {
  if (stopped_) return true;
  if (stops_.empty()) {
    out->append(text);
    return false;
  }
  held_.append(text);
  // The earliest stop string wins (the text before it is the answer); among stop strings
  // starting at the same place, the shortest.
  size_t first = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t at = held_.find(s);
    if (at == std::string::npos) continue;
    if (at < first || (at == first && s.size() < matched_.size())) {
      first = at;
      matched_ = s;
    }
  }
  if (first != std::string::npos) {
    out->append(held_, 0, first);
    held_.clear();
    stopped_ = true;
    return true;
  }
  // Hold back the longest tail of the text that is a proper prefix of some stop string.
  // A stop string is valid UTF-8, so such a tail always starts on a character boundary.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    const size_t longest = std::min(s.size() - 1, held_.size());
    for (size_t n = longest; n > keep; --n) {
      if (std::string_view(held_).substr(held_.size() - n) == std::string_view(s).substr(0, n)) {
        keep = n;
        break;
      }
    }
  }
  out->append(held_, 0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return false;
}

void StopMatcher::Flush(std::string* out) {
  if (!stopped_) out->append(held_);
  held_.clear();
}

}  // namespace tessera::serving
