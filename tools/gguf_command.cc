// tessera gguf split|merge: split sets in llama-gguf-split's layout, so files move freely
// between the two tools. Tensor bytes are streamed part to part through a small buffer;
// a model is never held in memory.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/gguf/split.h"
#include "common/gguf/writer.h"
#include "controller/config/units.h"
#include "tools/commands.h"
#include "tools/format.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;
using gguf::GgufFile;
using gguf::GgufModel;
using gguf::GgufWriter;
using gguf::Metadata;
using gguf::SplitName;
using gguf::TensorInfo;
using gguf::Value;

constexpr char kUsage[] =
    "usage: tessera gguf split (--max-tensors N | --max-size SIZE) [--no-tensor-first-split]\n"
    "                          [--dry-run] [--force] IN OUT_PREFIX\n"
    "       tessera gguf merge [--force] PART OUT\n"
    "\n"
    "split writes OUT_PREFIX-00001-of-0000N.gguf ... in llama-gguf-split's layout: all\n"
    "metadata in the first part, split.no / split.count / split.tensors.count in every\n"
    "part, each part a complete GGUF holding its own tensors. IN may itself be a split set.\n"
    "  --max-tensors N          at most N tensors per part\n"
    "  --max-size SIZE          at most SIZE bytes of tensor data per part (a single larger\n"
    "                           tensor gets a part of its own). 2G and 500M mean 10^9 and\n"
    "                           10^6 bytes as in llama-gguf-split; GiB, MiB are powers of 2\n"
    "  --no-tensor-first-split  the first part holds metadata only\n"
    "  --dry-run                print the plan, write nothing\n"
    "\n"
    "merge joins a split set (any of its parts may be named) into the single file OUT,\n"
    "without split.* keys. Tessera loads split sets directly; merging is optional.\n"
    "\n"
    "Existing outputs are refused unless --force is given.\n";

constexpr const char* kSplitKeys[] = {"split.no", "split.count", "split.tensors.count"};
constexpr size_t kCopyChunk = 8 << 20;

