#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grammar/json_schema_compiler.h"
#include "common/grammar/json_schema_values.h"
#include "common/grammar/regex.h"
#include "common/grammar/utf8_ranges.h"
#include "common/util/status_macros.h"

namespace tessera::grammar::json_schema_internal {

namespace {

bool IsNumericFormat(std::string_view f) {
  return f == "int32" || f == "int64" || f == "float" || f == "double";
}

// A bound of `value` rounded to an integer: floor or ceil; out of the int64 range it is
// reported as below or above it.
struct IntegerBound {
  enum class Range { kValue, kBelow, kAbove } range = Range::kValue;
  int64_t value = 0;
};

IntegerBound RoundBound(const Json& v, bool ceil) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return {IntegerBound::Range::kAbove, 0};
    return {IntegerBound::Range::kValue, static_cast<int64_t>(u)};
  }
  if (v.is_number_integer()) return {IntegerBound::Range::kValue, v.get<int64_t>()};
  const double d = ceil ? std::ceil(v.get<double>()) : std::floor(v.get<double>());
  if (d >= 9223372036854775808.0) return {IntegerBound::Range::kAbove, 0};
  if (d < -9223372036854775808.0) return {IntegerBound::Range::kBelow, 0};
  return {IntegerBound::Range::kValue, static_cast<int64_t>(d)};
}

std::string Quoted(const std::string& content) { return Seq({"\"\\\"\"", content, "\"\\\"\""}); }

}  // namespace

// A non-negative integer keyword (minLength, maxItems, ...), absent as nullopt.
absl::StatusOr<std::optional<uint64_t>> SchemaCompiler::Count(const Json& schema, const char* key,
                                                              const std::string& pointer) const {
  auto it = schema.find(key);
  if (it == schema.end()) return std::optional<uint64_t>();
  const bool integral = it->is_number_unsigned() ||
                        (it->is_number_integer() && it->get<int64_t>() >= 0) ||
                        (it->is_number_float() && it->get<double>() >= 0 &&
                         it->get<double>() == std::floor(it->get<double>()));
  if (!integral) return Error(pointer, absl::StrCat("'", key, "' must be a non-negative integer"));
  const double as_double = it->get<double>();
  if (as_double > 1e15) return std::optional<uint64_t>(uint64_t{1} << 50);
  return std::optional<uint64_t>(it->is_number_float() ? static_cast<uint64_t>(as_double)
                                                       : it->get<uint64_t>());
}

absl::StatusOr<std::string> SchemaCompiler::StringRule(const Json& schema,
                                                       const std::string& pointer,
                                                       const std::string& hint) {
  absl::StatusOr<std::optional<uint64_t>> min = Count(schema, "minLength", pointer);
  if (!min.ok()) return min.status();
  absl::StatusOr<std::optional<uint64_t>> max = Count(schema, "maxLength", pointer);
  if (!max.ok()) return max.status();
  std::optional<std::string> format;
  if (auto it = schema.find("format"); it != schema.end()) {
    if (!it->is_string()) return Error(pointer, "'format' must be a string");
    if (!IsNumericFormat(it->get_ref<const std::string&>())) format = it->get<std::string>();
  }
  const bool length = min->has_value() || max->has_value();
  if (auto it = schema.find("pattern"); it != schema.end()) {
    if (!it->is_string()) return Error(pointer, "'pattern' must be a string");
    if (length || format) {
      return Error(pointer,
                   "'pattern' together with 'minLength', 'maxLength' or 'format' is "
                   "not supported");
    }
    const std::string rule = rules_.Reserve(hint + "-pattern");
    absl::Status defined =
        DefineRegexRule(it->get_ref<const std::string&>(), RegexTarget::kJsonStringSearch, rule,
                        Primitive("char"), rules_);
    if (!defined.ok()) return Error(pointer, absl::StrCat("'pattern': ", defined.message()));
    return rules_.Helper(hint, Quoted(rule));
  }
  if (format) {
    if (length) {
      return Error(pointer, "'format' together with 'minLength' or 'maxLength' is not supported");
    }
    std::optional<std::string> rule = json_schema_internal::StringFormatRule(*format, rules_);
    if (!rule) {
      return Error(pointer, absl::StrCat("unsupported format '", *format,
                                         "' (supported: date, time, date-time, uuid, email)"));
    }
    return rules_.Helper(hint, Quoted(*rule));
  }
  if (!length) return Primitive("string");
  const uint64_t lo = min->value_or(0);
  if (max->has_value() && **max < lo) {
    return Error(pointer, "'maxLength' is below 'minLength'");
  }
  std::string repeat;
  if (!max->has_value()) {
    TESSERA_RETURN_IF_ERROR(AddRepetition(lo + 1, pointer, "minLength", lo));
    repeat = absl::StrCat("{", lo, ",}");
  } else {
    TESSERA_RETURN_IF_ERROR(AddRepetition(**max, pointer, "maxLength", **max));
    repeat = lo == **max ? absl::StrCat("{", lo, "}") : absl::StrCat("{", lo, ",", **max, "}");
  }
  return rules_.Helper(hint, Quoted(Primitive("char") + repeat));
}

