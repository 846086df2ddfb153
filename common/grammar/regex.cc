#include "common/grammar/regex.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/grammar/regex_parser.h"
#include "common/util/status_macros.h"

namespace tessera::grammar {

namespace {

using regex_internal::kUnbounded;
using regex_internal::Node;
using regex_internal::Ranges;

// The bytes of one character as it is written inside a JSON string.
std::string JsonCharacter(uint32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  if (cp < 0x20) return absl::StrFormat("\\u%04x", cp);
  std::vector<uint8_t> bytes;
  AppendUtf8(cp, bytes);
  return std::string(bytes.begin(), bytes.end());
}

std::string Utf8(uint32_t cp) {
  std::vector<uint8_t> bytes;
  AppendUtf8(cp, bytes);
  return std::string(bytes.begin(), bytes.end());
}

std::string Quantifier(size_t min, size_t max) {
  if (min == 0 && max == kUnbounded) return "*";
  if (min == 1 && max == kUnbounded) return "+";
  if (min == 0 && max == 1) return "?";
  if (max == kUnbounded) return absl::StrCat("{", min, ",}");
  if (min == max) return absl::StrCat("{", min, "}");
  return absl::StrCat("{", min, ",", max, "}");
}

// Writes the parsed pattern as GBNF items and helper rules named after `name`.
class RegexEmitter {
 public:
  RegexEmitter(RegexTarget target, const std::string& name, GbnfRules& rules)
      : target_(target), name_(name), rules_(rules) {}

  // The node as a sequence of GBNF items (empty for the empty string).
  std::vector<std::string> Sequence(const Node& node) {
    switch (node.kind) {
      case Node::Kind::kEmpty:
        return {};
      case Node::Kind::kSet:
      case Node::Kind::kAlt:
      case Node::Kind::kRepeat:
        return {Item(node)};
      case Node::Kind::kConcat: {
        std::vector<std::string> items;
        std::string run;  // consecutive single characters, written as one literal
        for (const Node& child : node.children) {
          if (regex_internal::IsSingle(child)) {
            run += Encode(child.set.front().lo);
            continue;
          }
          if (!run.empty()) items.push_back(GbnfLiteral(std::exchange(run, "")));
          for (std::string& item : Sequence(child)) items.push_back(std::move(item));
        }
        if (!run.empty()) items.push_back(GbnfLiteral(run));
        return items;
      }
    }
    return {};
  }

  // The alternatives' sequences joined as a rule body.
  std::string Body(const std::vector<std::vector<std::string>>& alternatives) {
    std::vector<std::string> parts;
    for (const auto& seq : alternatives) {
      parts.push_back(seq.empty() ? "\"\"" : absl::StrJoin(seq, " "));
    }
    return absl::StrJoin(parts, " | ");
  }

 private:
  std::string Encode(uint32_t cp) const {
    return target_ == RegexTarget::kJsonStringSearch ? JsonCharacter(cp) : Utf8(cp);
  }

  // The node as one GBNF item: a literal, a class or a rule name.
  std::string Item(const Node& node) {
    switch (node.kind) {
      case Node::Kind::kEmpty:
        return "\"\"";
      case Node::Kind::kSet:
        return SetItem(node.set);
      case Node::Kind::kAlt: {
        std::vector<std::vector<std::string>> alternatives;
        for (const Node& child : node.children) alternatives.push_back(Sequence(child));
        return rules_.Helper(name_ + "-alt", Body(alternatives));
      }
      case Node::Kind::kRepeat: {
        const Node& child = node.children.front();
        std::string item = Item(child);
        // ParseGbnf expands a bounded x{m,n} into n-m nested helper rules.
        if (node.max != kUnbounded) rules_.AddCost(node.max - node.min);
        return item + Quantifier(node.min, node.max);
      }
      case Node::Kind::kConcat: {
        std::vector<std::string> seq = Sequence(node);
        if (seq.size() == 1) return seq.front();
        return rules_.Helper(name_ + "-seq", absl::StrJoin(seq, " "));
      }
    }
    return "\"\"";
  }

  std::string SetItem(const Ranges& set) {
    if (set.size() == 1 && set[0].lo == set[0].hi) return GbnfLiteral(Encode(set[0].lo));
    if (target_ == RegexTarget::kWholeText) return GbnfClass(set);
    // In a JSON string, '"', '\' and the controls are written as escapes, the rest raw.
    const Ranges needs_escape = NormalizeRanges({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
    const Ranges plain = regex_internal::Intersect(set, ComplementRanges(needs_escape));
    std::vector<std::string> alternatives;
    if (!plain.empty()) alternatives.push_back(GbnfClass(plain));
    for (const CodePointRange& r : regex_internal::Intersect(set, needs_escape)) {
      for (uint32_t cp = r.lo; cp <= r.hi; ++cp) {
        alternatives.push_back(GbnfLiteral(JsonCharacter(cp)));
      }
    }
    if (alternatives.size() == 1) return alternatives.front();
    return rules_.Helper(name_ + "-char", absl::StrJoin(alternatives, " | "));
  }

  RegexTarget target_;
  const std::string& name_;
  GbnfRules& rules_;
};

}  // namespace

absl::Status DefineRegexRule(std::string_view pattern, RegexTarget target, const std::string& name,
                             std::string_view json_char_rule, GbnfRules& rules) {
  absl::StatusOr<std::vector<regex_internal::TopAlternative>> top =
      regex_internal::ParseRegex(pattern);
  if (!top.ok()) return top.status();
  RegexEmitter emitter(target, name, rules);
  std::vector<std::vector<std::string>> alternatives;
  const std::string any = std::string(json_char_rule) + "*";
  for (const regex_internal::TopAlternative& alt : *top) {
    std::vector<std::string> seq = emitter.Sequence(alt.node);
    if (target == RegexTarget::kJsonStringSearch) {
      if (!alt.anchored_start) seq.insert(seq.begin(), any);
      if (!alt.anchored_end) seq.push_back(any);
    }
    alternatives.push_back(std::move(seq));
  }
  rules.Define(name, emitter.Body(alternatives));
  return absl::OkStatus();
}

absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern) {
  GbnfRules rules;
  const std::string root = rules.Reserve("root");
  TESSERA_RETURN_IF_ERROR(DefineRegexRule(pattern, RegexTarget::kWholeText, root, "", rules));
  return rules.Text();
}

}  // namespace tessera::grammar
