// allOf: the conjunction of several schemas (flattened: no $ref or allOf left) written as one
// schema, keyword by keyword.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grammar/json_schema_compiler.h"

namespace tessera::grammar::json_schema_internal {

namespace {

bool IsObjectKeyword(std::string_view key) {
  return key == "properties" || key == "required" || key == "additionalProperties";
}

std::vector<std::string> TypeList(const Json& type) {
  std::vector<std::string> out;
  if (type.is_string()) out.push_back(type.get<std::string>());
  if (type.is_array()) {
    for (const Json& t : type) {
      if (t.is_string()) out.push_back(t.get<std::string>());
    }
  }
  return out;
}

// The types both lists allow (an integer is a number).
Json IntersectTypes(const Json& a, const Json& b) {
  const std::vector<std::string> left = TypeList(a), right = TypeList(b);
  auto has = [](const std::vector<std::string>& list, std::string_view t) {
    return std::find(list.begin(), list.end(), t) != list.end();
  };
  Json out = Json::array();
  for (const std::string& t : left) {
    if (has(right, t) || (t == "integer" && has(right, "number"))) {
      out.push_back(t);
    } else if (t == "number" && has(right, "integer")) {
      out.push_back("integer");
    }
  }
  if (out.size() == 1) return out[0];
  return out;
}

}  // namespace

absl::StatusOr<Json> SchemaCompiler::MergeSchemas(const std::vector<Part>& parts) const {
  Json merged = Json::object();
  bool object_keywords = false;
  for (const Part& p : parts) {
    for (const auto& [key, value] : p.schema->items()) object_keywords |= IsObjectKeyword(key);
    if (p.schema->contains("properties") && !p.schema->at("properties").is_object()) {
      return Error(p.pointer, "'properties' must be an object");
    }
  }
  // Draft-04 boolean exclusivity belongs to its own branch's minimum/maximum.
  for (const char* bound : {"minimum", "maximum"}) {
    const char* flag = bound[1] == 'i' ? "exclusiveMinimum" : "exclusiveMaximum";
    size_t with_bound = 0;
    bool boolean_flag = false;
    for (const Part& p : parts) {
      with_bound += p.schema->contains(bound);
      boolean_flag |= p.schema->contains(flag) && p.schema->at(flag).is_boolean();
    }
    if (with_bound > 1 && boolean_flag) {
      return Error(parts.front().pointer,
                   absl::StrCat("allOf: '", bound, "' in several branches with a boolean '", flag,
                                "' is not supported"));
    }
  }

  if (object_keywords) {
    // Each branch constrains every property: by its own schema for it when it declares one,
    // else by its additionalProperties (JSON Schema applies additionalProperties per branch).
    Json properties = Json::object();
    for (const Part& p : parts) {
      if (!p.schema->contains("properties")) continue;
      for (const auto& [name, ignored] : p.schema->at("properties").items()) {
        if (properties.contains(name)) continue;
        Json constraints = Json::array();
        bool forbidden = false;
        for (const Part& q : parts) {
          const Json* own = nullptr;
          if (q.schema->contains("properties") && q.schema->at("properties").contains(name)) {
            own = &q.schema->at("properties").at(name);
          } else if (q.schema->contains("additionalProperties")) {
            own = &q.schema->at("additionalProperties");
          }
          if (own == nullptr || *own == true) continue;
          forbidden |= *own == false;
          if (std::find(constraints.begin(), constraints.end(), *own) == constraints.end()) {
            constraints.push_back(*own);
          }
        }
        if (forbidden) {
          properties[name] = false;
        } else if (constraints.empty()) {
          properties[name] = true;
        } else if (constraints.size() == 1) {
          properties[name] = constraints[0];
        } else {
          properties[name] = Json{{"allOf", constraints}};
        }
      }
    }
    Json required = Json::array();
    Json additional = Json::array();
    bool additional_forbidden = false;
    for (const Part& p : parts) {
      if (auto it = p.schema->find("required"); it != p.schema->end() && it->is_array()) {
        for (const Json& name : *it) {
          if (std::find(required.begin(), required.end(), name) == required.end()) {
            required.push_back(name);
          }
        }
      }
      if (auto it = p.schema->find("additionalProperties"); it != p.schema->end()) {
        additional_forbidden |= *it == false;
        if (*it != true &&
            std::find(additional.begin(), additional.end(), *it) == additional.end()) {
          additional.push_back(*it);
        }
      }
    }
    if (!properties.empty()) merged["properties"] = properties;
    if (!required.empty()) merged["required"] = required;
    if (additional_forbidden) {
      merged["additionalProperties"] = false;
    } else if (additional.size() == 1) {
      merged["additionalProperties"] = additional[0];
    } else if (additional.size() > 1) {
      merged["additionalProperties"] = Json{{"allOf", additional}};
    }
  }

  // The other keywords: kept when one branch has them or all agree, else combined.
  for (const Part& p : parts) {
    for (const auto& [key, value] : p.schema->items()) {
      if (IsObjectKeyword(key)) continue;
      if (!merged.contains(key)) {
        merged[key] = value;
        continue;
      }
      Json& have = merged[key];
      if (have == value) continue;
      const std::string& keyword = key;  // (clang 14 cannot capture a structured binding)
      auto refuse = [&]() {
        return Error(p.pointer, absl::StrCat("allOf: branches give '", keyword,
                                             "' different values, which cannot be merged"));
      };
      if (key == "type") {
        have = IntersectTypes(have, value);
        if (have.empty()) {
          return Error(p.pointer, "allOf: the branches' types have nothing in common");
        }
      } else if (key == "minimum" || key == "exclusiveMinimum" || key == "minLength" ||
                 key == "minItems") {
        if (!have.is_number() || !value.is_number()) return refuse();
        if (value > have) have = value;
      } else if (key == "maximum" || key == "exclusiveMaximum" || key == "maxLength" ||
                 key == "maxItems") {
        if (!have.is_number() || !value.is_number()) return refuse();
        if (value < have) have = value;
      } else if (key == "enum") {
        if (!have.is_array() || !value.is_array()) return refuse();
        Json common = Json::array();
        for (const Json& v : have) {
          if (std::find(value.begin(), value.end(), v) != value.end()) common.push_back(v);
        }
        if (common.empty()) {
          return Error(p.pointer, "allOf: the branches' 'enum' values have nothing in common");
        }
        have = common;
      } else if (key == "items") {
        have = Json{{"allOf", Json::array({have, value})}};
      } else {
        return refuse();
      }
    }
  }
  return merged;
}

}  // namespace tessera::grammar::json_schema_internal