absl::StatusOr<std::string> SchemaCompiler::NumberRule(const Json& schema,
                                                       const std::string& pointer,
                                                       const std::string& hint, bool integer) {
  // Bounds as integers: for an integer, the inclusive [lo, hi]; for a number, each with its
  // exclusivity.
  std::optional<NumberBound> lo, hi;
  auto tighten = [](std::optional<NumberBound>& bound, NumberBound b, bool lower) {
    if (!bound || (lower ? b.value > bound->value : b.value < bound->value) ||
        (b.value == bound->value && b.exclusive)) {
      bound = b;
    }
  };
  if (auto it = schema.find("format"); it != schema.end() && it->is_string()) {
    const std::string& f = it->get_ref<const std::string&>();
    if (f == "int32") {
      tighten(lo, {INT32_MIN, false}, true);
      tighten(hi, {INT32_MAX, false}, false);
    } else if (!IsNumericFormat(f) && f != "date" && f != "time" && f != "date-time" &&
               f != "uuid" && f != "email") {
      return Error(pointer, absl::StrCat("unsupported format '", f, "'"));
    }
  }
  // Draft-04 / OpenAPI 3.0 spell exclusivity as booleans beside minimum and maximum.
  auto flag = [&](const char* key) {
    auto it = schema.find(key);
    return it != schema.end() && it->is_boolean() && it->get<bool>();
  };
  struct Keyword {
    const char* key;
    bool lower, exclusive;
  };
  const Keyword keywords[] = {{"minimum", true, flag("exclusiveMinimum")},
                              {"exclusiveMinimum", true, true},
                              {"maximum", false, flag("exclusiveMaximum")},
                              {"exclusiveMaximum", false, true}};
  for (const Keyword& k : keywords) {
    auto it = schema.find(k.key);
    if (it == schema.end() || it->is_boolean()) continue;
    if (!it->is_number()) return Error(pointer, absl::StrCat("'", k.key, "' must be a number"));
    const bool integral =
        !it->is_number_float() || it->get<double>() == std::floor(it->get<double>());
    if (!integer && !integral) {
      return Error(pointer, absl::StrCat("'", k.key, "' ", it->dump(),
                                         ": only integer bounds are supported on a non-integer "
                                         "number (use type integer, or scale the value)"));
    }
    // An integer bound is rounded inward and made inclusive: x > 2.5 is x >= 3, x > 2 is x >= 3.
    const bool round_up = k.lower != (integer && k.exclusive && integral);
    IntegerBound b = RoundBound(*it, integer ? round_up : k.lower);
    const bool opens_the_range =
        k.lower ? b.range == IntegerBound::Range::kBelow : b.range == IntegerBound::Range::kAbove;
    if (opens_the_range) continue;  // beyond int64: the open side's digit limit is stricter
    if (b.range != IntegerBound::Range::kValue) {
      return Error(pointer, absl::StrCat("'", k.key, "' ", it->dump(),
                                         " is beyond the supported integer range"));
    }
    NumberBound bound{b.value, k.exclusive};
    if (integer && k.exclusive && integral) {
      if (b.value == (k.lower ? INT64_MAX : INT64_MIN)) {
        return Error(pointer,
                     absl::StrCat("'", k.key, "' ", it->dump(), " leaves no supported integer"));
      }
      bound.value += k.lower ? 1 : -1;
    }
    if (integer) bound.exclusive = false;
    tighten(k.lower ? lo : hi, bound, k.lower);
  }
  if (!lo && !hi) return Primitive(integer ? "integer" : "number");
  if (lo && hi &&
      (lo->value > hi->value || (lo->value == hi->value && (lo->exclusive || hi->exclusive)))) {
    return Error(pointer, absl::StrCat("no ", integer ? "integer" : "number",
                                       " lies within the minimum and maximum"));
  }
  if (integer) {
    std::optional<int64_t> low, high;
    if (lo) low = lo->value;
    if (hi) high = hi->value;
    return rules_.Helper(hint, IntegerRangeBody(low, high));
  }
  return rules_.Helper(hint, NumberRangeBody(lo, hi));
}

