// Hand-encodes GGUF bytes field by field, independently of common/gguf/writer, so tests can
// build both valid files and precisely malformed ones.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tessera::testing {

class GgufBytes {
 public:
  template <typename T>
  GgufBytes& Put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
    return *this;
  }
  GgufBytes& Str(const std::string& s) {
    Put<uint64_t>(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  GgufBytes& Header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    bytes_.insert(bytes_.end(), {'G', 'G', 'U', 'F'});
    return Put<uint32_t>(version).Put<uint64_t>(n_tensors).Put<uint64_t>(n_kv);
  }
  GgufBytes& KeyU32(const std::string& key, uint32_t v) {
    return Str(key).Put<uint32_t>(4).Put<uint32_t>(v);
  }
  GgufBytes& KeyString(const std::string& key, const std::string& v) {
    return Str(key).Put<uint32_t>(8).Str(v);
  }
  GgufBytes& TensorInfo(const std::string& name, const std::vector<int64_t>& dims, uint32_t type,
                        uint64_t offset) {
    Str(name).Put<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (int64_t d : dims) Put<int64_t>(d);
    return Put<uint32_t>(type).Put<uint64_t>(offset);
  }
  GgufBytes& PadTo(size_t alignment) {
    while (bytes_.size() % alignment) bytes_.push_back(0);
    return *this;
  }
  GgufBytes& Zeros(size_t n) {
    bytes_.insert(bytes_.end(), n, 0);
    return *this;
  }
  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace tessera::testing
