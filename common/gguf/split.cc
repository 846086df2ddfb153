#include "common/gguf/split.h"

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/util/strings.h"

namespace tessera::gguf {
namespace {

constexpr char kSplitNo[] = "split.no";
constexpr char kSplitCount[] = "split.count";
constexpr char kSplitTensors[] = "split.tensors.count";

}  // namespace

std::optional<SplitName> SplitName::Parse(const std::string& path) {
  // "<prefix>-NNNNN-of-MMMMM.gguf": 20 characters after the prefix.
  constexpr size_t kSuffix = 20;
  if (path.size() <= kSuffix) return std::nullopt;
  const std::string tail = path.substr(path.size() - kSuffix);
  auto digits = [&](size_t at) {
    for (size_t i = at; i < at + 5; ++i) {
      if (tail[i] < '0' || tail[i] > '9') return false;
    }
    return true;
  };
  if (tail[0] != '-' || !digits(1) || tail.compare(6, 4, "-of-") != 0 || !digits(10) ||
      tail.compare(15, 5, ".gguf") != 0) {
    return std::nullopt;
  }
  SplitName s;
  s.prefix = path.substr(0, path.size() - kSuffix);
  s.number = static_cast<uint32_t>(std::stoul(tail.substr(1, 5)));
  s.count = static_cast<uint32_t>(std::stoul(tail.substr(10, 5)));
  if (s.number == 0 || s.count == 0 || s.number > s.count) return std::nullopt;
  return s;
}

std::string SplitName::Format(const std::string& prefix, uint32_t number, uint32_t count) {
  return absl::StrFormat("%s-%05d-of-%05d.gguf", prefix, number, count);
}

absl::StatusOr<GgufModel> GgufModel::Open(const std::string& path) {
  GgufModel model;
  auto first = GgufFile::Open(path);
  if (!first.ok()) return first.status();

  std::optional<SplitName> name = SplitName::Parse(path);
  const Metadata& md = (*first)->metadata();
  bool has_split_keys = md.Has(kSplitCount);
  // llama-gguf-split --merge keeps the split keys with split.count = 0: a whole file.
  if (has_split_keys) {
    auto c = md.GetUint(kSplitCount);
    if (c.ok() && *c == 0) has_split_keys = false;
  }
  if (!has_split_keys) {
    // A plain file (even if its name looks like a part) is a one-part model.
    model.parts_.push_back(*std::move(first));
    absl::Status s = model.Index();
    if (!s.ok()) return s;
    return model;
  }

  auto count = md.GetUint(kSplitCount);
  if (!count.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", count.status().message()));
  if (*count > 99999) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": split.count ", *count, " is not valid"));
  }
  if (!name) {
    if (*count == 1) {
      model.parts_.push_back(*std::move(first));
      absl::Status s = model.Index();
      if (!s.ok()) return s;
      return model;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": file is part of a split set (split.count = ", *count,
        ") but its name does not follow NAME-NNNNN-of-MMMMM.gguf, so the other parts cannot "
        "be found; rename the parts or merge them"));
  }
  if (name->count != *count) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": file name says ", name->count, " parts but split.count is ", *count));
  }

  // Open every part; the one we were given is reused.
  for (uint32_t i = 1; i <= name->count; ++i) {
    std::string part_path = SplitName::Format(name->prefix, i, name->count);
    if (i == name->number) {
      model.parts_.push_back(*std::move(first));
      continue;
    }
    std::error_code ec;
    if (!std::filesystem::exists(part_path, ec)) {
      return absl::NotFoundError(absl::StrCat("split set ", name->prefix, ": part ", i, " of ",
                                              name->count, " is missing (", part_path, ")"));
    }
    auto part = GgufFile::Open(part_path);
    if (!part.ok()) return part.status();
    model.parts_.push_back(*std::move(part));
  }

  int64_t total_tensors = -1;
  for (uint32_t i = 0; i < model.parts_.size(); ++i) {
    const GgufFile& p = *model.parts_[i];
    const Metadata& pm = p.metadata();
    auto no = pm.GetUint(kSplitNo);
    auto cnt = pm.GetUint(kSplitCount);
    auto tensors = pm.GetInt(kSplitTensors);
    for (const absl::Status& s : {no.status(), cnt.status(), tensors.status()}) {
      if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(p.path(), ": ", s.message()));
    }
    if (*no != i) {
      return absl::InvalidArgumentError(
          absl::StrCat(p.path(), ": split.no is ", *no, " but the file is part ", i + 1,
                       " (split.no ", i, " expected); the parts are mixed up or renamed"));
    }
    if (*cnt != *count) {
      return absl::InvalidArgumentError(
          absl::StrCat(p.path(), ": split.count is ", *cnt, " but the first part says ", *count));
    }
    if (total_tensors < 0) total_tensors = *tensors;
    if (*tensors != total_tensors) {
      return absl::InvalidArgumentError(absl::StrCat(p.path(), ": split.tensors.count is ",
                                                     *tensors, " but the first part says ",
                                                     total_tensors));
    }
  }
  absl::Status s = model.Index();
  if (!s.ok()) return s;
  if (static_cast<int64_t>(model.tensors_.size()) != total_tensors) {
    return absl::InvalidArgumentError(
        absl::StrCat("split set ", name->prefix, ": split.tensors.count says ", total_tensors,
                     " tensors but the parts hold ", model.tensors_.size()));
  }
  return model;
}

absl::Status GgufModel::Index() {
  size_t total = 0;
  for (const auto& p : parts_) total += p->tensors().size();
  tensors_.reserve(total);
  tensor_index_.reserve(total);
  for (uint32_t i = 0; i < parts_.size(); ++i) {
    for (const TensorInfo& t : parts_[i]->tensors()) {
      if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
        const TensorInfo& other = tensors_[tensor_index_[t.name]];
        return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' appears in ",
                                                       parts_[other.part]->path(), " and in ",
                                                       parts_[i]->path()));
      }
      tensors_.push_back(t);
      tensors_.back().part = i;
    }
  }
  return absl::OkStatus();
}

const TensorInfo* GgufModel::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(ToAbsl(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

uint64_t GgufModel::total_tensor_bytes() const {
  uint64_t n = 0;
  for (const TensorInfo& t : tensors_) n += t.n_bytes;
  return n;
}

uint64_t GgufModel::total_file_bytes() const {
  uint64_t n = 0;
  for (const auto& p : parts_) n += p->file_size();
  return n;
}

}  // namespace tessera::gguf
