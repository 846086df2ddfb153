// Locating the shared conformance data (../shared beside the checkout) from tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace tessera::testing {

// The shared data directory: $TESSERA_SHARED_DIR (set by ctest), else ../shared relative to
// the source tree. nullopt when it does not exist.
inline std::optional<std::filesystem::path> SharedDir() {
  const char* env = std::getenv("TESSERA_SHARED_DIR");
  std::filesystem::path p = env ? env : "";
  if (p.empty()) {
    const char* src = std::getenv("TESSERA_SOURCE_DIR");
    if (src == nullptr) return std::nullopt;
    p = std::filesystem::path(src) / ".." / "shared";
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(p, ec)) return std::nullopt;
  return std::filesystem::canonical(p, ec);
}

// A path under the shared conformance folder, or nullopt when it is absent.
inline std::optional<std::filesystem::path> ConformancePath(const std::string& relative) {
  auto dir = SharedDir();
  if (!dir) return std::nullopt;
  std::filesystem::path p = *dir / "conformance" / relative;
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return std::nullopt;
  return p;
}

}  // namespace tessera::testing

// Skips the current test with a clear message when the shared conformance data is absent.
#define TESSERA_REQUIRE_CONFORMANCE(var, relative)                                      \
  auto var##_opt = ::tessera::testing::ConformancePath(relative);                       \
  if (!var##_opt) {                                                                     \
    GTEST_SKIP() << "shared conformance data not found (" << (relative)                 \
                 << "): set TESSERA_SHARED_DIR or place ../shared beside the checkout"; \
  }                                                                                     \
  const std::filesystem::path var = *var##_opt
