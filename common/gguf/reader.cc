#include "common/gguf/reader.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/util/strings.h"

namespace tessera::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
// Arrays of arrays are allowed by the format; this bounds the recursion on hostile input.
constexpr int kMaxArrayDepth = 8;

// A bounds-checked little-endian cursor over the file's bytes. Every read names the field it
// reads so that errors say what was being parsed and where.
class Cursor {
 public:
  Cursor(absl::Span<const uint8_t> bytes, const std::string& file) : bytes_(bytes), file_(file) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  absl::Status Error(uint64_t at, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ": offset ", at, ": ", what));
  }

  template <typename T>
  absl::StatusOr<T> Read(absl::string_view field) {
    if (remaining() < sizeof(T)) {
      return Error(pos_,
                   absl::StrCat(field, ": file ends after ", bytes_.size(), " bytes (truncated?)"));
    }
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  absl::StatusOr<std::string> ReadString(absl::string_view field) {
    uint64_t at = pos_;
    auto len = Read<uint64_t>(field);
    if (!len.ok()) return len.status();
    if (*len > remaining()) {
      return Error(at, absl::StrCat(field, ": string length ", *len, " exceeds the ", remaining(),
                                    " bytes left in the file"));
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), *len);
    pos_ += *len;
    return s;
  }

 private:
  absl::Span<const uint8_t> bytes_;
  const std::string& file_;
  uint64_t pos_ = 0;
};

// Fewest bytes one value of type `t` can occupy; used to reject counts that cannot fit.
uint64_t MinValueBytes(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kString:
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
      return 8;
    case ValueType::kArray:
      return 12;
  }
  return 1;
}

#define TESSERA_ASSIGN(lhs, expr)               \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *std::move(lhs##_or)

absl::StatusOr<Value> ReadValue(Cursor& in, ValueType type, const std::string& key, int depth);

absl::StatusOr<Value> ReadScalar(Cursor& in, ValueType type, const std::string& field) {
  switch (type) {
    case ValueType::kUint8: {
      TESSERA_ASSIGN(v, in.Read<uint8_t>(field));
      return Value::U8(v);
    }
    case ValueType::kInt8: {
      TESSERA_ASSIGN(v, in.Read<int8_t>(field));
      return Value::I8(v);
    }
    case ValueType::kUint16: {
      TESSERA_ASSIGN(v, in.Read<uint16_t>(field));
      return Value::U16(v);
    }
    case ValueType::kInt16: {
      TESSERA_ASSIGN(v, in.Read<int16_t>(field));
      return Value::I16(v);
    }
    case ValueType::kUint32: {
      TESSERA_ASSIGN(v, in.Read<uint32_t>(field));
      return Value::U32(v);
    }
    case ValueType::kInt32: {
      TESSERA_ASSIGN(v, in.Read<int32_t>(field));
      return Value::I32(v);
    }
    case ValueType::kFloat32: {
      TESSERA_ASSIGN(v, in.Read<float>(field));
      return Value::F32(v);
    }
    case ValueType::kBool: {
      uint64_t at = in.pos();
      TESSERA_ASSIGN(v, in.Read<uint8_t>(field));
      if (v > 1) return in.Error(at, absl::StrCat(field, ": bool value ", v, " is not 0 or 1"));
      return Value::Bool(v != 0);
    }
    case ValueType::kString: {
      TESSERA_ASSIGN(v, in.ReadString(field));
      return Value::String(std::move(v));
    }
    case ValueType::kUint64: {
      TESSERA_ASSIGN(v, in.Read<uint64_t>(field));
      return Value::U64(v);
    }
    case ValueType::kInt64: {
      TESSERA_ASSIGN(v, in.Read<int64_t>(field));
      return Value::I64(v);
    }
    case ValueType::kFloat64: {
      TESSERA_ASSIGN(v, in.Read<double>(field));
      return Value::F64(v);
    }
    case ValueType::kArray:
      break;
  }
  return absl::InternalError("ReadScalar: array");
}

absl::StatusOr<Value> ReadArray(Cursor& in, const std::string& key, int depth) {
  uint64_t at = in.pos();
  if (depth >= kMaxArrayDepth) {
    return in.Error(
        at, absl::StrCat("key '", key, "': arrays nested deeper than ", kMaxArrayDepth, " levels"));
  }
  TESSERA_ASSIGN(elem_id, in.Read<uint32_t>(absl::StrCat("key '", key, "' array element type")));
  if (!IsValidValueType(elem_id)) {
    return in.Error(at, absl::StrCat("key '", key, "': array element type ", elem_id,
                                     " is not a GGUF value type"));
  }
  ValueType elem = static_cast<ValueType>(elem_id);
  TESSERA_ASSIGN(count, in.Read<uint64_t>(absl::StrCat("key '", key, "' array length")));
  if (count > in.remaining() / MinValueBytes(elem)) {
    return in.Error(at, absl::StrCat("key '", key, "': array of ", count, " ", ValueTypeName(elem),
                                     " cannot fit in the ", in.remaining(), " bytes left"));
  }
  std::vector<Value> items;
  items.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    TESSERA_ASSIGN(v, ReadValue(in, elem, key, depth + 1));
    items.push_back(std::move(v));
  }
  return Value::MakeArray(elem, std::move(items));
}

