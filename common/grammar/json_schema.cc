#include "common/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <iterator>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grammar/gbnf_writer.h"
#include "common/grammar/json_schema_compiler.h"
#include "common/grammar/json_schema_values.h"
#include "common/grammar/regex.h"
#include "common/grammar/utf8_ranges.h"
#include "common/util/status_macros.h"

namespace tessera::grammar::json_schema_internal {

namespace {

constexpr size_t kMaxDepth = 64;       // schemas within schemas, $ref hops included
constexpr size_t kMaxValueDepth = 64;  // nesting of enum and const values

// Keywords that say nothing about the value (and $defs/definitions, which hold schemas for
// $ref): accepted and ignored.
constexpr std::string_view kAnnotations[] = {
    "title",   "description", "$schema",  "$id",       "$comment", "examples",   "example",
    "default", "deprecated",  "readOnly", "writeOnly", "$defs",    "definitions"};

// Keywords compiled into the grammar; any other is refused.
// clang-format off
constexpr std::string_view kConstraints[] = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "oneOf",
    "allOf", "items", "prefixItems", "minItems", "maxItems", "uniqueItems", "minLength",
    "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "$ref", "nullable"};
// clang-format on

bool IsAnnotation(std::string_view key) {
  return std::find(std::begin(kAnnotations), std::end(kAnnotations), key) != std::end(kAnnotations);
}

bool IsConstraint(std::string_view key) {
  return std::find(std::begin(kConstraints), std::end(kConstraints), key) != std::end(kConstraints);
}

constexpr std::string_view kTypes[] = {"string", "number", "integer", "boolean",
                                       "null",   "object", "array"};

// The type a keyword constrains, for schemas without `type`.
std::string_view TypeOfKeyword(std::string_view key, const Json& value) {
  if (key == "properties" || key == "required" || key == "additionalProperties") return "object";
  if (key == "items" || key == "prefixItems" || key == "minItems" || key == "maxItems" ||
      key == "uniqueItems") {
    return "array";
  }
  if (key == "minLength" || key == "maxLength" || key == "pattern") return "string";
  if (key == "minimum" || key == "maximum" || key == "exclusiveMinimum" ||
      key == "exclusiveMaximum") {
    return "number";
  }
  if (key == "format" && value.is_string()) {
    const std::string& f = value.get_ref<const std::string&>();
    if (f == "int32" || f == "int64") return "integer";
    if (f == "float" || f == "double") return "number";
    return "string";
  }
  return "";
}

// The JSON type names of a value, as `type` spells them (an integral number is both).
bool HasType(const Json& v, std::string_view type) {
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    const double d = v.get<double>();
    return std::isfinite(d) && d == std::floor(d);
  }
  return false;
}

// The schema's constraints, without $ref/allOf/anyOf/oneOf, nullable and annotations.
Json PlainConstraints(const Json& schema) {
  Json rest = Json::object();
  for (const auto& [key, value] : schema.items()) {
    if (IsAnnotation(key) || key == "$ref" || key == "allOf" || key == "anyOf" || key == "oneOf" ||
        key == "nullable") {
      continue;
    }
    rest[key] = value;
  }
  return rest;
}

}  // namespace

// RFC 6901: '~' and '/' in a reference token.
std::string Child(const std::string& pointer, std::string_view key) {
  std::string out = pointer + "/";
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}
std::string Child(const std::string& pointer, size_t index) {
  return absl::StrCat(pointer, "/", index);
}

std::string Seq(std::initializer_list<std::string_view> items) {
  std::string out;
  for (std::string_view item : items) {
    if (item.empty()) continue;
    if (!out.empty()) out += ' ';
    out += item;
  }
  return out;
}

absl::StatusOr<std::string> SchemaCompiler::Compile() {
  if (absl::Status s = CompileInto(rules_.Reserve("root")); !s.ok()) return s;
  return rules_.Text();
}

absl::Status SchemaCompiler::CompileInto(const std::string& name) {
  refs_[""] = {name, true, 0};
  absl::StatusOr<std::string> item = Visit(root_, "", "document");
  if (!item.ok()) return item.status();
  rules_.Define(name, *item);
  return absl::OkStatus();
}

