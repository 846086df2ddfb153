// Small formatting helpers shared by the CLI's reports.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace tessera::cli {

// "1.5 GiB"; plain bytes below 1 KiB.
inline std::string HumanBytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%d B", n) : absl::StrFormat("%.2f %s", v, units[u]);
}

// The whole file at `path` (a schema, a grammar, a template), or standard input for "-";
// NotFound naming the path and the reason.
inline absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  if (path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The shortest decimal that reads back as the same float32, so 1e-5f prints as 1e-05
// rather than as its double expansion 9.999999747378752e-06.
inline double ShortestFloat32(double d) {
  float f = static_cast<float>(d);
  for (int precision = 6; precision < 9; ++precision) {
    double candidate = std::strtod(absl::StrFormat("%.*g", precision, f).c_str(), nullptr);
    if (static_cast<float>(candidate) == f) return candidate;
  }
  return d;
}

// JSON text of `j`; strings from files (metadata, tensor names, generated text) may hold
// invalid UTF-8, which is replaced by U+FFFD instead of throwing.
template <typename Json>
std::string JsonDump(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tessera::cli
