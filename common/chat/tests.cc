#include "common/chat/tests.h"

#include <algorithm>

#include "common/chat/call_args.h"
#include "common/chat/filters.h"
#include "common/chat/methods.h"
#include "common/chat/py_string.h"
#include "common/chat/template_error.h"

namespace tessera::chat {
namespace {

constexpr const char* kTests[] = {
    "defined",     "undefined", "none",        "boolean", "false",    "true",     "integer",
    "float",       "number",    "string",      "mapping", "iterable", "sequence", "callable",
    "even",        "odd",       "divisibleby", "eq",      "equalto",  "==",       "ne",
    "!=",          "lt",        "lessthan",    "<",       "le",       "<=",       "gt",
    "greaterthan", ">",         "ge",          ">=",      "in",       "sameas",   "lower",
    "upper",       "escaped",   "filter",      "test"};

int64_t RequireInt(const Value& v, const std::string& test) {
  if (!v.is_int() && !v.is_bool()) {
    throw TemplateError("TypeError: test '" + test + "' needs an integer, got " + TypeName(v));
  }
  return v.as_int();
}

bool SameAs(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kUndefined:
      return true;
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kString:
      return Equals(a, b);
    default:
      return a.identity() == b.identity();
  }
}

}  // namespace

bool IsKnownTest(const std::string& name) {
  return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

bool CallTest(const std::string& name, const Value& v, const CallArgs& args) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  // Jinja2's Undefined is iterable (empty) and has __len__/__getitem__.
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "callable") return v.is_callable();
  if (name == "even") return RequireInt(v, name) % 2 == 0;
  if (name == "odd") return RequireInt(v, name) % 2 != 0;
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    CallArgs none;
    return Truthy(GetAttribute(v, "is" + name).callable().call(none));
  }
  if (name == "filter" || name == "test") {
    if (!v.is_string()) return false;
    return name == "filter" ? IsKnownFilter(v.as_string()) : IsKnownTest(v.as_string());
  }
  BoundArgs a(name, args, {"other"});
  const Value& other = a.Get(0);
  if (name == "divisibleby") {
    int64_t d = RequireInt(other, name);
    if (d == 0) throw TemplateError("ZeroDivisionError: integer division or modulo by zero");
    return RequireInt(v, name) % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return Equals(v, other);
  if (name == "ne" || name == "!=") return !Equals(v, other);
  if (name == "lt" || name == "lessthan" || name == "<") return Compare(v, other) < 0;
  if (name == "le" || name == "<=") return Compare(v, other) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return Compare(v, other) > 0;
  if (name == "ge" || name == ">=") return Compare(v, other) >= 0;
  if (name == "in") return Contains(other, v);
  if (name == "sameas") return SameAs(v, other);
  throw TemplateError("no test named '" + name + "'");
}

}  // namespace tessera::chat
