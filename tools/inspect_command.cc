// tessera inspect: what a GGUF model is, from its header alone.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "common/gguf/split.h"
#include "common/quant/dequantize.h"
#include "nlohmann/json.hpp"
#include "tools/commands.h"
#include "tools/format.h"

namespace tessera::cli {
namespace {

using gguf::GgufModel;
using gguf::Metadata;
using gguf::TensorInfo;
using gguf::Value;
using gguf::ValueType;
using Json = nlohmann::ordered_json;

constexpr char kUsage[] =
    "usage: tessera inspect FILE [--json] [--tensors] [--dump TENSOR --out PATH]\n"
    "\n"
    "Shows a GGUF model from its header and tensor index alone (no weight pages are read):\n"
    "architecture, hyper-parameter keys, tokenizer summary, tensor count, bytes per type,\n"
    "total bytes and parts. FILE may be any part of a split set NAME-0000K-of-0000N.gguf;\n"
    "all parts are opened and checked.\n"
    "\n"
    "  --json           machine-readable output (schema \"tessera-inspect/1\", see README)\n"
    "  --tensors        also list every tensor: name, type, shape, bytes, part, offset\n"
    "  --dump TENSOR    write TENSOR dequantized to little-endian float32 at --out PATH\n"
    "  --out PATH       where --dump writes\n";

// Special token ids reported in the tokenizer summary (spec 14.1).
constexpr const char* kSpecialIds[] = {"bos",       "eos",     "eot", "eom", "unknown",
                                       "seperator", "padding", "cls", "mask"};

Json ValueToJson(const Value& v) {
  switch (v.type()) {
    case ValueType::kString:
      return *v.AsString();
    case ValueType::kBool:
      return *v.AsBool();
    case ValueType::kFloat32:
      return ShortestFloat32(*v.AsDouble());
    case ValueType::kFloat64:
      return *v.AsDouble();
    case ValueType::kArray: {
      Json a = Json::array();
      for (const Value& item : v.AsArray()->items) a.push_back(ValueToJson(item));
      return a;
    }
    case ValueType::kInt8:
    case ValueType::kInt16:
    case ValueType::kInt32:
    case ValueType::kInt64:
      return *v.AsInt();
    default:
      return *v.AsUint();
  }
}

// True for keys that hold the model's configuration rather than tokenizer data.
bool IsHyperParameter(const std::string& key, const std::string& arch) {
  return !arch.empty() && absl::StartsWith(key, arch + ".");
}

Json TokenizerSummary(const Metadata& md) {
  Json t = Json::object();
  auto str = [&](const char* key) -> Json {
    const Value* v = md.Find(key);
    return v && v->AsString() ? Json(*v->AsString()) : Json(nullptr);
  };
  auto count = [&](const char* key) -> Json {
    const Value* v = md.Find(key);
    return v && v->AsArray() ? Json(v->AsArray()->items.size()) : Json(nullptr);
  };
  t["model"] = str("tokenizer.ggml.model");
  t["pre"] = str("tokenizer.ggml.pre");
  t["vocab_size"] = count("tokenizer.ggml.tokens");
  t["merges"] = count("tokenizer.ggml.merges");
  Json special = Json::object();
  for (const char* name : kSpecialIds) {
    const Value* v = md.Find(absl::StrFormat("tokenizer.ggml.%s_token_id", name));
    if (v && v->AsInt()) special[name] = *v->AsInt();
  }
  t["special_token_ids"] = special;
  for (const char* flag : {"add_bos_token", "add_eos_token"}) {
    const Value* v = md.Find(absl::StrFormat("tokenizer.ggml.%s", flag));
    t[flag] = v && v->AsBool() ? Json(*v->AsBool()) : Json(nullptr);
  }
  t["chat_template"] = md.Has("tokenizer.chat_template");
  return t;
}

Json BuildReport(const std::string& path, const GgufModel& model, bool with_tensors) {
  const Metadata& md = model.metadata();
  std::string arch;
  if (const Value* a = md.Find("general.architecture"); a && a->AsString()) arch = *a->AsString();

  Json r;
  r["format"] = "tessera-inspect/1";
  r["file"] = path;
  r["gguf_version"] = model.part(0).version();
  r["alignment"] = model.part(0).alignment();
  r["architecture"] = arch.empty() ? Json(nullptr) : Json(arch);
  const Value* name = md.Find("general.name");
  r["name"] = name && name->AsString() ? Json(*name->AsString()) : Json(nullptr);
  r["metadata_key_count"] = md.size();
  r["tensor_count"] = model.tensors().size();

  Json general = Json::object();
  Json hparams = Json::object();
  for (const auto& [key, value] : md.entries()) {
    if (absl::StartsWith(key, "general.")) general[key] = ValueToJson(value);
    if (IsHyperParameter(key, arch)) hparams[key] = ValueToJson(value);
  }
  r["general"] = general;
  r["hyperparameters"] = hparams;
  r["tokenizer"] = TokenizerSummary(md);

  std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // name -> (tensors, bytes)
  for (const TensorInfo& t : model.tensors()) {
    auto& e = by_type[gguf::GgmlTypeName(static_cast<uint32_t>(t.type))];
    e.first += 1;
    e.second += t.n_bytes;
  }
  Json types = Json::object();
  for (const auto& [type, e] : by_type) types[type] = {{"tensors", e.first}, {"bytes", e.second}};
  r["types"] = types;
  r["total_tensor_bytes"] = model.total_tensor_bytes();
  r["total_file_bytes"] = model.total_file_bytes();

  Json parts = Json::array();
  for (size_t i = 0; i < model.part_count(); ++i) {
    const gguf::GgufFile& p = model.part(i);
    parts.push_back({{"path", p.path()},
                     {"gguf_version", p.version()},
                     {"file_bytes", p.file_size()},
                     {"metadata_key_count", p.metadata().size()},
                     {"tensor_count", p.tensors().size()}});
  }
  r["parts"] = parts;

  if (with_tensors) {
    Json ts = Json::array();
    for (const TensorInfo& t : model.tensors()) {
      ts.push_back({{"name", t.name},
                    {"type", gguf::GgmlTypeName(static_cast<uint32_t>(t.type))},
                    {"shape", t.dims},
                    {"bytes", t.n_bytes},
                    {"part", t.part},
                    {"offset", t.file_offset}});
    }
    r["tensors"] = ts;
  }
  return r;
}

void PrintHuman(const Json& r, const GgufModel& model) {
  std::printf("file:          %s\n", r["file"].get<std::string>().c_str());
  std::printf("gguf:          version %d, alignment %d, %zu part%s, %s\n",
              r["gguf_version"].get<int>(), r["alignment"].get<int>(), model.part_count(),
              model.part_count() == 1 ? "" : "s", HumanBytes(model.total_file_bytes()).c_str());
  std::string arch = r["architecture"].is_null() ? "(none)" : r["architecture"].get<std::string>();
  std::string name = r["name"].is_null() ? "" : " (\"" + r["name"].get<std::string>() + "\")";
  std::printf("architecture:  %s%s\n", arch.c_str(), name.c_str());
  std::printf("metadata:      %zu keys\n", r["metadata_key_count"].get<size_t>());
  if (!r["hyperparameters"].empty()) {
    std::printf("hyper-parameters:\n");
    for (const auto& [key, value] : r["hyperparameters"].items()) {
      std::string v = JsonDump(value);
      if (v.size() > 100) v = v.substr(0, 97) + "...";
      std::printf("  %-48s %s\n", key.c_str(), v.c_str());
    }
  }
  const Json& tok = r["tokenizer"];
  if (!tok["model"].is_null()) {
    std::printf("tokenizer:     %s (pre: %s), %s tokens, %s merges",
                tok["model"].get<std::string>().c_str(),
                tok["pre"].is_null() ? "none" : tok["pre"].get<std::string>().c_str(),
                JsonDump(tok["vocab_size"]).c_str(), JsonDump(tok["merges"]).c_str());
    for (const auto& [k, v] : tok["special_token_ids"].items()) {
      std::printf(", %s %s", k.c_str(), JsonDump(v).c_str());
    }
    std::printf("; chat template: %s\n", tok["chat_template"].get<bool>() ? "yes" : "no");
  } else {
    std::printf("tokenizer:     (none)\n");
  }
  std::printf("tensors:       %zu, %s\n", r["tensor_count"].get<size_t>(),
              HumanBytes(r["total_tensor_bytes"].get<uint64_t>()).c_str());
  for (const auto& [type, e] : r["types"].items()) {
    std::printf("  %-10s %8zu tensors  %12s\n", type.c_str(), e["tensors"].get<size_t>(),
                HumanBytes(e["bytes"].get<uint64_t>()).c_str());
  }
  if (model.part_count() > 1) {
    std::printf("parts:\n");
    for (size_t i = 0; i < model.part_count(); ++i) {
      const gguf::GgufFile& p = model.part(i);
      std::printf("  %5zu  %s  %zu tensors  %s\n", i + 1, p.path().c_str(), p.tensors().size(),
                  HumanBytes(p.file_size()).c_str());
    }
  }
  if (r.contains("tensors")) {
    std::printf("%-48s %-8s %-24s %12s %5s %14s\n", "name", "type", "shape", "bytes", "part",
                "offset");
    for (const Json& t : r["tensors"]) {
      std::printf("%-48s %-8s %-24s %12llu %5d %14llu\n", t["name"].get<std::string>().c_str(),
                  t["type"].get<std::string>().c_str(), JsonDump(t["shape"]).c_str(),
                  static_cast<unsigned long long>(t["bytes"].get<uint64_t>()), t["part"].get<int>(),
                  static_cast<unsigned long long>(t["offset"].get<uint64_t>()));
    }
  }
}

// Writes the tensor dequantized to float32, a bounded number of rows at a time.
int Dump(const GgufModel& model, const std::string& tensor, const std::string& out_path) {
  const TensorInfo* t = model.FindTensor(tensor);
  if (t == nullptr) {
    std::fprintf(stderr, "tessera inspect: no tensor named '%s' in %s\n", tensor.c_str(),
                 model.part(0).path().c_str());
    return 1;
  }
  if (!quant::CanDequantize(t->type)) {
    std::fprintf(stderr,
                 "tessera inspect: tensor '%s' has type %s, which --dump cannot "
                 "dequantize yet\n",
                 tensor.c_str(), gguf::GgmlTypeName(static_cast<uint32_t>(t->type)).c_str());
    return 1;
  }
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out) {
    std::fprintf(stderr, "tessera inspect: cannot write %s\n", out_path.c_str());
    return 1;
  }
  absl::Span<const uint8_t> data = model.TensorData(*t);
  uint64_t row_elems = t->dims.empty() ? 1 : static_cast<uint64_t>(t->dims[0]);
  uint64_t rows = t->rows();
  uint64_t row_bytes = rows == 0 ? 0 : t->n_bytes / rows;
  uint64_t rows_per_chunk =
      std::max<uint64_t>(1, (uint64_t{1} << 22) / std::max<uint64_t>(1, row_elems));
  std::vector<float> buf;
  for (uint64_t r = 0; r < rows; r += rows_per_chunk) {
    uint64_t n = std::min(rows_per_chunk, rows - r);
    buf.resize(n * row_elems);
    absl::Status s = quant::DequantizeToFloat(t->type, data.subspan(r * row_bytes, n * row_bytes),
                                              n * row_elems, buf.data());
    if (!s.ok()) {
      std::fprintf(stderr, "tessera inspect: tensor '%s': %s\n", tensor.c_str(),
                   std::string(s.message()).c_str());
      return 1;
    }
    out.write(reinterpret_cast<const char*>(buf.data()),
              static_cast<std::streamsize>(buf.size() * sizeof(float)));
  }
  if (!out.flush()) {
    std::fprintf(stderr, "tessera inspect: write to %s failed\n", out_path.c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s: %llu float32 values (%s %s)\n", out_path.c_str(),
               static_cast<unsigned long long>(t->n_elements), t->ShapeString().c_str(),
               gguf::GgmlTypeName(static_cast<uint32_t>(t->type)).c_str());
  return 0;
}

}  // namespace

int RunInspect(const Args& args) {
  std::string file, dump, out;
  bool json = false, tensors = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--tensors") {
      tensors = true;
    } else if ((a == "--dump" || a == "--out") && i + 1 < args.size()) {
      (a == "--dump" ? dump : out) = args[++i];
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "tessera inspect: unknown or incomplete option '%s'\n\n%s", a.c_str(),
                   kUsage);
      return 2;
    } else if (file.empty()) {
      file = a;
    } else {
      std::fprintf(stderr, "tessera inspect: more than one FILE given\n\n%s", kUsage);
      return 2;
    }
  }
  if (file.empty()) {
    std::fprintf(stderr, "tessera inspect: no FILE given\n\n%s", kUsage);
    return 2;
  }
  if (dump.empty() != out.empty()) {
    std::fprintf(stderr, "tessera inspect: --dump and --out go together\n\n%s", kUsage);
    return 2;
  }
  auto model = GgufModel::Open(file);
  if (!model.ok()) {
    std::fprintf(stderr, "tessera inspect: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  if (!dump.empty()) return Dump(*model, dump, out);
  Json report = BuildReport(file, *model, tensors);
  if (json) {
    std::printf("%s\n", JsonDump(report, 2).c_str());
  } else {
    PrintHuman(report, *model);
  }
  return 0;
}

}  // namespace tessera::cli
