// GGUF metadata values: scalars, strings and (nested) arrays, with typed accessors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tessera::gguf {

// The value type ids of the format (spec section 2.1).
enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint32", "string", "array", ...; "type#N" for an id outside the format.
std::string ValueTypeName(uint32_t id);
inline std::string ValueTypeName(ValueType t) { return ValueTypeName(static_cast<uint32_t>(t)); }
bool IsValidValueType(uint32_t id);
bool IsIntegerType(ValueType t);

class Value;

// An array value: the declared element type and the elements (each of that type; for arrays
// of arrays each element is itself an array).
struct Array {
  ValueType element_type = ValueType::kUint8;
  std::vector<Value> items;
};

// One metadata value. Construct with the named factories so the wire type is explicit.
class Value {
 public:
  Value() : type_(ValueType::kUint8), data_(uint64_t{0}) {}

  static Value U8(uint8_t v) { return Value(ValueType::kUint8, uint64_t{v}); }
  static Value I8(int8_t v) { return Value(ValueType::kInt8, int64_t{v}); }
  static Value U16(uint16_t v) { return Value(ValueType::kUint16, uint64_t{v}); }
  static Value I16(int16_t v) { return Value(ValueType::kInt16, int64_t{v}); }
  static Value U32(uint32_t v) { return Value(ValueType::kUint32, uint64_t{v}); }
  static Value I32(int32_t v) { return Value(ValueType::kInt32, int64_t{v}); }
  static Value U64(uint64_t v) { return Value(ValueType::kUint64, v); }
  static Value I64(int64_t v) { return Value(ValueType::kInt64, v); }
  static Value F32(float v) { return Value(ValueType::kFloat32, double{v}); }
  static Value F64(double v) { return Value(ValueType::kFloat64, v); }
  static Value Bool(bool v) { return Value(ValueType::kBool, v); }
  static Value String(std::string v) { return Value(ValueType::kString, std::move(v)); }
  static Value MakeArray(ValueType element_type, std::vector<Value> items) {
    return Value(ValueType::kArray, Array{element_type, std::move(items)});
  }
  // Convenience builders for homogeneous arrays.
  static Value StringArray(const std::vector<std::string>& v);
  static Value F32Array(const std::vector<float>& v);
  static Value I32Array(const std::vector<int32_t>& v);
  static Value U32Array(const std::vector<uint32_t>& v);

  ValueType type() const { return type_; }
  bool is_array() const { return type_ == ValueType::kArray; }
  bool is_string() const { return type_ == ValueType::kString; }

  // Any integer type (and bool) as int64 / uint64; nullopt for other types or when the
  // value does not fit the target.
  std::optional<int64_t> AsInt() const;
  std::optional<uint64_t> AsUint() const;
  // FLOAT32 / FLOAT64 (and integers, converted); nullopt for strings, bools and arrays.
  std::optional<double> AsDouble() const;
  std::optional<bool> AsBool() const;
  // The string, or nullptr when not a string.
  const std::string* AsString() const;
  // The array, or nullptr when not an array.
  const Array* AsArray() const;

  // Human-readable rendering; long arrays are summarised ("[151552 strings]").
  std::string DebugString(size_t max_items = 8) const;

  friend bool operator==(const Value& a, const Value& b);

 private:
  using Storage = std::variant<uint64_t, int64_t, double, bool, std::string, Array>;
  Value(ValueType t, Storage d) : type_(t), data_(std::move(d)) {}

  ValueType type_;
  Storage data_;
};

bool operator==(const Array& a, const Array& b);

}  // namespace tessera::gguf
