// The value type the template engine computes with: Python's data model as Jinja2 sees it
// (None, bool, int, float, str, list, dict in insertion order, namespace, callables) plus
// Jinja2's default Undefined. Internal to the engine: errors are thrown as TemplateError
// (common/chat/template_error.h) and turned into absl::Status at the public API.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::chat {

class Value;
class ValueDict;
using ValueList = std::vector<Value>;

// Arguments of a call: positional, then keyword in call order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A function value: a global (range, namespace...), a macro, or a bound method.
struct Callable {
  std::string name;
  std::function<Value(CallArgs&)> call;
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable,
  };

  // Undefined; `message` is the error raised when it is misused ("'x' is undefined").
  Value() = default;
  static Value Undefined(std::string message);
  static Value None();
  explicit Value(bool b) : kind_(Kind::kBool), int_(b ? 1 : 0) {}
  explicit Value(int64_t i) : kind_(Kind::kInt), int_(i) {}
  explicit Value(int i) : kind_(Kind::kInt), int_(i) {}
  explicit Value(double f) : kind_(Kind::kFloat), float_(f) {}
  explicit Value(std::string s) : kind_(Kind::kString), str_(std::move(s)) {}
  explicit Value(std::string_view s) : kind_(Kind::kString), str_(s) {}
  explicit Value(const char* s) : kind_(Kind::kString), str_(s) {}
  static Value List(ValueList items);
  // A Python tuple: a list that prints as (a, b) and never equals a list.
  static Value Tuple(ValueList items);
  static Value Dict(ValueDict dict);
  static Value Namespace(ValueDict attrs);
  static Value Function(std::string name, std::function<Value(CallArgs&)> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python numbers: bool is an int subclass.
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_string() const { return kind_ == Kind::kString; }
  // Lists and tuples.
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return int_ != 0; }
  // Integer value of an int or bool.
  int64_t as_int() const { return int_; }
  // Numeric value of an int, bool or float.
  double as_double() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return str_; }
  const std::string& undefined_message() const { return str_; }
  const ValueList& list() const { return *list_; }
  const ValueDict& dict() const { return *dict_; }
  // The namespace's attributes; shared by every copy of the value (namespaces are mutable).
  ValueDict& namespace_attrs() const { return *dict_; }
  const Callable& callable() const { return *fn_; }
  // Identity of a container, for the `sameas` test.
  const void* identity() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool tuple_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;
  std::shared_ptr<const ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<const Callable> fn_;
};

// A str-keyed mapping that keeps insertion order, as Python dicts do.
class ValueDict {
 public:
  const Value* Find(std::string_view key) const;
  // Adds the key at the end, or replaces its value in place.
  void Set(std::string key, Value value);
  // Adds a key known to be new (callers building a fresh dict).
  void Append(std::string key, Value value) {
    entries_.emplace_back(std::move(key), std::move(value));
  }
  void Reserve(size_t n) { entries_.reserve(n); }
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

// Python's truth value (Undefined is false).
bool Truthy(const Value& v);
// Python `==` (Undefined equals only Undefined, as Jinja2's Undefined.__eq__ says).
bool Equals(const Value& a, const Value& b);
// Python ordering for `<`: numbers with numbers, str with str, lists element-wise; other
// pairs throw TypeError as Python does. Returns <0, 0 or >0.
int Compare(const Value& a, const Value& b);
// Python str(): strings as they are, True/False/None, containers as repr.
std::string ToStr(const Value& v);
// Python repr(): 'quoted' strings, [1, 'a'], {'k': v}.
std::string Repr(const Value& v);
// Python's type name, for messages and Jinja2's "'dict object' has no attribute" hints.
std::string TypeName(const Value& v);
// Python float repr: shortest round-trip digits, "1.0", "1e-05", "inf", "nan".
std::string FloatRepr(double d);

}  // namespace tessera::chat
