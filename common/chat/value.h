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
#include <variant>
#include <vector>

namespace tessera::chat {

class Value;
class ValueDict;
using ValueList = std::vector<Value>;

// Byte ranges [first, second) of a string that came from request data (the messages, tools
// and documents of RenderTracked): sorted, non-empty, and neither overlapping nor touching.
// Strings carry them so that the tokenizer can refuse to read control tokens out of what a
// client wrote (common/chat/taint.h builds and combines them).
using TaintSpans = std::vector<std::pair<size_t, size_t>>;
// Shared and immutable; null means untainted, which is what every template literal, number
// and plain Render() value is.
using TaintPtr = std::shared_ptr<const TaintSpans>;

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
  explicit Value(bool b) : kind_(Kind::kBool), data_(int64_t{b ? 1 : 0}) {}
  explicit Value(int64_t i) : kind_(Kind::kInt), data_(i) {}
  explicit Value(int i) : kind_(Kind::kInt), data_(int64_t{i}) {}
  explicit Value(double f) : kind_(Kind::kFloat), data_(f) {}
  explicit Value(std::string s) : kind_(Kind::kString), data_(std::move(s)) {}
  explicit Value(std::string_view s) : kind_(Kind::kString), data_(std::string(s)) {}
  explicit Value(const char* s) : kind_(Kind::kString), data_(std::string(s)) {}
  // A string whose bytes in `*taint` came from request data (`taint` may be null). The spans
  // must lie within `s` and follow TaintSpans' rules.
  Value(std::string s, TaintPtr taint) : kind_(Kind::kString), data_(std::move(s)) {
    if (taint != nullptr) Taint(std::move(taint));
  }
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

  bool as_bool() const { return as_int() != 0; }
  // Integer value of an int or bool (0 for other kinds).
  int64_t as_int() const {
    const int64_t* i = std::get_if<int64_t>(&data_);
    return i ? *i : 0;
  }
  // Numeric value of an int, bool or float.
  double as_double() const {
    const double* d = std::get_if<double>(&data_);
    return d ? *d : static_cast<double>(as_int());
  }
  // The text of a string (empty for other kinds).
  const std::string& as_string() const;
  const std::string& undefined_message() const { return as_string(); }
  // Moves the text out of a string value (which is left empty and untainted), so `a + b + c`
  // chains can append in place instead of copying (a tainted string's text is copied when
  // another value shares it).
  std::string TakeString() {
    if (std::string* s = std::get_if<std::string>(&data_)) return std::move(*s);
    return TakeTaintedString();
  }
  // The request-data spans of a string; null when it has none (and for every other kind).
  // Taint never changes what a value compares, hashes or measures as: only where it came from.
  const TaintSpans* taint() const {
    const TaintedPtr* t = std::get_if<TaintedPtr>(&data_);
    return t ? (*t)->taint.get() : nullptr;
  }
  // As taint(), shared (null when untainted).
  TaintPtr shared_taint() const {
    const TaintedPtr* t = std::get_if<TaintedPtr>(&data_);
    return t ? (*t)->taint : nullptr;
  }
  const ValueList& list() const { return *std::get<ListPtr>(data_); }
  const ValueDict& dict() const { return *std::get<DictPtr>(data_); }
  // The namespace's attributes; shared by every copy of the value (namespaces are mutable).
  ValueDict& namespace_attrs() const { return *std::get<DictPtr>(data_); }
  const Callable& callable() const { return *std::get<FunctionPtr>(data_); }
  // Identity of a container, for the `sameas` test.
  const void* identity() const;

 private:
  using ListPtr = std::shared_ptr<const ValueList>;
  using DictPtr = std::shared_ptr<ValueDict>;
  using FunctionPtr = std::shared_ptr<const Callable>;
  // A tainted string lives out of line, so that Value stays as small (and as cheap to copy)
  // as it is without provenance: renders without request data never create one. Shared by
  // copies and never changed, except that TakeString moves the text out of the last owner.
  struct TaintedString {
    std::string text;
    TaintPtr taint;  // never null
  };
  using TaintedPtr = std::shared_ptr<TaintedString>;

  // Moves this string out of line with its spans.
  void Taint(TaintPtr taint);
  std::string TakeTaintedString();

  Kind kind_ = Kind::kUndefined;
  bool tuple_ = false;
  // Strings hold str (TaintedPtr when tainted) and Undefined's message; containers are
  // shared, so copies are cheap.
  std::variant<int64_t, double, std::string, ListPtr, DictPtr, FunctionPtr, TaintedPtr> data_;
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

  // Whether the keys came from request data (a JSON object under RenderTracked's request keys,
  // or a dict built from such keys): the key strings the dict hands out (iteration, items(),
  // keys()) are then tainted as a whole. Lookups ignore it.
  bool keys_tainted() const { return keys_tainted_; }
  void set_keys_tainted(bool tainted) { keys_tainted_ = tainted; }
  // A key as a string value, tainted when keys_tainted().
  Value KeyValue(const std::string& key) const;

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  bool keys_tainted_ = false;
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