absl::StatusOr<Value> ReadValue(Cursor& in, ValueType type, const std::string& key, int depth) {
  if (type == ValueType::kArray) return ReadArray(in, key, depth);
  return ReadScalar(in, type, absl::StrCat("key '", key, "' value"));
}

}  // namespace

std::string TensorInfo::ShapeString() const {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  auto mapping = MappedFile::Open(path);
  if (!mapping.ok()) return mapping.status();
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->bytes_ = (*mapping)->bytes();
  f->mapping_ = *std::move(mapping);
  f->name_ = path;
  absl::Status s = f->ParseAll();
  if (!s.ok()) return s;
  return f;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(absl::Span<const uint8_t> bytes,
                                                          std::string name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->bytes_ = bytes;
  f->name_ = std::move(name);
  absl::Status s = f->ParseAll();
  if (!s.ok()) return s;
  return f;
}

const TensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(ToAbsl(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::Status GgufFile::ParseAll() {
  Cursor in(bytes_, name_);
  TESSERA_ASSIGN(magic, in.Read<uint32_t>("magic"));
  if (magic != kMagic) {
    return in.Error(0, absl::StrFormat("magic: expected \"GGUF\" (47 47 55 46), file has %08x "
                                       "(not a GGUF file)",
                                       __builtin_bswap32(magic)));
  }
  TESSERA_ASSIGN(version, in.Read<uint32_t>("version"));
  if ((version & 0xffff) == 0 && __builtin_bswap32(version) <= 3) {
    return absl::UnimplementedError(
        absl::StrCat(name_, ": offset 4: version: this is a big-endian GGUF file (version ",
                     __builtin_bswap32(version),
                     " byte-swapped); only little-endian files are "
                     "supported"));
  }
  if (version == 1) {
    return absl::UnimplementedError(
        absl::StrCat(name_,
                     ": offset 4: version: GGUF version 1 (32-bit counts) is not supported; "
                     "re-convert the model with a current converter (versions 2 and 3 are read)"));
  }
  if (version != 2 && version != 3) {
    return in.Error(4, absl::StrCat("version: expected 2 or 3, file has ", version));
  }
  version_ = version;

  TESSERA_ASSIGN(n_tensors, in.Read<uint64_t>("tensor count"));
  TESSERA_ASSIGN(n_kv, in.Read<uint64_t>("metadata key count"));
  // The smallest tensor info is 24 bytes (empty name, no dims, type, offset); the smallest
  // key/value 13 (empty key, type, one byte). Counts beyond what the file can hold are lies.
  if (n_tensors > in.remaining() / 24) {
    return in.Error(8, absl::StrCat("tensor count: ", n_tensors,
                                    " tensors cannot fit in a file of ", bytes_.size(), " bytes"));
  }
  if (n_kv > in.remaining() / 13) {
    return in.Error(16, absl::StrCat("metadata key count: ", n_kv, " keys cannot fit in a file of ",
                                     bytes_.size(), " bytes"));
  }

  for (uint64_t i = 0; i < n_kv; ++i) {
    uint64_t at = in.pos();
    TESSERA_ASSIGN(key, in.ReadString(absl::StrCat("metadata key #", i, " name")));
    if (key.empty()) return in.Error(at, absl::StrCat("metadata key #", i, ": empty key"));
    uint64_t type_at = in.pos();
    TESSERA_ASSIGN(type_id, in.Read<uint32_t>(absl::StrCat("key '", key, "' type")));
    if (!IsValidValueType(type_id)) {
      return in.Error(type_at, absl::StrCat("key '", key, "': value type ", type_id,
                                            " is not a GGUF value type (0-12)"));
    }
    TESSERA_ASSIGN(value, ReadValue(in, static_cast<ValueType>(type_id), key, 0));
    if (!metadata_.Add(key, std::move(value))) {
      return in.Error(at, absl::StrCat("key '", key, "' appears twice"));
    }
  }

  if (const Value* a = metadata_.Find("general.alignment")) {
    auto align = a->AsUint();
    if (!IsIntegerType(a->type()) || !align || *align == 0 || *align > (1u << 30) ||
        (*align & (*align - 1)) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": key 'general.alignment': expected a power of two, file has ",
                       a->DebugString()));
    }
    alignment_ = static_cast<uint32_t>(*align);
  }

  tensors_.reserve(n_tensors);
  tensor_index_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    uint64_t at = in.pos();
    TensorInfo t;
    TESSERA_ASSIGN(name, in.ReadString(absl::StrCat("tensor #", i, " name")));
    t.name = std::move(name);
    std::string what = absl::StrCat("tensor '", t.name, "'");
    if (t.name.empty()) return in.Error(at, absl::StrCat("tensor #", i, ": empty name"));
    if (t.name.size() >= kMaxTensorName) {
      return in.Error(at, absl::StrCat(what, ": name is ", t.name.size(),
                                       " bytes; names must be shorter than ", kMaxTensorName));
    }
    uint64_t dims_at = in.pos();
    TESSERA_ASSIGN(n_dims, in.Read<uint32_t>(absl::StrCat(what, " n_dims")));
    if (n_dims > kMaxDims) {
      return in.Error(dims_at, absl::StrCat(what, ": n_dims ", n_dims, " exceeds ", kMaxDims));
    }
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim_at = in.pos();
      TESSERA_ASSIGN(dim, in.Read<int64_t>(absl::StrCat(what, " dims[", d, "]")));
      if (dim < 0) {
        return in.Error(dim_at, absl::StrCat(what, ": dims[", d, "] is negative (", dim, ")"));
      }
      if (dim != 0 && n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) /
                                       static_cast<uint64_t>(dim)) {
        return in.Error(dim_at,
                        absl::StrCat(what, ": element count overflows at dims[", d, "] = ", dim));
      }
      n_elements *= static_cast<uint64_t>(dim);
      t.dims.push_back(dim);
    }
    t.n_elements = n_elements;
    uint64_t type_at = in.pos();
    TESSERA_ASSIGN(type_id, in.Read<uint32_t>(absl::StrCat(what, " type")));
    const GgmlTypeInfo* type = LookupGgmlType(type_id);
    if (type == nullptr) {
      return in.Error(type_at, absl::StrCat(what, ": type id ", type_id,
                                            " is not a ggml type (unknown or retired)"));
    }
    t.type = type->type;
    if (type->block_bytes == 0) {
      return absl::UnimplementedError(
          absl::StrCat(name_, ": offset ", type_at, ": ", what, ": type ", ToAbsl(type->name),
                       " has a block layout this reader does not know"));
    }
    uint64_t row = t.dims.empty() ? 1 : static_cast<uint64_t>(t.dims[0]);
    if (row % type->block_elems != 0) {
      return in.Error(
          dims_at, absl::StrCat(what, ": row length dims[0] = ", row, " is not a multiple of the ",
                                ToAbsl(type->name), " block size ", type->block_elems));
    }
    auto n_bytes = GgmlTypeBytes(*type, n_elements);
    if (!n_bytes) return in.Error(dims_at, absl::StrCat(what, ": byte size overflows"));
    t.n_bytes = *n_bytes;
    uint64_t off_at = in.pos();
    TESSERA_ASSIGN(offset, in.Read<uint64_t>(absl::StrCat(what, " offset")));
    if (offset % alignment_ != 0) {
      return in.Error(off_at, absl::StrCat(what, ": data offset ", offset,
                                           " is not a multiple of the alignment ", alignment_));
    }
    t.offset = offset;
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
      return in.Error(at, absl::StrCat(what, " appears twice"));
    }
    tensors_.push_back(std::move(t));
  }
  header_bytes_ = in.pos();

  // The data blob starts at the end of the infos rounded up to the alignment.
  data_offset_ = (header_bytes_ + alignment_ - 1) / alignment_ * alignment_;
  if (tensors_.empty()) return absl::OkStatus();

  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (TensorInfo& t : tensors_) {
    uint64_t end;
    if (__builtin_add_overflow(data_offset_, t.offset, &t.file_offset) ||
        __builtin_add_overflow(t.file_offset, t.n_bytes, &end) || end > bytes_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name_, ": tensor '", t.name, "': data at offset ", t.offset, " + ", t.n_bytes, " bytes (",
          t.ShapeString(), " ", GgmlTypeName(static_cast<uint32_t>(t.type)),
          ") runs past the end of the file (", bytes_.size(), " bytes; data starts at ",
          data_offset_, ")"));
    }
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const TensorInfo& prev = tensors_[order[i - 1]];
    const TensorInfo& cur = tensors_[order[i]];
    if (prev.n_bytes > 0 && cur.n_bytes > 0 && prev.offset + prev.n_bytes > cur.offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          name_, ": tensor '", cur.name, "' (data offset ", cur.offset, ") overlaps tensor '",
          prev.name, "' (offset ", prev.offset, ", ", prev.n_bytes, " bytes)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::gguf
