// The key/value metadata of a GGUF file, in file order, with typed getters whose errors
// name the key and what was expected.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/gguf/value.h"

namespace tessera::gguf {

class Metadata {
 public:
  // Appends a key; returns false (and changes nothing) when the key already exists.
  bool Add(std::string key, Value value);
  // Adds or replaces.
  void Set(std::string key, Value value);
  bool Erase(std::string_view key);

  const Value* Find(std::string_view key) const;
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  size_t size() const { return entries_.size(); }
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

  // Typed getters. NotFound when the key is absent; InvalidArgument naming the key, the
  // expected type and the type found when it has another type. Integer getters accept any
  // integer width whose value fits (the tolerant reading the spec recommends).
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<uint64_t> GetUint(std::string_view key) const;
  absl::StatusOr<double> GetFloat(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  absl::StatusOr<std::vector<float>> GetFloatArray(std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  // Getters with a default used only when the key is absent (a key of the wrong type is
  // still an error).
  absl::StatusOr<std::string> GetString(std::string_view key, std::string dflt) const;
  absl::StatusOr<int64_t> GetInt(std::string_view key, int64_t dflt) const;
  absl::StatusOr<double> GetFloat(std::string_view key, double dflt) const;
  absl::StatusOr<bool> GetBool(std::string_view key, bool dflt) const;

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  absl::flat_hash_map<std::string, size_t> index_;
};

}  // namespace tessera::gguf
