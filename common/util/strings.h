// Bridges between std::string_view and Debian 12's Abseil, which is built with its own
// absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW = 0) and so accepts no std::string_view.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace tessera {

inline absl::string_view ToAbsl(std::string_view s) { return {s.data(), s.size()}; }
inline std::string_view ToStd(absl::string_view s) { return {s.data(), s.size()}; }

}  // namespace tessera
