#include "common/model/tensor_map.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/quant/type_traits.h"
#include "common/util/strings.h"

namespace tessera::model {
namespace {

std::string DimsString(const Dims& d) { return absl::StrCat("[", absl::StrJoin(d, ", "), "]"); }

std::string TypeName(gguf::GgmlType t) { return gguf::GgmlTypeName(static_cast<uint32_t>(t)); }

bool AppliesTo(const TensorSpec& spec, const HyperParams& hp, uint32_t layer) {
  switch (spec.scope) {
    case Scope::kGlobal:
    case Scope::kBlock:
      return true;
    case Scope::kDenseBlock:
      return !hp.is_moe_block(layer);
    case Scope::kMoeBlock:
      return hp.is_moe_block(layer);
  }
  return false;
}

// The block index of "blk.N.*", or -1.
int64_t BlockIndex(const std::string& name) {
  if (name.compare(0, 4, "blk.") != 0) return -1;
  size_t i = 4;
  int64_t n = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i < 14)
    n = n * 10 + (name[i++] - '0');
  if (i == 4 || i >= name.size() || name[i] != '.') return -1;
  return n;
}

void ChooseFixups(TensorMapping& m) {
  const gguf::TensorInfo& t = *m.info;
  if (m.spec->needs_float && t.type != gguf::GgmlType::kF32) {
    m.fixups.push_back({FixupKind::kDequantize,
                        absl::StrCat(TypeName(t.type), " -> f32: its consumer computes in float")});
  }
  if (std::string_view(m.spec->name) == "attn_kv_b.weight") {
    m.fixups.push_back({FixupKind::kSplitKvB,
                        "attn_kv_b -> attn_k_b + attn_v_b (per head, spec 10.4) for the "
                        "absorbed MLA"});
  }
}

}  // namespace

std::string_view MapStatusName(MapStatus s) {
  switch (s) {
    case MapStatus::kFound:
      return "found";
    case MapStatus::kMissing:
      return "missing";
    case MapStatus::kAbsentOptional:
      return "absent (optional)";
    case MapStatus::kWrongShape:
      return "wrong shape";
    case MapStatus::kUnsupportedType:
      return "unsupported type";
    case MapStatus::kSkipped:
      return "skipped";
  }
  return "?";
}

std::string_view FixupKindName(FixupKind k) {
  switch (k) {
    case FixupKind::kDequantize:
      return "dequantize";
    case FixupKind::kSplitKvB:
      return "split_kv_b";
    case FixupKind::kSkip:
      return "skip";
  }
  return "?";
}

TensorMap MapTensors(const ArchSpec& arch, const HyperParams& hp, const gguf::GgufModel& model,
                     const MapOptions& options) {
  TensorMap map;
  HasTensorFn has = [&](const std::string& n) { return model.FindTensor(n) != nullptr; };
  absl::flat_hash_set<std::string> claimed;

  auto map_one = [&](const TensorSpec& spec, uint32_t l) {
    if (!AppliesTo(spec, hp, l)) return;
    Need need = spec.need(hp, l, has);
    if (need == Need::kNotExpected) return;
    TensorMapping m;
    m.name = TensorName(spec, l);
    m.spec = &spec;
    m.layer = l;
    m.need = need;
    m.expected = spec.shape(hp, l);
    m.info = model.FindTensor(m.name);
    claimed.insert(m.name);
    if (m.info == nullptr) {
      m.status = need == Need::kRequired ? MapStatus::kMissing : MapStatus::kAbsentOptional;
      if (m.status == MapStatus::kMissing) {
        m.reason = absl::StrCat("required by ", arch.name, " (", spec.role, "), expected shape ",
                                DimsString(m.expected));
        map.problems.push_back(absl::StrCat("tensor ", m.name, ": missing; ", m.reason));
      }
    } else if (m.info->dims != m.expected) {
      m.status = MapStatus::kWrongShape;
      m.reason = absl::StrCat("expected shape ", DimsString(m.expected), ", file has ",
                              DimsString(m.info->dims));
      map.problems.push_back(absl::StrCat("tensor ", m.name, ": ", m.reason));
    } else if (absl::Status s =
                   quant::CheckTypeSupported(static_cast<uint32_t>(m.info->type), m.name);
               !s.ok()) {
      m.status = MapStatus::kUnsupportedType;
      m.reason = std::string(s.message());
      map.problems.push_back(m.reason);
    } else {
      m.status = MapStatus::kFound;
      ChooseFixups(m);
    }
    map.tensors.push_back(std::move(m));
  };
  for (const TensorSpec& spec : arch.tensors) {
    uint32_t n_blocks = spec.scope == Scope::kGlobal ? 1 : hp.n_layer;
    for (uint32_t l = 0; l < n_blocks; ++l) map_one(spec, l);
  }
  if (options.mtp && hp.n_nextn > 0 && !arch.nextn_tensors.empty()) {
    // The MTP blocks: a decoder block as the trunk's (MoE where the trunk's are), without
    // its DSA indexer, plus the nextn tensors.
    for (uint32_t l = hp.n_layer; l < hp.n_layer_all; ++l) {
      for (const TensorSpec& spec : arch.tensors) {
        if (spec.scope != Scope::kGlobal && !spec.mtp_unused) map_one(spec, l);
      }
      for (const TensorSpec& spec : arch.nextn_tensors) map_one(spec, l);
      ++map.mtp_blocks;
    }
  }

  // Everything else in the file: MTP blocks and tensors no table entry claims.
  for (const gguf::TensorInfo& t : model.tensors()) {
    if (claimed.contains(t.name)) continue;
    TensorMapping m;
    m.name = t.name;
    m.info = &t;
    m.status = MapStatus::kSkipped;
    int64_t block = BlockIndex(t.name);
    if (block >= static_cast<int64_t>(hp.n_layer) && block < static_cast<int64_t>(hp.n_layer_all)) {
      m.layer = static_cast<uint32_t>(block);
      m.reason = map.mtp_blocks > 0
                     ? "MTP block's DSA indexer, not run (the MTP block attends densely)"
                     : "MTP layer, not used for decoding";
    } else if (block >= static_cast<int64_t>(hp.n_layer_all)) {
      m.reason = absl::StrCat("block ", block, " is beyond block_count ", hp.n_layer_all);
    } else {
      m.reason = absl::StrCat("not used by ", arch.name);
    }
    m.fixups.push_back({FixupKind::kSkip, m.reason});
    map.tensors.push_back(std::move(m));
  }
  for (const gguf::TensorInfo& t : model.tensors()) {
    const int64_t block = BlockIndex(t.name);
    if (block >= static_cast<int64_t>(hp.n_layer) && block < static_cast<int64_t>(hp.n_layer_all)) {
      ++map.mtp_tensors;
    }
  }
  return map;
}

std::string MtpUnavailable(const ArchSpec& arch, const HyperParams& hp,
                           const std::string& key_prefix) {
  if (arch.nextn_tensors.empty()) {
    return absl::StrCat("architecture ", arch.name, " has no MTP (NextN) draft head in Tessera");
  }
  if (hp.n_nextn == 0) {
    return absl::StrCat("the model has no MTP (NextN) block: ", key_prefix,
                        ".nextn_predict_layers is 0 or absent");
  }
  if (hp.n_layer == 0) {
    return absl::StrCat("the model holds only MTP (NextN) blocks: ", key_prefix,
                        ".nextn_predict_layers ", hp.n_nextn, " equals block_count ",
                        hp.n_layer_all, ", so there is no trunk to draft for");
  }
  return "";
}

}  // namespace tessera::model
