// Writing GGUF files (version 3 by default) and split sets, laid out as llama.cpp lays
// them: tensors in the order added, each at the running, aligned offset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/gguf/ggml_type.h"
#include "common/gguf/metadata.h"

namespace tessera::gguf {

class GgufWriter {
 public:
  GgufWriter() = default;

  void set_version(uint32_t v) { version_ = v; }  // 2 or 3
  // Also written as `general.alignment` when it differs from the default (32).
  void set_alignment(uint32_t a) { alignment_ = a; }
  Metadata& metadata() { return metadata_; }

  // Adds a tensor whose data is copied. Errors: duplicate or too-long name, more than 4
  // dims, a non-positive dim, a row length that is not a multiple of the type's block, or
  // `data` of the wrong size.
  absl::Status AddTensor(std::string name, std::vector<int64_t> dims, GgmlType type,
                         absl::Span<const uint8_t> data);
  // Convenience for float32 data.
  absl::Status AddF32Tensor(std::string name, std::vector<int64_t> dims,
                            absl::Span<const float> data);
  // Adds a tensor whose bytes are all zero. Files are written sparsely (holes), so this is
  // how tests make very large files cheaply.
  absl::Status AddZeroTensor(std::string name, std::vector<int64_t> dims, GgmlType type);

  size_t tensor_count() const { return tensors_.size(); }

  // Writes one file.
  absl::Status WriteFile(const std::string& path) const;
  std::vector<uint8_t> WriteToBuffer() const;

  // Writes a split set `prefix-0000K-of-0000N.gguf` with at most `max_tensors_per_part`
  // tensors per part (llama-gguf-split's layout: the metadata in part 1, `split.no`,
  // `split.count` and `split.tensors.count` in every part). Returns the part paths.
  absl::StatusOr<std::vector<std::string>> WriteSplit(const std::string& prefix,
                                                      size_t max_tensors_per_part) const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<int64_t> dims;
    GgmlType type;
    uint64_t n_bytes;
    std::vector<uint8_t> data;  // empty: zeros
  };
  absl::Status CheckNewTensor(const std::string& name, const std::vector<int64_t>& dims,
                              GgmlType type, uint64_t* n_bytes) const;
  // Header, metadata and tensor infos for `tensors`, padded to the alignment; fills each
  // tensor's data-relative offset and the total file size.
  std::vector<uint8_t> Header(const Metadata& md, absl::Span<const PendingTensor* const> tensors,
                              std::vector<uint64_t>* offsets, uint64_t* file_size) const;
  absl::Status WritePart(const std::string& path, const Metadata& md,
                         absl::Span<const PendingTensor* const> tensors) const;
  std::vector<const PendingTensor*> AllTensors() const;

  uint32_t version_ = 3;
  uint32_t alignment_ = 32;
  Metadata metadata_;
  std::vector<PendingTensor> tensors_;
  absl::flat_hash_set<std::string> names_;
};

}  // namespace tessera::gguf
