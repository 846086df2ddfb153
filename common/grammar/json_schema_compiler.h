// The JSON Schema front end's compiler (json_schema.h is the contract). Internal to
// common/grammar: json_schema.cc walks schemas (keywords, $ref, allOf/anyOf, enum),
// json_schema_types.cc writes the grammar of each type (strings, numbers, objects, arrays).
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/grammar/gbnf_writer.h"
#include "common/grammar/json_schema.h"
#include "nlohmann/json.hpp"

namespace tessera::grammar::json_schema_internal {

using Json = nlohmann::ordered_json;

// `pointer` extended by one reference token (RFC 6901 escapes '~' and '/').
std::string Child(const std::string& pointer, std::string_view key);
std::string Child(const std::string& pointer, size_t index);

// Nesting of arrays and objects accepted in a schema document (copies and comparisons of
// nlohmann values recurse, so deeper documents are refused before any).
inline constexpr size_t kMaxJsonDepth = 256;

// Whether `value` nests arrays and objects deeper than `limit`, found without recursion.
template <typename JsonType>
bool DeeperThan(const JsonType& value, size_t limit) {
  std::vector<std::pair<const JsonType*, size_t>> todo = {{&value, 0}};
  while (!todo.empty()) {
    auto [v, depth] = todo.back();
    todo.pop_back();
    if (!v->is_structured()) continue;
    if (depth >= limit) return true;
    for (const JsonType& child : *v) todo.push_back({&child, depth + 1});
  }
  return false;
}

// GBNF items joined by spaces, empty ones left out.
std::string Seq(std::initializer_list<std::string_view> items);

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& options)
      : root_(root), options_(options), rules_(own_rules_) {}
  // Writes into `rules` (DefineJsonSchemaRule).
  SchemaCompiler(const Json& root, const JsonSchemaOptions& options, GbnfRules& rules)
      : root_(root), options_(options), rules_(rules) {}

  // The GBNF text, start rule `root`.
  absl::StatusOr<std::string> Compile();
  // Defines `name` (reserved in the rules by the caller) as the schema's values.
  absl::Status CompileInto(const std::string& name);

 private:
  struct RefState {
    std::string rule;
    bool in_progress = false;
    size_t structure_depth = 0;  // objects and arrays entered when its expansion began
  };
  // One schema of a conjunction (allOf, keywords beside $ref or anyOf) and where it sits.
  struct Part {
    const Json* schema;
    std::string pointer;
  };

  // "json_schema at POINTER: message".
  absl::Status Error(const std::string& pointer, std::string_view message) const;
  // An error when the grammar has grown past max_rules; `what` prefixes the message.
  absl::Status CheckSize(const std::string& pointer, std::string_view what) const;
  // Counts a bounded repetition that ParseGbnf will expand into about `count` rules.
  absl::Status AddRepetition(size_t count, const std::string& pointer, std::string_view keyword,
                             uint64_t value);

  // Shared rules, defined on first use: ws, value, object, member, array, string, char,
  // number, integer, boolean.
  std::string Primitive(const std::string& which);
  // Whitespace between tokens ("" when none is allowed), and the separator ws "," ws.
  std::string Ws();
  std::string Sep();

  // json_schema.cc: a GBNF item (a rule name or a literal) for the values `schema` accepts.
  absl::StatusOr<std::string> Visit(const Json& schema, const std::string& pointer,
                                    const std::string& hint);
  absl::StatusOr<std::string> VisitSchema(const Json& schema, const std::string& pointer,
                                          const std::string& hint);
  absl::Status CheckKeywords(const Json& schema, const std::string& pointer) const;
  absl::StatusOr<std::string> VisitConstraints(const Json& schema, const std::string& pointer,
                                               const std::string& hint);
  absl::StatusOr<std::string> VisitAnyOf(const Json& schema, const std::string& keyword,
                                         const std::string& pointer, const std::string& hint);
  absl::StatusOr<std::string> RefPointer(const Json& ref, const std::string& pointer) const;
  const Json* Resolve(const std::string& pointer) const;
  absl::StatusOr<std::string> VisitRef(const Json& ref, const std::string& pointer);
  absl::Status Flatten(const Json& schema, const std::string& pointer, std::vector<Part>& out,
                       std::vector<std::string>& ref_chain, std::deque<Json>& storage);
  absl::StatusOr<std::string> VisitConjunction(const std::vector<Part>& inputs,
                                               const std::string& pointer, const std::string& hint);
  // json_schema_merge.cc: the conjunction of flattened schemas as one schema.
  absl::StatusOr<Json> MergeSchemas(const std::vector<Part>& parts) const;
  absl::StatusOr<std::vector<std::string>> Types(const Json& schema,
                                                 const std::string& pointer) const;
  absl::StatusOr<std::string> VisitEnum(const Json& schema, const std::string& pointer,
                                        const std::string& hint);
  absl::StatusOr<std::string> VisitTyped(const Json& schema, const std::string& pointer,
                                         const std::string& hint);

  // json_schema_types.cc: the grammar of one type under the schema's keywords for it.
  absl::StatusOr<std::optional<uint64_t>> Count(const Json& schema, const char* key,
                                                const std::string& pointer) const;
  absl::StatusOr<std::string> StringRule(const Json& schema, const std::string& pointer,
                                         const std::string& hint);
  absl::StatusOr<std::string> NumberRule(const Json& schema, const std::string& pointer,
                                         const std::string& hint, bool integer);
  absl::StatusOr<std::string> ObjectRule(const Json& schema, const std::string& pointer,
                                         const std::string& hint);
  absl::StatusOr<std::string> ArrayRule(const Json& schema, const std::string& pointer,
                                        const std::string& hint);
  // A JSON string (quotes included) whose value is none of `names`, written without escapes.
  std::string KeyNotIn(const std::vector<std::string>& names, const std::string& hint);
  // Visits a schema of a member or an element: inside an object or array.
  absl::StatusOr<std::string> VisitInside(const Json& schema, const std::string& pointer,
                                          const std::string& hint);

  const Json& root_;
  JsonSchemaOptions options_;
  GbnfRules own_rules_;
  GbnfRules& rules_;
  absl::flat_hash_map<std::string, std::string> primitives_;
  absl::flat_hash_map<std::string, RefState> refs_;
  size_t depth_ = 0;
  size_t structure_depth_ = 0;
};

}  // namespace tessera::grammar::json_schema_internal
