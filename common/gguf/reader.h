// Reading one GGUF file (spec section 2), versions 2 and 3, little-endian.
//
// The reader validates everything before anything is used: magic, version, counts against
// the file size, string lengths, value types, dims and element-count overflow, tensor type
// ids, block multiples, offsets inside the file, aligned and non-overlapping. Every problem
// is an InvalidArgument (or Unimplemented, for a valid but unsupported file) Status whose
// message names the file, the byte offset and the field. It never reads outside the
// mapping and never aborts, whatever the bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/gguf/ggml_type.h"
#include "common/gguf/metadata.h"
#include "common/util/mapped_file.h"

namespace tessera::gguf {

inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;
// ggml's GGML_MAX_NAME: tensor names must be shorter than this.
inline constexpr size_t kMaxTensorName = 64;

struct TensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml `ne` order: dims[0] is the contiguous row length
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;       // as in the file: relative to that file's data blob
  uint64_t n_elements = 0;   // product of dims
  uint64_t n_bytes = 0;      // from the type's block geometry
  uint64_t file_offset = 0;  // absolute offset of the first byte in its file
  uint32_t part = 0;         // index of the part (file) holding the data; 0 for single files

  uint64_t rows() const { return dims.empty() ? 1 : n_elements / static_cast<uint64_t>(dims[0]); }
  std::string ShapeString() const;  // "[4096, 151552]"
};

class GgufFile {
 public:
  // Maps and parses `path`.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses bytes already in memory (not copied: they must outlive the object). `name` is
  // used in error messages. This is the fuzzing entry point.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Parse(absl::Span<const uint8_t> bytes,
                                                         std::string name);

  const std::string& path() const { return name_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the data blob
  uint64_t file_size() const { return bytes_.size(); }
  // End of the header and tensor infos, i.e. how many bytes parsing read.
  uint64_t header_bytes() const { return header_bytes_; }

  const Metadata& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(std::string_view name) const;

  // The bytes of a tensor of this file (already checked to lie inside the file).
  absl::Span<const uint8_t> TensorData(const TensorInfo& t) const {
    return bytes_.subspan(t.file_offset, t.n_bytes);
  }

 private:
  GgufFile() = default;
  absl::Status ParseAll();

  std::unique_ptr<MappedFile> mapping_;
  absl::Span<const uint8_t> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  uint64_t header_bytes_ = 0;
  Metadata metadata_;
  std::vector<TensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace tessera::gguf
