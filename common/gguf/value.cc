#include "common/gguf/value.h"

#include <limits>
#include <type_traits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::gguf {

std::string ValueTypeName(uint32_t id) {
  static constexpr const char* kNames[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                           "int32",  "float32", "bool",   "string", "array",
                                           "uint64", "int64",   "float64"};
  if (id < std::size(kNames)) return kNames[id];
  return absl::StrCat("type#", id);
}

bool IsValidValueType(uint32_t id) { return id <= static_cast<uint32_t>(ValueType::kFloat64); }

bool IsIntegerType(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kUint16:
    case ValueType::kInt16:
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kUint64:
    case ValueType::kInt64:
      return true;
    default:
      return false;
  }
}

namespace {

template <typename T>
Value ArrayOf(ValueType elem, const std::vector<T>& v, Value (*make)(T)) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (const T& x : v) items.push_back(make(x));
  return Value::MakeArray(elem, std::move(items));
}

}  // namespace

Value Value::StringArray(const std::vector<std::string>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (const std::string& s : v) items.push_back(Value::String(s));
  return MakeArray(ValueType::kString, std::move(items));
}
Value Value::F32Array(const std::vector<float>& v) { return ArrayOf(ValueType::kFloat32, v, &F32); }
Value Value::I32Array(const std::vector<int32_t>& v) { return ArrayOf(ValueType::kInt32, v, &I32); }
Value Value::U32Array(const std::vector<uint32_t>& v) {
  return ArrayOf(ValueType::kUint32, v, &U32);
}

std::optional<int64_t> Value::AsInt() const {
  if (const auto* u = std::get_if<uint64_t>(&data_)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&data_)) return *i;
  if (const auto* b = std::get_if<bool>(&data_)) return *b ? 1 : 0;
  return std::nullopt;
}

std::optional<uint64_t> Value::AsUint() const {
  if (const auto* u = std::get_if<uint64_t>(&data_)) return *u;
  if (const auto* i = std::get_if<int64_t>(&data_)) {
    if (*i < 0) return std::nullopt;
    return static_cast<uint64_t>(*i);
  }
  if (const auto* b = std::get_if<bool>(&data_)) return *b ? 1 : 0;
  return std::nullopt;
}

std::optional<double> Value::AsDouble() const {
  if (const auto* d = std::get_if<double>(&data_)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&data_)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&data_)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> Value::AsBool() const {
  if (const auto* b = std::get_if<bool>(&data_)) return *b;
  return std::nullopt;
}

const std::string* Value::AsString() const { return std::get_if<std::string>(&data_); }
const Array* Value::AsArray() const { return std::get_if<Array>(&data_); }

std::string Value::DebugString(size_t max_items) const {
  switch (type_) {
    case ValueType::kString:
      return absl::StrCat("\"", absl::CHexEscape(*AsString()), "\"");
    case ValueType::kBool:
      return *AsBool() ? "true" : "false";
    case ValueType::kFloat32:
    case ValueType::kFloat64:
      return absl::StrFormat("%g", *AsDouble());
    case ValueType::kArray: {
      const Array& a = *AsArray();
      if (a.items.size() > max_items) {
        return absl::StrCat("[", a.items.size(), " ", ValueTypeName(a.element_type), "]");
      }
      std::string out = "[";
      for (size_t i = 0; i < a.items.size(); ++i) {
        if (i) out += ", ";
        out += a.items[i].DebugString(max_items);
      }
      return out + "]";
    }
    default:
      if (const auto* u = std::get_if<uint64_t>(&data_)) return absl::StrCat(*u);
      return absl::StrCat(std::get<int64_t>(data_));
  }
}

bool operator==(const Array& a, const Array& b) {
  return a.element_type == b.element_type && a.items == b.items;
}

bool operator==(const Value& a, const Value& b) { return a.type_ == b.type_ && a.data_ == b.data_; }

}  // namespace tessera::gguf
