#include "common/gguf/writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/gguf/reader.h"
#include "common/gguf/split.h"
#include "common/util/strings.h"

namespace tessera::gguf {
namespace {

// Appends little-endian encodings to a byte vector.
class ByteSink {
 public:
  explicit ByteSink(std::vector<uint8_t>& out) : out_(out) {}
  template <typename T>
  void Put(T v) {
    Append(&v, sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    Append(s.data(), s.size());
  }
  void PutValue(const Value& v);
  size_t size() const { return out_.size(); }
  void PadTo(size_t alignment) {
    while (out_.size() % alignment) out_.push_back(0);
  }

 private:
  // resize + memcpy rather than vector::insert of a byte range: g++ 12 at -O3 reports a
  // false stringop-overflow for an insert into a vector that may be empty.
  void Append(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = out_.size();
    out_.resize(at + n);
    std::memcpy(out_.data() + at, p, n);
  }

  std::vector<uint8_t>& out_;
};

void ByteSink::PutValue(const Value& v) {
  switch (v.type()) {
    case ValueType::kUint8:
      Put<uint8_t>(static_cast<uint8_t>(*v.AsUint()));
      break;
    case ValueType::kInt8:
      Put<int8_t>(static_cast<int8_t>(*v.AsInt()));
      break;
    case ValueType::kUint16:
      Put<uint16_t>(static_cast<uint16_t>(*v.AsUint()));
      break;
    case ValueType::kInt16:
      Put<int16_t>(static_cast<int16_t>(*v.AsInt()));
      break;
    case ValueType::kUint32:
      Put<uint32_t>(static_cast<uint32_t>(*v.AsUint()));
      break;
    case ValueType::kInt32:
      Put<int32_t>(static_cast<int32_t>(*v.AsInt()));
      break;
    case ValueType::kFloat32:
      Put<float>(static_cast<float>(*v.AsDouble()));
      break;
    case ValueType::kBool:
      Put<uint8_t>(*v.AsBool() ? 1 : 0);
      break;
    case ValueType::kString:
      PutString(*v.AsString());
      break;
    case ValueType::kArray: {
      const Array& a = *v.AsArray();
      Put<uint32_t>(static_cast<uint32_t>(a.element_type));
      Put<uint64_t>(a.items.size());
      for (const Value& item : a.items) PutValue(item);
      break;
    }
    case ValueType::kUint64:
      Put<uint64_t>(*v.AsUint());
      break;
    case ValueType::kInt64:
      Put<int64_t>(*v.AsInt());
      break;
    case ValueType::kFloat64:
      Put<double>(*v.AsDouble());
      break;
  }
}

uint64_t AlignUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

absl::Status WriteAll(int fd, const uint8_t* p, size_t n, uint64_t at, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(at));
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat(path, ": write failed: ", std::strerror(errno)));
    }
    p += w;
    n -= static_cast<size_t>(w);
    at += static_cast<uint64_t>(w);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GgufWriter::CheckNewTensor(const std::string& name, const std::vector<int64_t>& dims,
                                        GgmlType type, uint64_t* n_bytes) const {
  if (name.empty() || name.size() >= kMaxTensorName) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "': name must be 1 to ", kMaxTensorName - 1, " bytes"));
  }
  if (names_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("tensor '", name, "' added twice"));
  }
  if (dims.size() > kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': more than 4 dims"));
  }
  uint64_t n = 1;
  for (int64_t d : dims) {
    if (d <= 0) return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': dim ", d));
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': size overflows"));
    }
  }
  const GgmlTypeInfo* info = LookupGgmlType(type);
  if (!info) return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': unknown type"));
  uint64_t row = dims.empty() ? 1 : static_cast<uint64_t>(dims[0]);
  auto bytes = GgmlTypeBytes(*info, n);
  if (row % info->block_elems != 0 || !bytes) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': row length ", row,
                                                   " is not a multiple of the ", ToAbsl(info->name),
                                                   " block size ", info->block_elems));
  }
  *n_bytes = *bytes;
  return absl::OkStatus();
}

absl::Status GgufWriter::AddTensor(std::string name, std::vector<int64_t> dims, GgmlType type,
                                   absl::Span<const uint8_t> data) {
  uint64_t n_bytes = 0;
  absl::Status s = CheckNewTensor(name, dims, type, &n_bytes);
  if (!s.ok()) return s;
  if (data.size() != n_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': ", data.size(),
                                                   " bytes given, shape and type need ", n_bytes));
  }
  names_.insert(name);
  tensors_.push_back(PendingTensor{std::move(name), std::move(dims), type, n_bytes,
                                   std::vector<uint8_t>(data.begin(), data.end())});
  return absl::OkStatus();
}

absl::Status GgufWriter::AddF32Tensor(std::string name, std::vector<int64_t> dims,
                                      absl::Span<const float> data) {
  return AddTensor(std::move(name), std::move(dims), GgmlType::kF32,
                   {reinterpret_cast<const uint8_t*>(data.data()), data.size() * sizeof(float)});
}

absl::Status GgufWriter::AddZeroTensor(std::string name, std::vector<int64_t> dims, GgmlType type) {
  uint64_t n_bytes = 0;
  absl::Status s = CheckNewTensor(name, dims, type, &n_bytes);
  if (!s.ok()) return s;
  names_.insert(name);
  tensors_.push_back(PendingTensor{std::move(name), std::move(dims), type, n_bytes, {}});
  return absl::OkStatus();
}

