// Conversion between render variables given as JSON and engine values, and the `tojson`
// filter, which HuggingFace defines as Python's json.dumps.
#pragma once

#include <optional>
#include <string>

#include "common/chat/value.h"
#include "nlohmann/json.hpp"

namespace tessera::chat {

// JSON → Value: objects keep their key order, integers stay ints, numbers with a fraction
// or exponent become floats. With `request_data`, every string (object keys included) is
// tainted as a whole (common/chat/taint.h).
Value FromJson(const nlohmann::ordered_json& j, bool request_data = false);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          // as json.dumps: nullopt = one line
  std::optional<std::string> item_separator;  // default: ", " one-line, "," indented
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// json.dumps(v, ...) byte for byte. Throws TemplateError for values JSON cannot hold
// (Undefined, namespaces, functions).
std::string JsonDumps(const Value& v, const JsonDumpOptions& options);

}  // namespace tessera::chat
