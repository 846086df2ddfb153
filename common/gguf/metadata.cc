#include "common/gguf/metadata.h"

#include "absl/strings/str_cat.h"
#include "common/util/strings.h"

namespace tessera::gguf {
namespace {

absl::Status Missing(std::string_view key) {
  return absl::NotFoundError(absl::StrCat("metadata key '", ToAbsl(key), "' is missing"));
}

absl::Status WrongType(std::string_view key, absl::string_view expected, const Value& v) {
  std::string found = ValueTypeName(v.type());
  if (const Array* a = v.AsArray())
    found = absl::StrCat("array of ", ValueTypeName(a->element_type));
  return absl::InvalidArgumentError(
      absl::StrCat("metadata key '", ToAbsl(key), "': expected ", expected, ", file has ", found));
}

}  // namespace

bool Metadata::Add(std::string key, Value value) {
  if (index_.contains(key)) return false;
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
  return true;
}

void Metadata::Set(std::string key, Value value) {
  auto it = index_.find(ToAbsl(key));
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  Add(std::move(key), std::move(value));
}

bool Metadata::Erase(std::string_view key) {
  auto it = index_.find(ToAbsl(key));
  if (it == index_.end()) return false;
  entries_.erase(entries_.begin() + static_cast<ptrdiff_t>(it->second));
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
  return true;
}

const Value* Metadata::Find(std::string_view key) const {
  auto it = index_.find(ToAbsl(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

absl::StatusOr<std::string> Metadata::GetString(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(key);
  if (!v->AsString()) return WrongType(key, "string", *v);
  return *v->AsString();
}

absl::StatusOr<int64_t> Metadata::GetInt(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(key);
  if (!IsIntegerType(v->type())) return WrongType(key, "an integer", *v);
  auto i = v->AsInt();
  if (!i)
    return absl::OutOfRangeError(absl::StrCat("metadata key '", ToAbsl(key), "': value too large"));
  return *i;
}

absl::StatusOr<uint64_t> Metadata::GetUint(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(key);
  if (!IsIntegerType(v->type())) return WrongType(key, "an unsigned integer", *v);
  auto u = v->AsUint();
  if (!u)
    return absl::OutOfRangeError(
        absl::StrCat("metadata key '", ToAbsl(key), "': value is negative"));
  return *u;
}

absl::StatusOr<double> Metadata::GetFloat(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(key);
  if (v->type() != ValueType::kFloat32 && v->type() != ValueType::kFloat64 &&
      !IsIntegerType(v->type())) {
    return WrongType(key, "a number", *v);
  }
  return *v->AsDouble();
}

absl::StatusOr<bool> Metadata::GetBool(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(key);
  if (v->type() != ValueType::kBool) return WrongType(key, "bool", *v);
  return *v->AsBool();
}

absl::StatusOr<std::vector<std::string>> Metadata::GetStringArray(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(key);
  const Array* a = v->AsArray();
  if (!a || a->element_type != ValueType::kString) return WrongType(key, "array of string", *v);
  std::vector<std::string> out;
  out.reserve(a->items.size());
  for (const Value& item : a->items) out.push_back(*item.AsString());
  return out;
}

absl::StatusOr<std::vector<float>> Metadata::GetFloatArray(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(key);
  const Array* a = v->AsArray();
  if (!a || (a->element_type != ValueType::kFloat32 && a->element_type != ValueType::kFloat64 &&
             !IsIntegerType(a->element_type))) {
    return WrongType(key, "array of float32", *v);
  }
  std::vector<float> out;
  out.reserve(a->items.size());
  for (const Value& item : a->items) out.push_back(static_cast<float>(*item.AsDouble()));
  return out;
}

absl::StatusOr<std::vector<int64_t>> Metadata::GetIntArray(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(key);
  const Array* a = v->AsArray();
  // Per-layer integer arrays may be written as bool, uint32 or int32 (spec 2.1).
  if (!a || (!IsIntegerType(a->element_type) && a->element_type != ValueType::kBool)) {
    return WrongType(key, "array of integers", *v);
  }
  std::vector<int64_t> out;
  out.reserve(a->items.size());
  for (const Value& item : a->items) {
    auto i = item.AsInt();
    if (!i)
      return absl::OutOfRangeError(
          absl::StrCat("metadata key '", ToAbsl(key), "': value too large"));
    out.push_back(*i);
  }
  return out;
}

absl::StatusOr<std::string> Metadata::GetString(std::string_view key, std::string dflt) const {
  if (!Has(key)) return dflt;
  return GetString(key);
}
absl::StatusOr<int64_t> Metadata::GetInt(std::string_view key, int64_t dflt) const {
  if (!Has(key)) return dflt;
  return GetInt(key);
}
absl::StatusOr<double> Metadata::GetFloat(std::string_view key, double dflt) const {
  if (!Has(key)) return dflt;
  return GetFloat(key);
}
absl::StatusOr<bool> Metadata::GetBool(std::string_view key, bool dflt) const {
  if (!Has(key)) return dflt;
  return GetBool(key);
}

}  // namespace tessera::gguf
