#include "common/grammar/gbnf_writer.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::grammar {

namespace {

constexpr size_t kMaxNameLength = 40;

void AppendClassChar(uint32_t cp, std::string& out) {
  if (cp == '\\' || cp == ']' || cp == '[' || cp == '-' || cp == '^' || cp == '"') {
    out += '\\';
    out += static_cast<char>(cp);
  } else if (cp >= 0x20 && cp < 0x7F) {
    out += static_cast<char>(cp);
  } else if (cp < 0x80) {
    absl::StrAppendFormat(&out, "\\x%02X", cp);
  } else if (cp <= 0xFFFF) {
    absl::StrAppendFormat(&out, "\\u%04X", cp);
  } else {
    absl::StrAppendFormat(&out, "\\U%08X", cp);
  }
}

}  // namespace

std::string GbnfLiteral(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        // \xHH is a code point in GBNF, so only ASCII controls are written that way; bytes of
        // multi-byte characters stay raw.
        if (b < 0x20 || b == 0x7F) {
          absl::StrAppendFormat(&out, "\\x%02X", b);
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string GbnfClass(const std::vector<CodePointRange>& ranges) {
  std::string out = "[";
  for (const CodePointRange& r : ranges) {
    AppendClassChar(r.lo, out);
    if (r.hi == r.lo) continue;
    if (r.hi > r.lo + 1) out += '-';
    AppendClassChar(r.hi, out);
  }
  out += ']';
  return out;
}

std::string GbnfRules::Reserve(std::string_view hint) {
  std::string base;
  for (char c : hint) {
    if (base.size() >= kMaxNameLength) break;
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    base += keep ? c : '-';
  }
  if (base.empty()) base = "rule";
  std::string name = base;
  if (index_.contains(name)) {
    // Suffixes go on from the last one given to this base, so that many rules with one hint
    // cost linear time.
    size_t& next = next_suffix_[base];
    next = std::max<size_t>(next, 2);
    do {
      name = absl::StrCat(base, "-", next++);
    } while (index_.contains(name));
  }
  index_[name] = rules_.size();
  rules_.push_back({name, ""});
  AddCost(1);
  return name;
}

void GbnfRules::Define(const std::string& name, std::string body) {
  auto it = index_.find(name);
  if (it != index_.end()) rules_[it->second].body = std::move(body);
}

std::string GbnfRules::Helper(std::string_view hint, std::string body) {
  auto it = helper_by_body_.find(body);
  if (it != helper_by_body_.end()) return it->second;
  std::string name = Reserve(hint);
  helper_by_body_[body] = name;
  Define(name, std::move(body));
  return name;
}

std::string GbnfRules::Text() const {
  std::string out;
  for (const Rule& r : rules_) {
    absl::StrAppend(&out, r.name, " ::= ", r.body.empty() ? "\"\"" : r.body, "\n");
  }
  return out;
}

}  // namespace tessera::grammar
