// One logical model over a GGUF file or a split set `prefix-0000K-of-0000N.gguf`
// (spec section 3).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/gguf/reader.h"

namespace tessera::gguf {

// The pieces of a split file name. `Parse` accepts any path whose file name ends in
// "-NNNNN-of-MMMMM.gguf" (1-based NNNNN).
struct SplitName {
  std::string prefix;   // path without "-NNNNN-of-MMMMM.gguf"
  uint32_t number = 0;  // 1-based
  uint32_t count = 0;

  static std::optional<SplitName> Parse(const std::string& path);
  // "prefix-00003-of-00010.gguf" for 1-based `number`.
  static std::string Format(const std::string& prefix, uint32_t number, uint32_t count);
};

class GgufModel {
 public:
  // Opens `path`. When the name follows the split convention, every part is found beside
  // it (any part may be named) and checked: each exists and parses, `split.no` matches its
  // position, `split.count` agrees, tensor names are unique across parts, and the total
  // equals `split.tensors.count`. A missing or mismatched part is an error naming it.
  // A file without split keys is a one-part model.
  static absl::StatusOr<GgufModel> Open(const std::string& path);

  GgufModel(GgufModel&&) = default;
  GgufModel& operator=(GgufModel&&) = default;

  // The model's metadata: that of the first part (where the split convention puts it).
  const Metadata& metadata() const { return parts_.front()->metadata(); }
  // Every tensor of every part, in part order; `TensorInfo::part` says which.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(std::string_view name) const;
  absl::Span<const uint8_t> TensorData(const TensorInfo& t) const {
    return parts_[t.part]->TensorData(t);
  }

  size_t part_count() const { return parts_.size(); }
  const GgufFile& part(size_t i) const { return *parts_[i]; }
  uint64_t total_tensor_bytes() const;
  uint64_t total_file_bytes() const;

 private:
  GgufModel() = default;
  absl::Status Index();

  std::vector<std::unique_ptr<GgufFile>> parts_;
  std::vector<TensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace tessera::gguf
