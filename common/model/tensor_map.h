// Matches what a file holds against what an architecture expects: every expected tensor is
// found, missing, of the wrong shape or of an unsupported type; every tensor nothing expects
// is listed with a reason; MTP/nextn blocks are skipped, never an error, unless the caller
// asks for them (MapOptions::mtp). Each mapping names the fixups that turn the stored tensor
// into what the executor consumes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/gguf/split.h"
#include "common/model/arch.h"

namespace tessera::model {

enum class MapStatus {
  kFound,            // present, right shape, usable type
  kMissing,          // required and absent
  kAbsentOptional,   // optional and absent (nothing to load)
  kWrongShape,       // present with another shape
  kUnsupportedType,  // present, but no kernel for its quant type
  kSkipped,          // present and deliberately not loaded (MTP block, unused)
};
std::string_view MapStatusName(MapStatus s);

enum class FixupKind {
  kDequantize,  // quantized (or half) tensor whose consumer needs float32
  kSplitKvB,    // legacy attn_kv_b -> attn_k_b + attn_v_b for the absorbed MLA
  kSkip,        // not loaded; the reason says why
};
std::string_view FixupKindName(FixupKind k);

struct Fixup {
  FixupKind kind;
  std::string detail;
};

struct TensorMapping {
  std::string name;
  const TensorSpec* spec = nullptr;  // null for tensors nothing expects
  uint32_t layer = 0;                // block index for per-block tensors
  Need need = Need::kOptional;
  MapStatus status = MapStatus::kFound;
  const gguf::TensorInfo* info = nullptr;  // null when absent
  Dims expected;                           // empty for unexpected tensors
  std::vector<Fixup> fixups;
  std::string reason;  // why skipped / what is wrong

  bool loaded() const { return status == MapStatus::kFound; }
  bool is_problem() const {
    return status == MapStatus::kMissing || status == MapStatus::kWrongShape ||
           status == MapStatus::kUnsupportedType;
  }
};

struct TensorMap {
  std::vector<TensorMapping> tensors;  // expected tensors in table order, then the others
  std::vector<std::string> problems;   // one line per problem tensor
  uint32_t mtp_tensors = 0;            // tensors of blocks >= n_layer (the optional MTP probe)
  uint32_t mtp_blocks = 0;             // NextN/MTP blocks mapped for loading (MapOptions::mtp)
};

struct MapOptions {
  // Also map the NextN/MTP blocks (blocks n_layer .. block_count - 1): their attention and
  // MoE tensors as the trunk's blocks have them, plus the architecture's nextn_tensors; the
  // block's DSA indexer stays skipped (not run). Missing required tensors are problems as
  // anywhere else. No effect where hp.n_nextn is 0 or the architecture has no nextn_tensors
  // (the caller reports that: MtpUnavailable).
  bool mtp = false;
};

// Builds the map. Never fails: everything wrong is a mapping status plus a problem line.
TensorMap MapTensors(const ArchSpec& arch, const HyperParams& hp, const gguf::GgufModel& model,
                     const MapOptions& options = {});

// Why MTP cannot be asked of this model (an empty string when it can): the architecture has
// no MTP support, or `<key_prefix>.nextn_predict_layers` is 0 or absent, or the file holds
// only MTP blocks. `key_prefix` is the file's general.architecture.
std::string MtpUnavailable(const ArchSpec& arch, const HyperParams& hp,
                           const std::string& key_prefix);

}  // namespace tessera::model
