#include "common/model/shard_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/util/strings.h"

namespace tessera::model {
namespace {

// Bytes per element after the `dequantize` / `split_kv_b` fixups, or of the stored type.
bool HeldAsFloat(const TensorMapping& m) {
  for (const Fixup& f : m.fixups) {
    if (f.kind == FixupKind::kDequantize || f.kind == FixupKind::kSplitKvB) return true;
  }
  return false;
}

struct Piece {
  int64_t begin, end;  // along the split dim
};

// Splits [0, size) into `tp` pieces along the split dim, segment by segment, in whole units.
// Returns false (with `why`) when it cannot.
bool SplitDimension(const TensorMapping& m, const HyperParams& hp, int tp, int64_t size,
                    std::vector<std::vector<Piece>>* per_rank, std::string* why) {
  const TensorSpec& spec = *m.spec;
  std::vector<int64_t> segments =
      spec.segments ? spec.segments(hp, m.layer) : std::vector<int64_t>{size};
  int64_t unit = spec.split_unit ? spec.split_unit(hp, m.layer) : 1;
  if (unit <= 0) unit = 1;
  per_rank->assign(tp, {});
  int64_t seg_start = 0;
  for (int64_t seg : segments) {
    if (seg % unit != 0) {
      *why = absl::StrCat("its split dimension (", seg, ") is not a whole number of ", unit,
                          "-element units");
      return false;
    }
    int64_t chunks = seg / unit;
    if (chunks % tp != 0 && !spec.uneven_ok) {
      *why = absl::StrCat(chunks, unit > 1 ? " heads" : " rows", " of ",
                          unit == 1 ? "" : absl::StrCat(unit, " elements "),
                          "cannot be divided among ", tp, " ranks");
      return false;
    }
    if (chunks < tp) {
      *why = absl::StrCat("only ", chunks, " units to divide among ", tp, " ranks");
      return false;
    }
    for (int r = 0; r < tp; ++r) {
      int64_t c0 = chunks * r / tp, c1 = chunks * (r + 1) / tp;
      (*per_rank)[r].push_back({seg_start + c0 * unit, seg_start + c1 * unit});
    }
    seg_start += seg;
  }
  return true;
}

}  // namespace

ShardPlan BuildShardPlan(const TensorMap& map, const HyperParams& hp, int tp,
                         const KvOptions& kv_options) {
  ShardPlan plan;
  plan.tp = tp;
  plan.ranks.resize(tp);
  for (int r = 0; r < tp; ++r) plan.ranks[r].rank = r;

  for (size_t i = 0; i < map.tensors.size(); ++i) {
    const TensorMapping& m = map.tensors[i];
    if (!m.loaded()) continue;
    const gguf::TensorInfo& t = *m.info;
    const gguf::GgmlTypeInfo* type = gguf::LookupGgmlType(t.type);
    const uint64_t be = type->block_elems, bb = type->block_bytes;
    const bool as_float = HeldAsFloat(m);
    std::vector<int64_t> ne = t.dims;
    while (ne.size() < 4) ne.push_back(1);
    const uint64_t row_bytes = static_cast<uint64_t>(ne[0]) / be * bb;
    int dim = SplitDim(m.spec->split, t.dims.size());

    if (dim < 0 || tp == 1) {
      for (RankPlan& rp : plan.ranks) {
        TensorShard s{i,
                      0,
                      dim < 0 ? 0 : ne[dim],
                      {{t.part, t.file_offset, t.n_bytes, t.n_bytes, 1}},
                      t.n_bytes,
                      as_float ? t.n_elements * 4 : t.n_bytes};
        rp.shards.push_back(std::move(s));
      }
      continue;
    }
    std::vector<std::vector<Piece>> pieces;
    std::string why;
    if (!SplitDimension(m, hp, tp, ne[dim], &pieces, &why)) {
      plan.problems.push_back(
          absl::StrCat("tensor ", m.name, " (", ToAbsl(SplitKindName(m.spec->split)), "): ", why));
      continue;
    }
    bool ok = true;
    for (int r = 0; r < tp && ok; ++r) {
      TensorShard s;
      s.mapping = i;
      s.begin = pieces[r].front().begin;
      s.end = pieces[r].back().end;
      uint64_t elems = 0;
      for (const Piece& p : pieces[r]) {
        const uint64_t len = static_cast<uint64_t>(p.end - p.begin);
        const uint64_t begin = static_cast<uint64_t>(p.begin);
        ByteRange br;
        br.part = t.part;
        if (dim == 0) {
          // Columns of every row: pieces must fall on quant-block boundaries.
          if (begin % be != 0 || len % be != 0) {
            plan.problems.push_back(absl::StrCat(
                "tensor ", m.name, " (", gguf::GgmlTypeName(static_cast<uint32_t>(t.type)),
                "): splitting its rows of ", ne[0], " into ", tp, " parts gives pieces of ", len,
                " elements, not whole ", be, "-element quant blocks"));
            ok = false;
            break;
          }
          br.offset = t.file_offset + begin / be * bb;
          br.length = len / be * bb;
          br.stride = row_bytes;
          br.count = static_cast<uint64_t>(ne[1] * ne[2] * ne[3]);
          elems += len * br.count;
        } else if (dim == 1) {
          br.offset = t.file_offset + begin * row_bytes;
          br.length = len * row_bytes;
          br.stride = static_cast<uint64_t>(ne[1]) * row_bytes;
          br.count = static_cast<uint64_t>(ne[2] * ne[3]);
          elems += len * static_cast<uint64_t>(ne[0]) * br.count;
        } else {
          const uint64_t matrix = static_cast<uint64_t>(ne[1]) * row_bytes;
          br.offset = t.file_offset + begin * matrix;
          br.length = len * matrix;
          br.stride = static_cast<uint64_t>(ne[2]) * matrix;
          br.count = static_cast<uint64_t>(ne[3]);
          elems += len * static_cast<uint64_t>(ne[0] * ne[1]) * br.count;
        }
        s.ranges.push_back(br);
        s.read_bytes += br.bytes();
      }
      s.held_bytes = as_float ? elems * 4 : s.read_bytes;
      plan.ranks[r].shards.push_back(std::move(s));
    }
  }

  for (RankPlan& rp : plan.ranks) {
    for (const TensorShard& s : rp.shards) {
      rp.read_bytes += s.read_bytes;
      rp.weight_bytes += s.held_bytes;
    }
  }

  // KV cache per token (spec 10.3, 12.7, 16): GQA splits KV heads across ranks; MLA's latent
  // and the DSA indexer keys are per token, replicated on every rank. Mapped MTP blocks have
  // a cache layer of their own (no indexer keys: they attend densely).
  uint64_t kv = 0;
  for (uint32_t l = 0; l < hp.n_layer + map.mtp_blocks && l < hp.n_layer_all; ++l) {
    if (hp.is_mla()) {
      // Legacy attn_kv_b files are split into attn_k_b/attn_v_b at load (fixup split_kv_b),
      // so every MLA model caches the latent form.
      kv += uint64_t{hp.kv_lora_rank + hp.n_rot} * kv_options.kv_element_bytes;
      if (hp.indexer_heads > 0 && l < hp.n_layer && l < hp.indexer_full.size() &&
          hp.indexer_full[l]) {
        kv += uint64_t{hp.indexer_head_dim} * kv_options.indexer_element_bytes;
      }
    } else {
      kv += uint64_t{hp.n_head_kv[l]} / tp * (hp.head_dim_k + hp.head_dim_v) *
            kv_options.kv_element_bytes;
    }
  }
  for (RankPlan& rp : plan.ranks) rp.kv_bytes_per_token = kv;
  return plan;
}

std::string SummarizeProblems(const std::vector<std::string>& problems, size_t max) {
  std::vector<std::string> shown(problems.begin(),
                                 problems.begin() + std::min(max, problems.size()));
  std::string out = absl::StrJoin(shown, "; ");
  if (problems.size() > shown.size()) {
    absl::StrAppend(&out, "; ... and ", problems.size() - shown.size(), " more");
  }
  return out;
}

std::vector<int> ValidTpSizes(const TensorMap& map, const HyperParams& hp, int max_tp) {
  std::vector<int> out;
  for (int tp = 1; tp <= max_tp; ++tp) {
    if (BuildShardPlan(map, hp, tp).problems.empty()) out.push_back(tp);
  }
  return out;
}

}  // namespace tessera::model
