#include "controller/config/units.h"

#include <cctype>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera::config {
namespace {

struct Unit {
  const char* name;
  uint64_t factor;
};

constexpr uint64_t kKi = 1024;
// Longest names first is not needed: the whole suffix is compared.
constexpr Unit kUnits[] = {
    {"", 1},
    {"b", 1},
    {"k", 1000},
    {"kb", 1000},
    {"kib", kKi},
    {"m", 1000 * 1000},
    {"mb", 1000 * 1000},
    {"mib", kKi* kKi},
    {"g", 1000 * 1000 * 1000},
    {"gb", 1000 * 1000 * 1000},
    {"gib", kKi* kKi* kKi},
    {"t", 1000ull * 1000 * 1000 * 1000},
    {"tb", 1000ull * 1000 * 1000 * 1000},
    {"tib", kKi* kKi* kKi* kKi},
};

absl::Status SizeError(const std::string& text) {
  return absl::InvalidArgumentError(
      absl::StrCat("expected a size such as 8MiB, 512M, 1GB or 4096 (bytes), got '", text, "'"));
}

}  // namespace

absl::StatusOr<uint64_t> ParseSize(const std::string& text) {
  std::string t(absl::StripAsciiWhitespace(text));
  size_t end = 0;
  while (end < t.size() && (std::isdigit(static_cast<unsigned char>(t[end])) || t[end] == '.')) {
    ++end;
  }
  if (end == 0) return SizeError(text);
  std::string number = t.substr(0, end);
  std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(t.substr(end)));
  const Unit* found = nullptr;
  for (const Unit& u : kUnits) {
    if (unit == u.name) found = &u;
  }
  if (found == nullptr) return SizeError(text);
  uint64_t whole = 0;
  if (number.find('.') == std::string::npos) {
    if (!absl::SimpleAtoi(number, &whole)) return SizeError(text);
    if (whole != 0 && found->factor > UINT64_MAX / whole) {
      return absl::InvalidArgumentError(absl::StrCat("size '", text, "' is too large"));
    }
    return whole * found->factor;
  }
  double d = 0;
  if (!absl::SimpleAtod(number, &d)) return SizeError(text);
  double bytes = d * static_cast<double>(found->factor);
  if (!(bytes < 1.8e19))
    return absl::InvalidArgumentError(absl::StrCat("size '", text, "' is too large"));
  if (bytes != std::floor(bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("size '", text, "' is not a whole number of bytes"));
  }
  return static_cast<uint64_t>(bytes);
}

std::string FormatSize(uint64_t bytes) {
  if (bytes == 0) return "0";
  static constexpr Unit kShown[] = {{"TiB", kKi * kKi * kKi * kKi},
                                    {"TB", 1000ull * 1000 * 1000 * 1000},
                                    {"GiB", kKi * kKi * kKi},
                                    {"GB", 1000 * 1000 * 1000},
                                    {"MiB", kKi * kKi},
                                    {"MB", 1000 * 1000},
                                    {"KiB", kKi},
                                    {"KB", 1000}};
  for (const Unit& u : kShown) {
    if (bytes % u.factor == 0) return absl::StrCat(bytes / u.factor, u.name);
  }
  return absl::StrCat(bytes);
}

absl::StatusOr<absl::Duration> ParseDurationText(const std::string& text) {
  std::string t(absl::StripAsciiWhitespace(text));
  absl::Duration d;
  if (t == "inf" || t == "-inf" || !absl::ParseDuration(t, &d)) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a duration with a unit such as 30s, 500ms or 2m, got '", text, "'"));
  }
  if (d < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("duration '", text, "' is negative"));
  }
  return d;
}

std::string FormatDurationText(absl::Duration d) {
  if (d == absl::ZeroDuration()) return "0s";
  return absl::FormatDuration(d);
}

absl::StatusOr<bool> ParseBoolText(const std::string& text) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (t == "true" || t == "yes" || t == "on" || t == "1") return true;
  if (t == "false" || t == "no" || t == "off" || t == "0") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("expected a boolean (true or false), got '", text, "'"));
}

}  // namespace tessera::config
