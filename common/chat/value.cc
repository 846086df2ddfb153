#include "common/chat/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/chat/py_string.h"
#include "common/chat/template_error.h"

namespace tessera::chat {

Value Value::Undefined(std::string message) {
  Value v;
  v.data_ = std::move(message);
  return v;
}

void Value::Taint(TaintPtr taint) {
  std::string text = std::move(std::get<std::string>(data_));
  data_ = std::make_shared<TaintedString>(TaintedString{std::move(text), std::move(taint)});
}

const std::string& Value::as_string() const {
  static const std::string* const kEmpty = new std::string();
  if (const std::string* s = std::get_if<std::string>(&data_)) return *s;
  if (const TaintedPtr* t = std::get_if<TaintedPtr>(&data_)) return (*t)->text;
  return *kEmpty;
}

std::string Value::TakeTaintedString() {
  TaintedPtr* t = std::get_if<TaintedPtr>(&data_);
  if (t == nullptr) return std::string();
  // Values are never shared across threads (a template's own values are untainted), so a
  // use count of 1 means no other value can see the text.
  std::string text = t->use_count() == 1 ? std::move((*t)->text) : (*t)->text;
  data_ = std::string();
  return text;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::List(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  v.data_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}

Value Value::Tuple(ValueList items) {
  Value v = List(std::move(items));
  v.tuple_ = true;
  return v;
}

Value Value::Dict(ValueDict dict) {
  Value v;
  v.kind_ = Kind::kDict;
  v.data_ = std::make_shared<ValueDict>(std::move(dict));
  return v;
}

Value Value::Namespace(ValueDict attrs) {
  Value v = Dict(std::move(attrs));
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::Function(std::string name, std::function<Value(CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.data_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

const void* Value::identity() const {
  switch (kind_) {
    case Kind::kList:
      return std::get<ListPtr>(data_).get();
    case Kind::kDict:
    case Kind::kNamespace:
      return std::get<DictPtr>(data_).get();
    case Kind::kCallable:
      return std::get<FunctionPtr>(data_).get();
    default:
      return nullptr;
  }
}

const Value* ValueDict::Find(std::string_view key) const {
  for (const auto& [k, v] : entries_) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value ValueDict::KeyValue(const std::string& key) const {
  if (!keys_tainted_ || key.empty()) return Value(key);
  return Value(key, std::make_shared<const TaintSpans>(TaintSpans{{0, key.size()}}));
}

void ValueDict::Set(std::string key, Value value) {
  for (auto& [k, v] : entries_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_double() != 0.0;
    case Value::Kind::kString:
      return !v.as_string().empty();
    case Value::Kind::kList:
      return !v.list().empty();
    case Value::Kind::kDict:
      return !v.dict().empty();
    case Value::Kind::kNamespace:
    case Value::Kind::kCallable:
      return true;
  }
  return false;
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const ValueList& x = a.list();
      const ValueList& y = b.list();
      if (x.size() != y.size() || a.is_tuple() != b.is_tuple()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, v] : a.dict().entries()) {
        const Value* other = b.dict().Find(k);
        if (other == nullptr || !Equals(v, *other)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

int Compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order.
    int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    const ValueList& x = a.list();
    const ValueList& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equals(x[i], y[i])) return Compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw TemplateError("TypeError: '<' not supported between instances of '" + TypeName(a) +
                      "' and '" + TypeName(b) + "'");
}

std::string TypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      return "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kNamespace:
      return "Namespace";
    case Value::Kind::kCallable:
      return "function";
  }
  return "object";
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's layout (repr switches to exponent form when
  // the decimal point falls outside (-4, 16]).
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), std::fabs(d), std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  int exp10 = std::stoi(sci.substr(e + 1));
  int decpt = exp10 + 1;
  int nd = static_cast<int>(digits.size());
  std::string out = d < 0 ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(-decpt, '0') + digits;
    } else if (decpt < nd) {
      out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    } else {
      out += digits + std::string(decpt - nd, '0') + ".0";
    }
  } else {
    out += digits.substr(0, 1);
    if (nd > 1) {
      out += '.';
      out += digits.substr(1);
    }
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  }
  return out;
}

namespace {

std::string StringRepr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : DecodeUtf8(s)) {
    char buf[16];
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      out += buf;
    } else if ((cp >= 0xDC80 && cp <= 0xDCFF) || cp == 0x2028 || cp == 0x2029) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      AppendUtf8(cp, &out);
    }
  }
  out.push_back(quote);
  return out;
}

}  // namespace

std::string Repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kString:
      return StringRepr(v.as_string());
    case Value::Kind::kList: {
      std::string out = v.is_tuple() ? "(" : "[";
      bool first = true;
      for (const Value& item : v.list()) {
        if (!first) out += ", ";
        first = false;
        out += Repr(item);
      }
      if (v.is_tuple()) return out + (v.list().size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, item] : v.dict().entries()) {
        if (!first) out += ", ";
        first = false;
        out += StringRepr(k) + ": " + Repr(item);
      }
      return out + "}";
    }
    case Value::Kind::kNamespace: {
      Value as_dict = Value::Dict(v.namespace_attrs());
      return "<Namespace " + Repr(as_dict) + ">";
    }
    default:
      return ToStr(v);
  }
}

std::string ToStr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return FloatRepr(v.as_double());
    case Value::Kind::kString:
      return v.as_string();
    case Value::Kind::kCallable:
      return "<function " + v.callable().name + ">";
    default:
      return Repr(v);
  }
}

}  // namespace tessera::chat
