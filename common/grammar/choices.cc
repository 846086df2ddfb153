#include "common/grammar/choices.h"

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grammar/gbnf_writer.h"

namespace tessera::grammar {

namespace {

constexpr size_t kMaxChoices = 10000;
constexpr size_t kMaxTotalBytes = size_t{1} << 20;

// RFC 3629: no overlong forms, surrogates or values past U+10FFFF.
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    const int extra = b < 0x80 ? 0 : b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : -1;
    if (extra < 0 || b > 0xF4 || i + static_cast<size_t>(extra) >= s.size()) return false;
    uint32_t cp = extra == 0 ? b : b & (0x3Fu >> extra);
    for (int k = 1; k <= extra; ++k) {
      const auto cont = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
      if ((cont & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cont & 0x3F);
    }
    static constexpr uint32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += static_cast<size_t>(extra) + 1;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> ChoicesToGbnf(absl::Span<const std::string> choices) {
  if (choices.empty()) return absl::InvalidArgumentError("choices: the list is empty");
  if (choices.size() > kMaxChoices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "choices: ", choices.size(), " choices, more than the limit of ", kMaxChoices));
  }
  size_t total = 0;
  absl::flat_hash_set<std::string> seen;
  std::vector<std::string> literals;
  for (size_t i = 0; i < choices.size(); ++i) {
    total += choices[i].size();
    if (total > kMaxTotalBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("choices: more than ", kMaxTotalBytes, " bytes of text in all"));
    }
    if (!IsValidUtf8(choices[i])) {
      return absl::InvalidArgumentError(absl::StrCat("choice ", i, " is not valid UTF-8"));
    }
    if (seen.insert(choices[i]).second) literals.push_back(GbnfLiteral(choices[i]));
  }
  return absl::StrCat("root ::= ", absl::StrJoin(literals, " | "), "\n");
}

}  // namespace tessera::grammar