absl::Status SchemaCompiler::Error(const std::string& pointer, std::string_view message) const {
  return absl::InvalidArgumentError(
      absl::StrCat("json_schema at ", pointer.empty() ? "/" : pointer, ": ", std::string(message)));
}

absl::Status SchemaCompiler::CheckSize(const std::string& pointer, std::string_view what) const {
  if (rules_.cost() <= options_.max_rules) return absl::OkStatus();
  return Error(pointer,
               absl::StrCat(std::string(what), "the grammar would need more than ",
                            options_.max_rules, " rules (bounded repetitions counted expanded)"));
}

// A bounded repetition that ParseGbnf will expand into about `count` rules.
absl::Status SchemaCompiler::AddRepetition(size_t count, const std::string& pointer,
                                           std::string_view keyword, uint64_t value) {
  rules_.AddCost(count);
  return CheckSize(pointer, absl::StrCat("'", std::string(keyword), "' ", value, ": "));
}

// --- Shared rules ----------------------------------------------------------------------

std::string SchemaCompiler::Primitive(const std::string& which) {
  if (auto it = primitives_.find(which); it != primitives_.end()) return it->second;
  const std::string name = rules_.Reserve(which);
  primitives_[which] = name;
  std::string body;
  if (which == "ws") {
    body = absl::StrCat("[ \\t\\n]{0,", options_.max_whitespace, "}");
    rules_.AddCost(options_.max_whitespace);
  } else if (which == "value") {
    body = absl::StrJoin({Primitive("object"), Primitive("array"), Primitive("string"),
                          Primitive("number"), Primitive("boolean"), std::string("\"null\"")},
                         " | ");
  } else if (which == "object") {
    const std::string member = Primitive("member");
    body = absl::StrCat("\"{\" ", Seq({Ws(), "(", member, "(", Sep(), member, ")*", Ws(), ")?"}),
                        " \"}\"");
  } else if (which == "member") {
    body = Seq({Primitive("string"), Ws(), "\":\"", Ws(), Primitive("value")});
  } else if (which == "array") {
    const std::string value = Primitive("value");
    body = absl::StrCat("\"[\" ", Seq({Ws(), "(", value, "(", Sep(), value, ")*", Ws(), ")?"}),
                        " \"]\"");
  } else if (which == "string") {
    body = absl::StrCat("\"\\\"\" ", Primitive("char"), "* \"\\\"\"");
  } else if (which == "char") {
    // One character of a JSON string (RFC 8259 section 7): raw but for '"', '\' and the
    // controls, or an escape; \u escapes of surrogates only as a high-low pair, so that
    // every string decodes to valid Unicode.
    body = R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-CeEfF] [0-9a-fA-F]{3} | )"
           R"([dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] )"
           R"([0-9a-fA-F]{2} ) ))";
  } else if (which == "number") {
    body = json_schema_internal::kNumberBody;
  } else if (which == "integer") {
    body = json_schema_internal::kIntegerBody;
  } else if (which == "boolean") {
    body = R"("true" | "false")";
  }
  rules_.Define(name, std::move(body));
  return name;
}

// Whitespace between tokens ("" when none is allowed) and the separator of members.
std::string SchemaCompiler::Ws() { return options_.max_whitespace == 0 ? "" : Primitive("ws"); }
std::string SchemaCompiler::Sep() { return Seq({Ws(), "\",\"", Ws()}); }

// --- Schemas ---------------------------------------------------------------------------

// A GBNF item (a rule name or a literal) for the values `schema` accepts.
absl::StatusOr<std::string> SchemaCompiler::Visit(const Json& schema, const std::string& pointer,
                                                  const std::string& hint) {
  if (depth_ >= kMaxDepth) {
    return Error(pointer, absl::StrCat("schemas nest deeper than ", kMaxDepth,
                                       " levels (counting $ref hops)"));
  }
  ++depth_;
  absl::StatusOr<std::string> item = VisitSchema(schema, pointer, hint);
  --depth_;
  if (item.ok()) TESSERA_RETURN_IF_ERROR(CheckSize(pointer, ""));
  return item;
}