absl::StatusOr<std::string> SchemaCompiler::VisitInside(const Json& schema,
                                                        const std::string& pointer,
                                                        const std::string& hint) {
  ++structure_depth_;
  absl::StatusOr<std::string> item = Visit(schema, pointer, hint);
  --structure_depth_;
  return item;
}

std::string SchemaCompiler::KeyNotIn(const std::vector<std::string>& names,
                                     const std::string& hint) {
  // A trie of the names over code points; at each node a key may end (unless a name ends
  // there), go on with a character no name continues with (then anything), or follow a
  // name's next character.
  struct TrieNode {
    std::map<uint32_t, size_t> children;
    bool terminal = false;
  };
  std::vector<TrieNode> trie(1);
  for (const std::string& name : names) {
    size_t node = 0;
    for (size_t i = 0; i < name.size();) {
      const auto b = static_cast<uint8_t>(name[i]);
      const size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
      uint32_t cp = len == 1 ? b : b & (0x3Fu >> (len - 1));
      for (size_t k = 1; k < len && i + k < name.size(); ++k) {
        cp = (cp << 6) | (static_cast<uint8_t>(name[i + k]) & 0x3F);
      }
      i += len;
      auto [it, inserted] = trie[node].children.try_emplace(cp, trie.size());
      if (inserted) trie.emplace_back();
      node = it->second;
    }
    trie[node].terminal = true;
  }
  const std::vector<CodePointRange> raw =
      ComplementRanges(NormalizeRanges({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}));
  const std::string any_raw = GbnfClass(raw) + "*";
  std::vector<std::string> node_rules(trie.size());
  for (size_t n = 0; n < trie.size(); ++n) node_rules[n] = rules_.Reserve(hint + "-key");
  for (size_t n = 0; n < trie.size(); ++n) {
    std::vector<std::string> alternatives;
    if (!trie[n].terminal) alternatives.push_back("\"\\\"\"");
    // Characters a raw key cannot hold never start a name's continuation here.
    std::vector<CodePointRange> excluded = ComplementRanges(raw);
    for (const auto& [cp, child] : trie[n].children) excluded.push_back({cp, cp});
    const std::vector<CodePointRange> others = ComplementRanges(NormalizeRanges(excluded));
    if (!others.empty()) alternatives.push_back(Seq({GbnfClass(others), any_raw, "\"\\\"\""}));
    for (const auto& [cp, child] : trie[n].children) {
      if (cp < 0x20 || cp == '"' || cp == '\\') continue;
      std::vector<uint8_t> bytes;
      AppendUtf8(cp, bytes);
      alternatives.push_back(
          Seq({GbnfLiteral(std::string(bytes.begin(), bytes.end())), node_rules[child]}));
    }
    rules_.Define(node_rules[n], absl::StrJoin(alternatives, " | "));
  }
  return Seq({"\"\\\"\"", node_rules[0]});
}