int UsageError(const std::string& message) {
  std::fprintf(stderr, "tessera gguf: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

int Failure(const absl::Status& s) {
  std::fprintf(stderr, "tessera gguf: %s\n", std::string(s.message()).c_str());
  return 1;
}

uint64_t AlignUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

Metadata WithoutSplitKeys(const Metadata& md) {
  Metadata out = md;
  for (const char* key : kSplitKeys) out.Erase(key);
  return out;
}

absl::Status RefuseExisting(const std::string& path, bool force) {
  std::error_code ec;
  if (!force && fs::exists(path, ec)) {
    return absl::AlreadyExistsError(
        absl::StrCat(path, " already exists (give --force to overwrite it)"));
  }
  return absl::OkStatus();
}

// Copies `n` bytes at `from_offset` of `from_path` to `to_offset` of the open file `to`.
absl::Status CopyRange(const std::string& from_path, uint64_t from_offset, uint64_t n, int to,
                       uint64_t to_offset, const std::string& to_path,
                       std::vector<uint8_t>& buffer) {
  int from = ::open(from_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (from < 0) {
    return absl::NotFoundError(absl::StrCat(from_path, ": cannot open: ", std::strerror(errno)));
  }
  absl::Cleanup close_from = [from] { ::close(from); };
  ::posix_fadvise(from, static_cast<off_t>(from_offset), static_cast<off_t>(n),
                  POSIX_FADV_SEQUENTIAL);
  while (n > 0) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(n, buffer.size()));
    ssize_t got = ::pread(from, buffer.data(), want, static_cast<off_t>(from_offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      return absl::DataLossError(
          absl::StrCat(from_path, ": read failed at byte ", from_offset,
                       got < 0 ? absl::StrCat(": ", std::strerror(errno)) : ": file is truncated"));
    }
    for (ssize_t done = 0; done < got;) {
      ssize_t w = ::pwrite(to, buffer.data() + done, static_cast<size_t>(got - done),
                           static_cast<off_t>(to_offset + static_cast<uint64_t>(done)));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        return absl::InternalError(absl::StrCat(to_path, ": write failed: ", std::strerror(errno)));
      }
      done += w;
    }
    from_offset += static_cast<uint64_t>(got);
    to_offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

// Writes one GGUF file holding `md` and the tensors `indexes` of `src`, in that order. The
// header and layout come from GgufWriter (zero tensors leave holes); the data is then
// copied into the holes. The file appears under `path` only once complete.
absl::Status WriteModelFile(const std::string& path, const Metadata& md, uint32_t alignment,
                            const GgufModel& src, const std::vector<size_t>& indexes) {
  GgufWriter writer;
  writer.set_alignment(alignment);
  writer.metadata() = md;
  for (size_t i : indexes) {
    const TensorInfo& t = src.tensors()[i];
    absl::Status s = writer.AddZeroTensor(t.name, t.dims, t.type);
    if (!s.ok()) return s;
  }
  const std::string partial = path + ".partial";
  absl::Cleanup remove_partial = [&partial] {
    std::error_code ec;
    fs::remove(partial, ec);
  };
  absl::Status s = writer.WriteFile(partial);
  if (!s.ok()) return s;
  // The writer decided the offsets; read them back rather than recomputing the layout.
  auto layout = GgufFile::Open(partial);
  if (!layout.ok()) return layout.status();
  int out = ::open(partial.c_str(), O_WRONLY | O_CLOEXEC);
  if (out < 0) {
    return absl::InternalError(absl::StrCat(partial, ": cannot open: ", std::strerror(errno)));
  }
  absl::Cleanup close_out = [out] { ::close(out); };
  std::vector<uint8_t> buffer(kCopyChunk);
  for (size_t i : indexes) {
    const TensorInfo& t = src.tensors()[i];
    const TensorInfo* dst = (*layout)->FindTensor(t.name);
    if (dst == nullptr || dst->n_bytes != t.n_bytes) {
      return absl::InternalError(absl::StrCat(partial, ": tensor '", t.name, "' laid out wrongly"));
    }
    s = CopyRange(src.part(t.part).path(), t.file_offset, t.n_bytes, out, dst->file_offset, partial,
                  buffer);
    if (!s.ok()) return s;
  }
  if (::fsync(out) != 0) {
    return absl::InternalError(absl::StrCat(partial, ": fsync failed: ", std::strerror(errno)));
  }
  std::error_code ec;
  fs::rename(partial, path, ec);
  if (ec) return absl::InternalError(absl::StrCat(path, ": cannot rename: ", ec.message()));
  return absl::OkStatus();
}

struct Part {
  std::vector<size_t> tensors;
  uint64_t data_bytes = 0;  // tensor data including alignment padding
};

// llama-gguf-split's partition: tensors in file order; a new part starts when the next
// tensor would exceed the limit (a tensor larger than the limit gets a part of its own).
std::vector<Part> PlanParts(const GgufModel& model, uint64_t max_tensors, uint64_t max_bytes,
                            bool no_tensor_first_split, uint32_t alignment) {
  std::vector<Part> parts(no_tensor_first_split ? 2 : 1);
  for (size_t i = 0; i < model.tensors().size(); ++i) {
    uint64_t n = AlignUp(model.tensors()[i].n_bytes, alignment);
    Part* cur = &parts.back();
    bool full =
        max_tensors > 0 ? cur->tensors.size() >= max_tensors : cur->data_bytes + n > max_bytes;
    if (full && !cur->tensors.empty()) {
      parts.emplace_back();
      cur = &parts.back();
    }
    cur->tensors.push_back(i);
    cur->data_bytes += n;
  }
  return parts;
}

int RunSplit(const Args& args) {
  uint64_t max_tensors = 0, max_bytes = 0;
  bool no_first = false, dry_run = false, force = false;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string* { return i + 1 < args.size() ? &args[++i] : nullptr; };
    if (a == "--max-tensors") {
      const std::string* v = value();
      if (v == nullptr || !absl::SimpleAtoi(*v, &max_tensors) || max_tensors == 0) {
        return UsageError("--max-tensors needs a positive integer");
      }
    } else if (a == "--max-size") {
      const std::string* v = value();
      if (v == nullptr) return UsageError("--max-size needs a size such as 2G or 500M");
      auto size = config::ParseSize(*v);
      if (!size.ok()) return UsageError(absl::StrCat("--max-size: ", size.status().message()));
      if (*size == 0) return UsageError("--max-size must be positive");
      max_bytes = *size;
    } else if (a == "--no-tensor-first-split") {
      no_first = true;
    } else if (a == "--dry-run") {
      dry_run = true;
    } else if (a == "--force") {
      force = true;
    } else if (absl::StartsWith(a, "-")) {
      return UsageError(absl::StrCat("unknown option ", a));
    } else {
      positional.push_back(a);
    }
  }
  if ((max_tensors > 0) == (max_bytes > 0)) {
    return UsageError("give exactly one of --max-tensors N and --max-size SIZE");
  }
  if (positional.size() != 2) return UsageError("split needs IN and OUT_PREFIX");
  std::string prefix = positional[1];
  if (absl::EndsWith(prefix, ".gguf")) prefix.resize(prefix.size() - 5);
  if (prefix.empty() || fs::path(prefix).filename().empty()) {
    return UsageError(absl::StrCat("OUT_PREFIX '", positional[1], "' names no file"));
  }

  auto model = GgufModel::Open(positional[0]);
  if (!model.ok()) return Failure(model.status());
  const uint32_t alignment = model->part(0).alignment();
  std::vector<Part> parts = PlanParts(*model, max_tensors, max_bytes, no_first, alignment);
  if (parts.size() > 65535) {
    return Failure(absl::InvalidArgumentError(
        absl::StrCat(parts.size(), " parts: split.count is 16-bit; raise the limit")));
  }
  const auto count = static_cast<uint32_t>(parts.size());
  std::vector<std::string> paths;
  for (uint32_t p = 0; p < count; ++p) {
    paths.push_back(SplitName::Format(prefix, p + 1, count));
    if (absl::Status s = RefuseExisting(paths.back(), force); !s.ok() && !dry_run) {
      return Failure(s);
    }
  }
  const Metadata base = WithoutSplitKeys(model->metadata());
  for (uint32_t p = 0; p < count; ++p) {
    std::printf("%s: %zu tensors, %s\n", paths[p].c_str(), parts[p].tensors.size(),
                HumanBytes(parts[p].data_bytes).c_str());
    if (dry_run) continue;
    Metadata md = p == 0 ? base : Metadata();
    md.Set("split.no", Value::U16(static_cast<uint16_t>(p)));
    md.Set("split.count", Value::U16(static_cast<uint16_t>(count)));
    md.Set("split.tensors.count", Value::I32(static_cast<int32_t>(model->tensors().size())));
    absl::Status s = WriteModelFile(paths[p], md, alignment, *model, parts[p].tensors);
    if (!s.ok()) return Failure(s);
  }
  std::printf("%s %u parts, %zu tensors\n", dry_run ? "would write" : "wrote", count,
              model->tensors().size());
  return 0;
}

int RunMerge(const Args& args) {
  bool force = false;
  std::vector<std::string> positional;
  for (const std::string& a : args) {
    if (a == "--force") {
      force = true;
    } else if (absl::StartsWith(a, "-")) {
      return UsageError(absl::StrCat("unknown option ", a));
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) return UsageError("merge needs PART and OUT");
  const std::string& out = positional[1];
  auto model = GgufModel::Open(positional[0]);
  if (!model.ok()) return Failure(model.status());
  for (size_t p = 0; p < model->part_count(); ++p) {
    std::error_code ec;
    if (fs::equivalent(model->part(p).path(), out, ec)) {
      return Failure(absl::InvalidArgumentError(absl::StrCat(out, " is one of the inputs")));
    }
  }
  if (absl::Status s = RefuseExisting(out, force); !s.ok()) return Failure(s);
  std::vector<size_t> all(model->tensors().size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  absl::Status s = WriteModelFile(out, WithoutSplitKeys(model->metadata()),
                                  model->part(0).alignment(), *model, all);
  if (!s.ok()) return Failure(s);
  std::printf("%s: %zu parts merged, %zu tensors, %s\n", out.c_str(), model->part_count(),
              model->tensors().size(), HumanBytes(model->total_tensor_bytes()).c_str());
  return 0;
}

}  // namespace

int RunGguf(const Args& args) {
  if (args.empty()) return UsageError("split or merge?");
  if (args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  Args rest(args.begin() + 1, args.end());
  for (const std::string& a : rest) {
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  if (args[0] == "split") return RunSplit(rest);
  if (args[0] == "merge") return RunMerge(rest);
  return UsageError(absl::StrCat("unknown gguf command '", args[0], "'"));
}

}  // namespace tessera::cli