absl::StatusOr<std::string> SchemaCompiler::VisitSchema(const Json& schema,
                                                        const std::string& pointer,
                                                        const std::string& hint) {
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return Primitive("value");
    return Error(pointer, "the schema 'false' admits no value");
  }
  if (!schema.is_object()) {
    return Error(pointer, absl::StrCat("expected a schema (an object or a boolean), found ",
                                       schema.type_name()));
  }
  TESSERA_RETURN_IF_ERROR(CheckKeywords(schema, pointer));
  bool nullable = false;
  if (auto it = schema.find("nullable"); it != schema.end()) {
    if (!it->is_boolean()) return Error(pointer, "'nullable' must be true or false");
    nullable = it->get<bool>();
  }
  absl::StatusOr<std::string> item = VisitConstraints(schema, pointer, hint);
  if (!item.ok() || !nullable) return item;
  return rules_.Helper(hint, absl::StrCat(*item, " | \"null\""));
}

absl::Status SchemaCompiler::CheckKeywords(const Json& schema, const std::string& pointer) const {
  for (const auto& [key, value] : schema.items()) {
    if (!IsAnnotation(key) && !IsConstraint(key)) {
      return Error(pointer, absl::StrCat("unsupported keyword '", key, "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SchemaCompiler::VisitConstraints(const Json& schema,
                                                             const std::string& pointer,
                                                             const std::string& hint) {
  const bool any_of = schema.contains("anyOf"), one_of = schema.contains("oneOf");
  if (any_of && one_of) return Error(pointer, "'anyOf' and 'oneOf' together are not supported");
  if (any_of || one_of) return VisitAnyOf(schema, any_of ? "anyOf" : "oneOf", pointer, hint);
  if (schema.contains("allOf") || schema.contains("$ref")) {
    if (!schema.contains("allOf") && PlainConstraints(schema).empty()) {
      return VisitRef(schema.at("$ref"), pointer);
    }
    return VisitConjunction({{&schema, pointer}}, pointer, hint);
  }
  if (schema.contains("enum") || schema.contains("const")) {
    return VisitEnum(schema, pointer, hint);
  }
  return VisitTyped(schema, pointer, hint);
}

absl::StatusOr<std::string> SchemaCompiler::VisitAnyOf(const Json& schema,
                                                       const std::string& keyword,
                                                       const std::string& pointer,
                                                       const std::string& hint) {
  const Json& branches = schema.at(keyword);
  if (!branches.is_array() || branches.empty()) {
    return Error(pointer, absl::StrCat("'", keyword, "' must be a non-empty array of schemas"));
  }
  // Keywords beside the anyOf apply to every branch: {S, anyOf: [A, B]} = anyOf [S+A, S+B].
  Json siblings = schema;
  siblings.erase(keyword);
  siblings.erase("nullable");
  const bool has_siblings = !PlainConstraints(siblings).empty() || siblings.contains("$ref") ||
                            siblings.contains("allOf");
  std::vector<std::string> alternatives;
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string branch_pointer = Child(Child(pointer, keyword), i);
    absl::StatusOr<std::string> item =
        has_siblings ? VisitConjunction({{&siblings, pointer}, {&branches[i], branch_pointer}},
                                        branch_pointer, hint)
                     : Visit(branches[i], branch_pointer, hint);
    if (!item.ok()) return item.status();
    alternatives.push_back(std::move(*item));
  }
  if (alternatives.size() == 1) return alternatives.front();
  return rules_.Helper(hint, absl::StrJoin(alternatives, " | "));
}

// --- References ------------------------------------------------------------------------

// The JSON pointer a local reference names ("#/$defs/a" -> "/$defs/a"), percent-decoded.
absl::StatusOr<std::string> SchemaCompiler::RefPointer(const Json& ref,
                                                       const std::string& pointer) const {
  if (!ref.is_string()) return Error(pointer, "'$ref' must be a string");
  const std::string& text = ref.get_ref<const std::string&>();
  if (text.empty() || text[0] != '#' || (text.size() > 1 && text[1] != '/')) {
    return Error(pointer, absl::StrCat("$ref '", text,
                                       "': only references within the schema ('#', "
                                       "'#/$defs/...') are supported"));
  }
  std::string decoded;
  for (size_t i = 1; i < text.size(); ++i) {
    auto hex = [](char c) {
      return c >= '0' && c <= '9'   ? c - '0'
             : c >= 'a' && c <= 'f' ? c - 'a' + 10
             : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                    : -1;
    };
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      decoded += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else {
      decoded += text[i];
    }
  }
  return decoded;
}

// The schema at a JSON pointer of the root document, or null.
const Json* SchemaCompiler::Resolve(const std::string& pointer) const {
  const Json* at = &root_;
  size_t i = 0;
  while (i < pointer.size()) {
    const size_t next = pointer.find('/', i + 1);
    const std::string raw =
        pointer.substr(i + 1, next == std::string::npos ? std::string::npos : next - i - 1);
    std::string token;
    for (size_t k = 0; k < raw.size(); ++k) {
      if (raw[k] == '~' && k + 1 < raw.size() && (raw[k + 1] == '0' || raw[k + 1] == '1')) {
        token += raw[++k] == '0' ? '~' : '/';
      } else {
        token += raw[k];
      }
    }
    if (at->is_object()) {
      auto it = at->find(token);
      if (it == at->end()) return nullptr;
      at = &*it;
    } else if (at->is_array()) {
      if (token.empty() || token.size() > 9 ||
          token.find_first_not_of("0123456789") != std::string::npos) {
        return nullptr;
      }
      const size_t index = std::stoul(token);
      if (index >= at->size()) return nullptr;
      at = &(*at)[index];
    } else {
      return nullptr;
    }
    i = next == std::string::npos ? pointer.size() : next;
  }
  return at;
}

absl::StatusOr<std::string> SchemaCompiler::VisitRef(const Json& ref, const std::string& pointer) {
  absl::StatusOr<std::string> target = RefPointer(ref, pointer);
  if (!target.ok()) return target.status();
  const std::string& text = ref.get_ref<const std::string&>();
  if (auto it = refs_.find(*target); it != refs_.end()) {
    if (it->second.in_progress && it->second.structure_depth == structure_depth_) {
      return Error(pointer, absl::StrCat("$ref '", text,
                                         "' refers back to itself with no object or array in "
                                         "between: the schema describes no finite value"));
    }
    return it->second.rule;
  }
  const Json* schema = Resolve(*target);
  if (schema == nullptr) {
    return Error(pointer, absl::StrCat("$ref '", text, "' does not resolve within the schema"));
  }
  const size_t slash = target->rfind('/');
  const std::string hint = target->substr(slash == std::string::npos ? 0 : slash + 1);
  const std::string rule = rules_.Reserve(hint);
  refs_[*target] = {rule, true, structure_depth_};
  absl::StatusOr<std::string> item = Visit(*schema, *target, hint);
  if (!item.ok()) return item.status();
  rules_.Define(rule, *item);
  refs_[*target].in_progress = false;
  return rule;
}

// --- allOf -----------------------------------------------------------------------------

// Collects the plain constraints of `schema`, following $ref and allOf, into `out`.
absl::Status SchemaCompiler::Flatten(const Json& schema, const std::string& pointer,
                                     std::vector<Part>& out, std::vector<std::string>& ref_chain,
                                     std::deque<Json>& storage) {
  if (ref_chain.size() + depth_ >= kMaxDepth) {
    return Error(pointer, absl::StrCat("schemas nest deeper than ", kMaxDepth, " levels"));
  }
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return absl::OkStatus();
    return Error(pointer, "the schema 'false' admits no value");
  }
  if (!schema.is_object()) {
    return Error(pointer, absl::StrCat("expected a schema (an object or a boolean), found ",
                                       schema.type_name()));
  }
  TESSERA_RETURN_IF_ERROR(CheckKeywords(schema, pointer));
  if (schema.contains("nullable") && schema.at("nullable") == true) {
    return Error(pointer, "'nullable' inside an allOf (or beside a $ref) is not supported");
  }
  if (auto it = schema.find("$ref"); it != schema.end()) {
    absl::StatusOr<std::string> target = RefPointer(*it, pointer);
    if (!target.ok()) return target.status();
    for (const std::string& seen : ref_chain) {
      if (seen == *target) {
        return Error(pointer, absl::StrCat("$ref '", it->get<std::string>(),
                                           "' refers back to itself within an allOf"));
      }
    }
    const Json* resolved = Resolve(*target);
    if (resolved == nullptr) {
      return Error(pointer, absl::StrCat("$ref '", it->get<std::string>(),
                                         "' does not resolve within the schema"));
    }
    ref_chain.push_back(*target);
    TESSERA_RETURN_IF_ERROR(Flatten(*resolved, *target, out, ref_chain, storage));
    ref_chain.pop_back();
  }
  if (auto it = schema.find("allOf"); it != schema.end()) {
    if (!it->is_array() || it->empty()) {
      return Error(pointer, "'allOf' must be a non-empty array of schemas");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      TESSERA_RETURN_IF_ERROR(
          Flatten((*it)[i], Child(Child(pointer, "allOf"), i), out, ref_chain, storage));
    }
  }
  Json rest = PlainConstraints(schema);
  for (const char* key : {"anyOf", "oneOf"}) {
    if (schema.contains(key)) rest[key] = schema.at(key);
  }
  if (!rest.empty()) out.push_back({&storage.emplace_back(std::move(rest)), pointer});
  return absl::OkStatus();
}

absl::StatusOr<std::string> SchemaCompiler::VisitConjunction(const std::vector<Part>& inputs,
                                                             const std::string& pointer,
                                                             const std::string& hint) {
  std::deque<Json> storage;
  std::vector<Part> parts;
  std::vector<std::string> ref_chain;
  for (const Part& input : inputs) {
    TESSERA_RETURN_IF_ERROR(Flatten(*input.schema, input.pointer, parts, ref_chain, storage));
  }
  if (parts.empty()) return Primitive("value");
  bool all_same = true;
  for (const Part& p : parts) all_same &= *p.schema == *parts.front().schema;
  if (all_same) return Visit(*parts.front().schema, parts.front().pointer, hint);
  absl::StatusOr<Json> merged = MergeSchemas(parts);
  if (!merged.ok()) return merged.status();
  return Visit(*merged, pointer, hint);
}

// --- enum, const -----------------------------------------------------------------------

absl::StatusOr<std::vector<std::string>> SchemaCompiler::Types(const Json& schema,
                                                               const std::string& pointer) const {
  std::vector<std::string> types;
  auto add = [&](std::string_view t) {
    if (std::find(types.begin(), types.end(), t) == types.end()) types.emplace_back(t);
  };
  auto it = schema.find("type");
  if (it == schema.end()) {
    for (const auto& [key, value] : schema.items()) {
      if (std::string_view t = TypeOfKeyword(key, value); !t.empty()) add(t);
    }
    return types;
  }
  const Json list = it->is_array() ? *it : Json::array({*it});
  if (list.empty()) return Error(pointer, "'type' is an empty list");
  for (const Json& t : list) {
    if (!t.is_string()) return Error(pointer, "'type' must be a string or a list of strings");
    const std::string& name = t.get_ref<const std::string&>();
    if (std::find(std::begin(kTypes), std::end(kTypes), name) == std::end(kTypes)) {
      return Error(pointer, absl::StrCat("unknown type '", name, "'"));
    }
    add(name);
  }
  return types;
}

absl::StatusOr<std::string> SchemaCompiler::VisitEnum(const Json& schema,
                                                      const std::string& pointer,
                                                      const std::string& hint) {
  const Json constraints = PlainConstraints(schema);
  for (const auto& [key, value] : constraints.items()) {
    if (key != "enum" && key != "const" && key != "type") {
      return Error(pointer, absl::StrCat("'", key, "' beside 'enum' or 'const' is not supported"));
    }
  }
  Json values = Json::array();
  if (auto it = schema.find("enum"); it != schema.end()) {
    if (!it->is_array() || it->empty()) return Error(pointer, "'enum' must be a non-empty array");
    values = *it;
  }
  if (auto it = schema.find("const"); it != schema.end()) {
    if (!schema.contains("enum")) {
      values.push_back(*it);
    } else if (std::find(values.begin(), values.end(), *it) != values.end()) {
      values = Json::array({*it});
    } else {
      return Error(pointer, "'const' is not among the values of 'enum'");
    }
  }
  std::vector<std::string> types;
  if (schema.contains("type")) {
    absl::StatusOr<std::vector<std::string>> listed = Types(schema, pointer);
    if (!listed.ok()) return listed.status();
    types = std::move(*listed);
  }
  std::vector<std::string> literals;
  absl::flat_hash_set<std::string> seen;
  for (size_t i = 0; i < values.size(); ++i) {
    const Json& v = values[i];
    bool typed = types.empty();
    for (const std::string& t : types) typed |= HasType(v, t);
    if (!typed) continue;
    if (DeeperThan(v, kMaxValueDepth)) {
      return Error(pointer, absl::StrCat("value ", i, " of 'enum' nests deeper than ",
                                         kMaxValueDepth, " levels"));
    }
    std::string text;
    try {
      text = v.dump();
    } catch (const nlohmann::json::exception&) {
      return Error(pointer, absl::StrCat("value ", i, " of 'enum' is not valid UTF-8"));
    }
    if (seen.insert(text).second) literals.push_back(GbnfLiteral(text));
  }
  if (literals.empty()) return Error(pointer, "no value of 'enum'/'const' has the schema's 'type'");
  rules_.AddCost(literals.size() / 8);
  if (literals.size() == 1) return literals.front();
  return rules_.Helper(hint, absl::StrJoin(literals, " | "));
}

// --- Types -----------------------------------------------------------------------------

absl::StatusOr<std::string> SchemaCompiler::VisitTyped(const Json& schema,
                                                       const std::string& pointer,
                                                       const std::string& hint) {
  absl::StatusOr<std::vector<std::string>> types = Types(schema, pointer);
  if (!types.ok()) return types.status();
  if (types->empty()) return Primitive("value");
  const bool has_number = std::find(types->begin(), types->end(), "number") != types->end();
  std::vector<std::string> alternatives;
  for (const std::string& type : *types) {
    absl::StatusOr<std::string> item;
    if (type == "null") {
      item = std::string("\"null\"");
    } else if (type == "boolean") {
      item = Primitive("boolean");
    } else if (type == "string") {
      item = StringRule(schema, pointer, hint);
    } else if (type == "integer") {
      if (has_number) continue;  // a subset of number
      item = NumberRule(schema, pointer, hint, /*integer=*/true);
    } else if (type == "number") {
      item = NumberRule(schema, pointer, hint, /*integer=*/false);
    } else if (type == "object") {
      item = ObjectRule(schema, pointer, hint);
    } else {
      item = ArrayRule(schema, pointer, hint);
    }
    if (!item.ok()) return item.status();
    alternatives.push_back(std::move(*item));
  }
  if (alternatives.size() == 1) return alternatives.front();
  return rules_.Helper(hint, absl::StrJoin(alternatives, " | "));
}

}  // namespace tessera::grammar::json_schema_internal

namespace tessera::grammar {

absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                             const JsonSchemaOptions& options) {
  // Copies and comparisons of nlohmann values recurse: refuse deep documents before any.
  if (json_schema_internal::DeeperThan(schema, json_schema_internal::kMaxJsonDepth)) {
    return absl::InvalidArgumentError(
        absl::StrCat("json_schema at /: the schema nests deeper than ",
                     json_schema_internal::kMaxJsonDepth, " JSON levels"));
  }
  try {
    return json_schema_internal::SchemaCompiler(schema, options).Compile();
  } catch (const nlohmann::json::exception& e) {
    // Every access checks its type first; this is a last line against a crash.
    return absl::InvalidArgumentError(absl::StrCat("json_schema: ", e.what()));
  }
}

absl::Status DefineJsonSchemaRule(const nlohmann::ordered_json& schema,
                                  const JsonSchemaOptions& options, const std::string& name,
                                  GbnfRules& rules) {
  if (json_schema_internal::DeeperThan(schema, json_schema_internal::kMaxJsonDepth)) {
    return absl::InvalidArgumentError(
        absl::StrCat("json_schema at /: the schema nests deeper than ",
                     json_schema_internal::kMaxJsonDepth, " JSON levels"));
  }
  try {
    return json_schema_internal::SchemaCompiler(schema, options, rules).CompileInto(name);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("json_schema: ", e.what()));
  }
}

absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::json& schema,
                                             const JsonSchemaOptions& options) {
  if (json_schema_internal::DeeperThan(schema, json_schema_internal::kMaxJsonDepth)) {
    return absl::InvalidArgumentError(
        absl::StrCat("json_schema at /: the schema nests deeper than ",
                     json_schema_internal::kMaxJsonDepth, " JSON levels"));
  }
  return JsonSchemaToGbnf(nlohmann::ordered_json(schema), options);
}

}  // namespace tessera::grammar