absl::StatusOr<std::string> SchemaCompiler::ObjectRule(const Json& schema,
                                                       const std::string& pointer,
                                                       const std::string& hint) {
  static const Json kEmpty = Json::object();
  const Json* properties = &kEmpty;
  if (auto it = schema.find("properties"); it != schema.end()) {
    if (!it->is_object()) return Error(pointer, "'properties' must be an object");
    properties = &*it;
  }
  std::vector<std::string> required;
  if (auto it = schema.find("required"); it != schema.end()) {
    if (!it->is_array()) return Error(pointer, "'required' must be an array of strings");
    for (const Json& name : *it) {
      if (!name.is_string()) return Error(pointer, "'required' must be an array of strings");
      if (std::find(required.begin(), required.end(), name) == required.end()) {
        required.push_back(name.get<std::string>());
      }
    }
  }
  const Json* additional = nullptr;  // null: any additional property is allowed
  if (auto it = schema.find("additionalProperties"); it != schema.end()) {
    if (!it->is_boolean() && !it->is_object()) {
      return Error(pointer, "'additionalProperties' must be a boolean or a schema");
    }
    if (*it != true) additional = &*it;
  }
  const bool additional_allowed = additional == nullptr || *additional != false;
  const std::string additional_pointer = Child(pointer, "additionalProperties");

  struct Member {
    std::string kv;  // GBNF: key ws ":" ws value
    bool required;
  };
  std::vector<Member> members;
  std::vector<std::string> declared;
  auto is_required = [&](const std::string& name) {
    return std::find(required.begin(), required.end(), name) != required.end();
  };
  auto key_literal = [&](const std::string& name) -> absl::StatusOr<std::string> {
    try {
      return GbnfLiteral(Json(name).dump());
    } catch (const nlohmann::json::exception&) {
      return Error(pointer, "a property name is not valid UTF-8");
    }
  };
  auto member = [&](const std::string& name, const Json& value_schema,
                    const std::string& value_pointer) -> absl::Status {
    absl::StatusOr<std::string> key = key_literal(name);
    if (!key.ok()) return key.status();
    absl::StatusOr<std::string> value = VisitInside(value_schema, value_pointer, name);
    if (!value.ok()) return value.status();
    const std::string kv = rules_.Helper(name + "-kv", Seq({*key, Ws(), "\":\"", Ws(), *value}));
    members.push_back({kv, is_required(name)});
    return absl::OkStatus();
  };
  for (const auto& [name, value_schema] : properties->items()) {
    if (absl::StatusOr<std::string> key = key_literal(name); !key.ok()) return key.status();
    declared.push_back(name);
    const std::string value_pointer = Child(Child(pointer, "properties"), name);
    if (value_schema == false) {
      if (is_required(name)) {
        return Error(value_pointer,
                     "the property is required but never allowed (its schema is false, or an "
                     "allOf branch's additionalProperties: false excludes it)");
      }
      continue;  // never present
    }
    TESSERA_RETURN_IF_ERROR(member(name, value_schema, value_pointer));
  }
  for (const std::string& name : required) {
    if (properties->contains(name)) continue;
    if (!additional_allowed) {
      return Error(pointer, absl::StrCat("required property '", name,
                                         "' is not in 'properties' and additionalProperties is "
                                         "false"));
    }
    declared.push_back(name);
    TESSERA_RETURN_IF_ERROR(
        member(name, additional ? *additional : Json(true), additional_pointer));
  }
  std::string extra;  // GBNF of one additional member, empty when none is allowed
  if (additional_allowed) {
    absl::StatusOr<std::string> value =
        VisitInside(additional ? *additional : Json(true), additional_pointer, hint + "-value");
    if (!value.ok()) return value.status();
    const std::string key = declared.empty() ? Primitive("string") : KeyNotIn(declared, hint);
    extra = rules_.Helper(hint + "-extra", Seq({key, Ws(), "\":\"", Ws(), *value}));
  }

  // Members in order, each optional one present or not, commas only between present ones:
  // rest[i] continues after something was written, first[i] writes the first member.
  const std::string sep = Sep();
  const size_t n = members.size();
  std::vector<std::string> rest(n + 1), first(n + 1);
  if (!extra.empty()) rest[n] = absl::StrCat("( ", Seq({sep, extra}), " )*");
  for (size_t i = n; i-- > 1;) {
    const std::string written = Seq({sep, members[i].kv});
    rest[i] =
        rules_.Helper(hint + "-rest", members[i].required ? Seq({written, rest[i + 1]})
                                                          : Seq({"(", written, ")?", rest[i + 1]}));
  }
  // first[i] is needed from 0 up to the first required member, which is always written.
  size_t first_required = n;
  for (size_t i = 0; i < n && first_required == n; ++i) {
    if (members[i].required) first_required = i;
  }
  const bool any_required = first_required < n;
  if (!extra.empty() && !any_required) {
    first[n] = rules_.Helper(hint + "-first", Seq({extra, rest[n]}));
  }
  for (size_t i = std::min(first_required + 1, n); i-- > 0;) {
    const std::string starts_here = Seq({members[i].kv, rest[i + 1]});
    first[i] = members[i].required || first[i + 1].empty()
                   ? rules_.Helper(hint + "-first", starts_here)
                   : rules_.Helper(hint + "-first", absl::StrCat(starts_here, " | ", first[i + 1]));
  }
  std::vector<std::string> alternatives;
  if (!first[0].empty()) alternatives.push_back(Seq({"\"{\"", Ws(), first[0], Ws(), "\"}\""}));
  if (!any_required) alternatives.push_back(Seq({"\"{\"", Ws(), "\"}\""}));
  return rules_.Helper(hint, absl::StrJoin(alternatives, " | "));
}