std::vector<uint8_t> GgufWriter::Header(const Metadata& md,
                                        absl::Span<const PendingTensor* const> tensors,
                                        std::vector<uint64_t>* offsets, uint64_t* file_size) const {
  std::vector<uint8_t> out;
  ByteSink sink(out);
  sink.Put<uint32_t>(0x46554747);  // "GGUF"
  sink.Put<uint32_t>(version_);
  sink.Put<uint64_t>(tensors.size());
  Metadata effective = md;
  if (alignment_ != kDefaultAlignment) effective.Set("general.alignment", Value::U32(alignment_));
  sink.Put<uint64_t>(effective.size());
  for (const auto& [key, value] : effective.entries()) {
    sink.PutString(key);
    sink.Put<uint32_t>(static_cast<uint32_t>(value.type()));
    sink.PutValue(value);
  }
  uint64_t offset = 0;
  offsets->clear();
  for (const PendingTensor* t : tensors) {
    sink.PutString(t->name);
    sink.Put<uint32_t>(static_cast<uint32_t>(t->dims.size()));
    for (int64_t d : t->dims) sink.Put<int64_t>(d);
    sink.Put<uint32_t>(static_cast<uint32_t>(t->type));
    sink.Put<uint64_t>(offset);
    offsets->push_back(offset);
    offset += AlignUp(t->n_bytes, alignment_);
  }
  if (!tensors.empty()) sink.PadTo(alignment_);
  *file_size = out.size() + offset;
  return out;
}

std::vector<const GgufWriter::PendingTensor*> GgufWriter::AllTensors() const {
  std::vector<const PendingTensor*> all;
  for (const PendingTensor& t : tensors_) all.push_back(&t);
  return all;
}

std::vector<uint8_t> GgufWriter::WriteToBuffer() const {
  std::vector<const PendingTensor*> all = AllTensors();
  std::vector<uint64_t> offsets;
  uint64_t size = 0;
  std::vector<uint8_t> out = Header(metadata_, all, &offsets, &size);
  uint64_t data_start = out.size();
  out.resize(size, 0);
  for (size_t i = 0; i < all.size(); ++i) {
    if (!all[i]->data.empty()) {
      std::memcpy(out.data() + data_start + offsets[i], all[i]->data.data(), all[i]->data.size());
    }
  }
  return out;
}

absl::Status GgufWriter::WritePart(const std::string& path, const Metadata& md,
                                   absl::Span<const PendingTensor* const> tensors) const {
  std::vector<uint64_t> offsets;
  uint64_t size = 0;
  std::vector<uint8_t> header = Header(md, tensors, &offsets, &size);
  // Written beside the target and renamed over it: a process that has the old file mapped (a
  // daemon serving it, a test running beside this one) keeps reading the old bytes instead of
  // faulting (SIGBUS) when a truncated page is touched, and a failed write leaves no half file.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot create: ", std::strerror(errno)));
  }
  absl::Status s = WriteAll(fd, header.data(), header.size(), 0, path);
  for (size_t i = 0; s.ok() && i < tensors.size(); ++i) {
    // Zero tensors are left as holes: the file stays sparse.
    const std::vector<uint8_t>& data = tensors[i]->data;
    if (!data.empty()) s = WriteAll(fd, data.data(), data.size(), header.size() + offsets[i], path);
  }
  if (s.ok() && ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    s = absl::InternalError(absl::StrCat(path, ": cannot set size: ", std::strerror(errno)));
  }
  if (::close(fd) != 0 && s.ok()) {
    s = absl::InternalError(absl::StrCat(path, ": close failed: ", std::strerror(errno)));
  }
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = absl::InternalError(absl::StrCat(path, ": cannot replace: ", std::strerror(errno)));
  }
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  return WritePart(path, metadata_, AllTensors());
}

absl::StatusOr<std::vector<std::string>> GgufWriter::WriteSplit(const std::string& prefix,
                                                                size_t max_tensors_per_part) const {
  if (max_tensors_per_part == 0) {
    return absl::InvalidArgumentError("split: max tensors per part must be at least 1");
  }
  size_t n_parts =
      tensors_.empty() ? 1 : (tensors_.size() + max_tensors_per_part - 1) / max_tensors_per_part;
  if (n_parts > 99999) return absl::InvalidArgumentError("split: more than 99999 parts");
  std::vector<std::string> paths;
  for (size_t part = 0; part < n_parts; ++part) {
    Metadata md;
    if (part == 0) md = metadata_;
    md.Set("split.no", Value::U16(static_cast<uint16_t>(part)));
    md.Set("split.count", Value::U16(static_cast<uint16_t>(n_parts)));
    md.Set("split.tensors.count", Value::I32(static_cast<int32_t>(tensors_.size())));
    std::vector<const PendingTensor*> ts;
    for (size_t i = part * max_tensors_per_part;
         i < std::min(tensors_.size(), (part + 1) * max_tensors_per_part); ++i) {
      ts.push_back(&tensors_[i]);
    }
    std::string path =
        SplitName::Format(prefix, static_cast<uint32_t>(part + 1), static_cast<uint32_t>(n_parts));
    absl::Status status = WritePart(path, md, ts);
    if (!status.ok()) return status;
    paths.push_back(path);
  }
  return paths;
}

}  // namespace tessera::gguf
