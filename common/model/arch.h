// The architecture registry: one table per architecture saying which metadata keys it reads
// (with defaults), which tensors it expects (name pattern, shape as a function of the
// hyper-parameters, optional or not, whether its consumer needs float) and how each tensor
// is split across tensor-parallel ranks. Facts: ../shared/spec/architectures.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/model/hparams.h"

namespace tessera::model {

using Dims = std::vector<int64_t>;  // ggml `ne` order

// ---- Metadata keys -------------------------------------------------------------------------

// kOptional: absence is worth a warning (a default is assumed); kQuiet: absence is normal.
enum class KeyNeed { kRequired, kOptional, kQuiet };

struct KeySpec {
  const char* suffix;  // the key is "{arch}.{suffix}"
  KeyNeed need;
  std::variant<uint32_t HyperParams::*, float HyperParams::*, bool HyperParams::*,
               std::vector<uint32_t> HyperParams::*, std::string HyperParams::*>
      field;
  double default_value = 0;  // for absent optional numeric keys (derived defaults: see hparams)
};

// ---- Tensors -------------------------------------------------------------------------------

// Which blocks a per-block tensor belongs to. kGlobal tensors have no block index.
enum class Scope { kGlobal, kBlock, kDenseBlock, kMoeBlock };

enum class Need { kRequired, kOptional, kNotExpected };

// Answers "does the file hold this tensor?" while presence rules are evaluated.
using HasTensorFn = std::function<bool(const std::string&)>;

// How a tensor is divided among tensor-parallel ranks.
enum class SplitKind {
  kReplicated,    // every rank holds all of it
  kOutputRows,    // along ne1 (rows of a matrix, or ne0 of its 1-D bias)
  kInputColumns,  // along ne0 of a matrix: partial products, then all-reduce
  kHeads,         // along ne2 of a per-head 3-D tensor (attn_k_b, attn_v_b)
  kExpertRows,    // along ne1 of every expert of a 3-D expert tensor
  kExpertColumns  // along ne0 of every expert of a 3-D expert tensor
};

std::string_view SplitKindName(SplitKind k);
// The ggml dim a split kind divides; -1 for kReplicated.
int SplitDim(SplitKind k, size_t n_dims);

// Which division of the block's work a split tensor follows (shard_plan.h). The tensors of
// one partition in one block are cut at the same places, so that the rank that holds a
// head's query rows also holds its output columns, say.
enum class Partition {
  kNone,       // replicated
  kVocab,      // vocabulary rows: ceil/floor shares (the last ranks may get fewer)
  kHeads,      // the attention's query heads (GQA) or heads (MLA)
  kKvHeads,    // GQA's KV heads: each rank holds those its query heads use
  kFfn,        // a dense block's SwiGLU hidden dim
  kExpertFfn,  // the routed experts' hidden dim, or whole experts under expert parallelism
  kSharedFfn,  // the shared experts' hidden dim
};
std::string_view PartitionName(Partition p);

// One part of a fused tensor's split dim (attn_qkv: Q, K, V), divided as its partition is.
struct Segment {
  int64_t size = 0;  // elements along the split dim
  Partition partition = Partition::kNone;
  int64_t unit = 1;  // elements per unit of the partition (a head's rows, say)
};

struct TensorSpec {
  const char* name;  // "token_embd.weight", or a block pattern "attn_q.weight" (-> blk.N.)
  Scope scope;
  std::function<Dims(const HyperParams&, uint32_t layer)> shape;
  std::function<Need(const HyperParams&, uint32_t layer, const HasTensorFn&)> need;
  bool needs_float = false;  // the consumer computes with it in float (router, norms, ...)
  SplitKind split = SplitKind::kReplicated;
  // What the split dim counts, and how many of its elements make one unit of it (a head's
  // rows: whole heads go to a rank).
  Partition partition = Partition::kNone;
  std::function<int64_t(const HyperParams&, uint32_t layer)> split_unit;
  // A fused tensor whose split dim is several parts, each divided separately (attn_qkv:
  // Q by the query heads, K and V by the KV heads).
  std::function<std::vector<Segment>(const HyperParams&, uint32_t layer)> segments;
  const char* role = "";
  // A block tensor the NextN/MTP block holds but does not run (its DSA indexer: the MTP
  // block attends densely); left skipped when the MTP block is mapped.
  bool mtp_unused = false;
};

// How an architecture's forward pass differs from the others', beyond what its tensors and
// hyper-parameters say. Read by the executor (both devices), the float64 reference and
// `validate`, so that what is reported is what runs.
struct ForwardTraits {
  bool mla = false;              // multi-head latent attention, absorbed form (spec 10.3)
  bool dsa = false;              // DeepSeek sparse attention's lightning indexer (spec 12.4)
  bool moe_always_norm = false;  // the chosen experts' weights renormalised unconditionally
  // The MLA attention scale reads rope.scaling.yarn_log_multiplier (deepseek2, spec 10.6).
  bool mla_yarn_log_multiplier = false;
};

struct ArchSpec {
  std::string name;
  std::vector<KeySpec> keys;
  std::vector<TensorSpec> tensors;
  // The NextN/MTP blocks' own tensors (blk.N.nextn.*, N >= n_layer), mapped beside the
  // block tensors above when MTP is asked for (MapOptions::mtp); empty: no MTP support.
  std::vector<TensorSpec> nextn_tensors;
  RopeType rope_type = RopeType::kNorm;
  ForwardTraits forward;
  GatingFunc default_gating = GatingFunc::kSoftmax;
  bool mla_requires_split_kv_b = false;  // glm-dsa: only the attn_k_b/attn_v_b form
  std::string notes;                     // one line for `validate`
};

// The architecture named `name` (the value of general.architecture), or nullptr.
const ArchSpec* FindArch(std::string_view name);
// Names of every supported architecture, in registry order.
std::vector<std::string> SupportedArchNames();

// The full tensor name of `spec` for block `layer` ("blk.3.attn_q.weight").
std::string TensorName(const TensorSpec& spec, uint32_t layer);

}  // namespace tessera::model