absl::StatusOr<std::string> SchemaCompiler::ArrayRule(const Json& schema,
                                                      const std::string& pointer,
                                                      const std::string& hint) {
  static const Json kNoPrefix = Json::array();
  const Json* prefix = &kNoPrefix;
  if (auto it = schema.find("prefixItems"); it != schema.end()) {
    if (!it->is_array()) return Error(pointer, "'prefixItems' must be an array of schemas");
    prefix = &*it;
  }
  const Json* items = nullptr;  // null: any value
  if (auto it = schema.find("items"); it != schema.end()) {
    if (it->is_array()) {
      return Error(pointer,
                   "'items' as an array (draft-07 tuples) is not supported; use "
                   "'prefixItems'");
    }
    if (!it->is_boolean() && !it->is_object()) {
      return Error(pointer, "'items' must be a schema");
    }
    if (*it != true) items = &*it;
  }
  if (auto it = schema.find("uniqueItems"); it != schema.end()) {
    if (!it->is_boolean()) return Error(pointer, "'uniqueItems' must be true or false");
    if (it->get<bool>()) return Error(pointer, "'uniqueItems: true' is not supported");
  }
  absl::StatusOr<std::optional<uint64_t>> min_items = Count(schema, "minItems", pointer);
  if (!min_items.ok()) return min_items.status();
  absl::StatusOr<std::optional<uint64_t>> max_items = Count(schema, "maxItems", pointer);
  if (!max_items.ok()) return max_items.status();
  const uint64_t k = prefix->size();
  const bool more_allowed = items == nullptr || *items != false;
  const uint64_t min = min_items->value_or(0);
  // The longest array; nullopt for unbounded.
  std::optional<uint64_t> max = *max_items;
  if (!more_allowed) max = max ? std::min(*max, k) : k;
  if (max && *max < min) {
    return Error(pointer, "no array satisfies 'minItems' within 'maxItems' and the items allowed");
  }
  const std::string empty = Seq({"\"[\"", Ws(), "\"]\""});
  if (max && *max == 0) return rules_.Helper(hint, empty);

  // Elements at positions 0..k-1 follow prefixItems, the rest `items`.
  const uint64_t used_prefix = max ? std::min(k, *max) : k;
  std::vector<std::string> element(used_prefix);
  for (uint64_t i = 0; i < used_prefix; ++i) {
    absl::StatusOr<std::string> item = VisitInside(
        (*prefix)[i], Child(Child(pointer, "prefixItems"), i), absl::StrCat(hint, "-", i));
    if (!item.ok()) return item.status();
    element[i] = std::move(*item);
  }
  std::string item;
  if (!max || *max > k) {
    absl::StatusOr<std::string> visited =
        VisitInside(items ? *items : Json(true), Child(pointer, "items"), hint + "-item");
    if (!visited.ok()) return visited.status();
    item = std::move(*visited);
  }
  const std::string sep = Sep();
  // tail[j]: the elements after the first j (j >= 1), each written with its separator.
  std::string tail;
  if (!item.empty()) {
    // Elements k.. (or 1.. when there is no prefix): count them against min and max.
    const uint64_t start = std::max<uint64_t>(k, 1);
    const uint64_t at_least = min > start ? min - start : 0;
    std::string repeat;
    if (!max) {
      TESSERA_RETURN_IF_ERROR(AddRepetition(at_least + 1, pointer, "minItems", min));
      repeat = at_least == 0 ? "*" : absl::StrCat("{", at_least, ",}");
    } else {
      const uint64_t at_most = *max - start;
      TESSERA_RETURN_IF_ERROR(AddRepetition(at_most, pointer, "maxItems", *max));
      repeat = at_least == at_most ? absl::StrCat("{", at_most, "}")
                                   : absl::StrCat("{", at_least, ",", at_most, "}");
    }
    if (repeat != "{0}") tail = absl::StrCat("( ", Seq({sep, item}), " )", repeat);
  }
  for (uint64_t j = used_prefix; j-- > 1;) {
    // Position j follows j elements already written: optional once min is reached.
    const std::string written = Seq({sep, element[j], tail});
    tail = rules_.Helper(hint + "-tail", j >= min ? absl::StrCat("( ", written, " )?") : written);
  }
  const std::string content = Seq({used_prefix > 0 ? element[0] : item, tail});
  std::string body = Seq({"\"[\"", Ws(), content, Ws(), "\"]\""});
  if (min == 0) body = absl::StrCat(body, " | ", empty);
  return rules_.Helper(hint, body);
}

}  // namespace tessera::grammar::json_schema_internal
