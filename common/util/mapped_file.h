// A read-only memory mapping of a whole file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tessera {

// Maps a file read-only for the lifetime of the object. Mapping reads no pages: only the
// bytes a caller touches are faulted in, so opening a 400 GB file is cheap.
class MappedFile {
 public:
  // Maps `path`. Errors (missing file, directory, permission, mmap failure) name the path
  // and the system's reason. An empty file maps to an empty span.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  absl::Span<const uint8_t> bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }

 private:
  MappedFile(std::string path, const uint8_t* data, uint64_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const uint8_t* data_;
  uint64_t size_;
};

}  // namespace tessera
