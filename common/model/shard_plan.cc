#include "common/model/shard_plan.h"

#include <algorithm>
#include <map>
#include <numeric>

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

struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// One tensor, or one segment of a fused tensor, that follows a partition of its block.
struct Member {
  size_t mapping = 0;
  int64_t units = 0;       // the partition's units along its split dim
  int64_t unit_elems = 1;  // elements per unit
  bool columns = false;    // divided along ne0: cuts must fall on quant-block boundaries
  int64_t block_elems = 1;
};

// A partition of one block (or the vocabulary): its tensors, and per rank the units it holds.
struct Group {
  std::vector<Member> members;
  int64_t units = -1;
  std::vector<Range> cut;  // per rank, in units
  std::string how;         // for ShardPlan::strategy
};
using GroupKey = std::pair<uint32_t, Partition>;

int64_t Lcm(int64_t a, int64_t b) { return a / std::gcd(a, b) * b; }

// The fewest units whose elements fall on every column-split member's quant-block
// boundaries.
int64_t Granularity(const Group& g) {
  int64_t gran = 1;
  for (const Member& m : g.members) {
    if (m.columns) gran = Lcm(gran, m.block_elems / std::gcd(m.block_elems, m.unit_elems));
  }
  return gran;
}

// `units` in chunks of `gran` units, ceil/floor chunks per rank; where the shares differ,
// rank r takes the share of slot (r + rotate) mod tp, so that blocks rotated differently put
// their larger shares on different ranks.
std::vector<Range> CutEvenly(int64_t units, int64_t gran, int tp, int rotate) {
  const int64_t chunks = units / gran;
  if (chunks % tp == 0) rotate = 0;  // equal shares: every block alike
  std::vector<Range> cut(tp);
  for (int r = 0; r < tp; ++r) {
    const int64_t s = (r + rotate) % tp;
    cut[r] = {gran * (chunks * s / tp), gran * (chunks * (s + 1) / tp)};
  }
  return cut;
}

bool EqualShares(const std::vector<Range>& cut) {
  for (const Range& r : cut) {
    if (r.size() != cut.front().size()) return false;
  }
  return true;
}

std::vector<Range> WholeOn(int64_t units, int tp, int rank) {
  std::vector<Range> cut(tp);
  cut[rank] = {0, units};
  return cut;
}

// The shares in the order of the units they hold (the unrotated order, so that blocks cut
// alike read alike), e.g. "11/11/10".
std::string Shares(std::vector<Range> cut) {
  std::stable_sort(cut.begin(), cut.end(), [](const Range& a, const Range& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::vector<int64_t> n;
  for (const Range& r : cut) n.push_back(r.size());
  return absl::StrJoin(n, "/");
}

}  // namespace

std::string_view ExpertParallelName(ExpertParallel e) {
  switch (e) {
    case ExpertParallel::kAuto:
      return "auto";
    case ExpertParallel::kOn:
      return "on";
    case ExpertParallel::kOff:
      return "off";
  }
  return "?";
}

std::optional<ExpertParallel> ParseExpertParallel(std::string_view s) {
  if (s == "auto") return ExpertParallel::kAuto;
  if (s == "on" || s == "true") return ExpertParallel::kOn;
  if (s == "off" || s == "false") return ExpertParallel::kOff;
  return std::nullopt;
}

namespace {

// BuildShardPlan; with `cuts_only`, stops once every partition is cut (the problems are
// known then: ValidTpSizes).
ShardPlan Plan(const TensorMap& map, const HyperParams& hp, int tp, const PlanOptions& options,
               bool cuts_only) {
  ShardPlan plan;
  plan.tp = tp;
  plan.ranks.resize(tp);
  for (int r = 0; r < tp; ++r) plan.ranks[r].rank = r;
  const uint32_t n_blocks = std::min(hp.n_layer + map.mtp_blocks, hp.n_layer_all);

  // 1. Every split tensor (segment) joins its block's partition.
  std::map<GroupKey, Group> groups;
  std::vector<std::vector<Segment>> segments_of(map.tensors.size());
  for (size_t i = 0; i < map.tensors.size(); ++i) {
    const TensorMapping& m = map.tensors[i];
    if (!m.loaded() || m.spec->split == SplitKind::kReplicated) continue;
    const gguf::TensorInfo& t = *m.info;
    const int dim = SplitDim(m.spec->split, t.dims.size());
    const int64_t size = t.dims[dim];
    std::vector<Segment> segs =
        m.spec->segments
            ? m.spec->segments(hp, m.layer)
            : std::vector<Segment>{{size, m.spec->partition,
                                    m.spec->split_unit ? m.spec->split_unit(hp, m.layer) : 1}};
    int64_t total = 0;
    bool ok = true;
    for (const Segment& s : segs) {
      total += s.size;
      if (s.unit <= 0 || s.size % s.unit != 0 || s.partition == Partition::kNone) {
        plan.problems.push_back(absl::StrCat("tensor ", m.name, ": its split dimension (", s.size,
                                             ") is not a whole number of ", s.unit,
                                             "-element units"));
        ok = false;
      }
    }
    if (ok && total != size) {
      plan.problems.push_back(absl::StrCat("tensor ", m.name, ": its parts add up to ", total,
                                           " of its ", size, " elements"));
      ok = false;
    }
    if (!ok) continue;
    const uint32_t layer = m.spec->scope == Scope::kGlobal ? 0 : m.layer;
    for (const Segment& s : segs) {
      const gguf::GgmlTypeInfo* type = gguf::LookupGgmlType(t.type);
      groups[{layer, s.partition}].members.push_back(
          {i, s.size / s.unit, s.unit, dim == 0, static_cast<int64_t>(type->block_elems)});
    }
    segments_of[i] = std::move(segs);
  }
  for (auto& [key, g] : groups) {
    for (const Member& m : g.members) {
      if (g.units >= 0 && m.units != g.units) {
        plan.problems.push_back(absl::StrCat("tensor ", map.tensors[m.mapping].name, " has ",
                                             m.units, " ", ToAbsl(PartitionName(key.second)),
                                             " units where the other tensors of its block have ",
                                             g.units));
      }
      g.units = m.units;
    }
  }
  if (!plan.problems.empty()) return plan;

  // 2. Routed experts: whole experts per rank (expert parallelism) where asked, or where
  // their hidden dim cannot be divided evenly in whole quant blocks.
  std::string ep_why;
  for (auto& [key, g] : groups) {
    if (key.second != Partition::kExpertFfn || tp == 1) continue;
    const int64_t gran = Granularity(g);
    if (g.units % gran != 0 || (g.units / gran) % tp != 0) {
      ep_why = g.units % gran != 0
                   ? absl::StrCat("the experts' hidden dim of ", g.units,
                                  " is not a whole number of ", gran, "-column quant blocks")
                   : absl::StrCat("the experts' hidden dim of ", g.units, " is ", g.units / gran,
                                  g.units / gran == 1 ? " quant block" : " quant blocks",
                                  ", which ", tp, " ranks cannot share evenly");
      break;
    }
  }
  bool has_experts = false;
  for (const auto& [key, g] : groups) has_experts |= key.second == Partition::kExpertFfn;
  plan.expert_parallel = tp > 1 && has_experts &&
                         (options.experts == ExpertParallel::kOn ||
                          (options.experts == ExpertParallel::kAuto && !ep_why.empty()));
  const int64_t n_expert = hp.n_expert;

  // 3. Each partition's cut.
  for (auto& [key, g] : groups) {
    const auto [layer, part] = key;
    if (part == Partition::kKvHeads) continue;  // follows the query heads (below)
    if (part == Partition::kExpertFfn && plan.expert_parallel) {
      g.cut = CutEvenly(n_expert, 1, tp, static_cast<int>(layer % tp));
      g.how = absl::StrCat("expert parallel, ", n_expert, " experts: ", Shares(g.cut));
      continue;
    }
    int64_t gran = Granularity(g);
    if (part == Partition::kHeads) {
      // GQA with at least as many KV heads as ranks: whole query groups, so that no KV head
      // is held twice.
      auto kv = groups.find({layer, Partition::kKvHeads});
      if (kv != groups.end() && kv->second.units >= tp && kv->second.units > 0) {
        if (g.units % kv->second.units != 0) {
          plan.problems.push_back(absl::StrCat("block ", layer, ": ", g.units,
                                               " query heads do not share ", kv->second.units,
                                               " KV heads evenly"));
          continue;
        }
        gran = Lcm(gran, g.units / kv->second.units);
      }
    }
    const int rotate = part == Partition::kVocab ? 0 : static_cast<int>(layer % tp);
    if (g.units % gran != 0) {
      if (part == Partition::kExpertFfn) {
        plan.problems.push_back(
            absl::StrCat("block ", layer, ": the routed experts' hidden dim of ", g.units,
                         " cannot be divided in whole quant blocks; expert parallelism "
                         "(--expert-parallel) divides the experts instead"));
        continue;
      }
      g.cut = WholeOn(g.units, tp, rotate);
      g.how = absl::StrCat("whole on one rank per block: its ", g.units,
                           " units cannot be cut on the quant blocks of every tensor that "
                           "follows them (",
                           gran, " units per cut)");
      continue;
    }
    g.cut = CutEvenly(g.units, gran, tp, rotate);
    const bool even = (g.units / gran) % tp == 0;
    g.how = absl::StrCat(
        g.units, " over ", tp, ": ", Shares(g.cut),
        even        ? ""
        : gran == 1 ? " (uneven)"
                    : absl::StrCat(" (uneven: cut in whole quant blocks, ", gran, " units each)"));
  }
  // GQA KV heads: each rank keeps those its query heads use.
  for (auto& [key, g] : groups) {
    if (key.second != Partition::kKvHeads) continue;
    auto q = groups.find({key.first, Partition::kHeads});
    if (q == groups.end() || q->second.cut.empty() || g.units <= 0 ||
        q->second.units % g.units != 0) {
      plan.problems.push_back(
          absl::StrCat("block ", key.first, ": the KV heads have no query heads to follow"));
      continue;
    }
    const int64_t group = q->second.units / g.units;
    g.cut.resize(tp);
    for (int r = 0; r < tp; ++r) {
      const Range& qr = q->second.cut[r];
      g.cut[r] = qr.size() == 0 ? Range{} : Range{qr.begin / group, (qr.end + group - 1) / group};
    }
    int64_t held = 0;
    for (const Range& r : g.cut) held += r.size();
    g.how = absl::StrCat(g.units, " over ", tp, ": ", Shares(g.cut),
                         held > g.units ? " (replicated: ranks whose query heads share a KV head "
                                          "each keep it)"
                                        : "");
  }
  if (!plan.problems.empty() || cuts_only) return plan;

  // 4. Each rank's pieces of each tensor, and the bytes they are in the file.
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
    const bool ep = plan.expert_parallel && m.spec->partition == Partition::kExpertFfn;
    if (ep) dim = 2;

    if (dim < 0 || tp == 1) {
      for (RankPlan& rp : plan.ranks) {
        TensorShard s{i,
                      dim,
                      0,
                      dim < 0 ? 0 : ne[dim],
                      dim < 0 ? 0 : ne[dim],
                      {{t.part, t.file_offset, t.n_bytes, t.n_bytes, 1}},
                      t.n_bytes,
                      as_float ? t.n_elements * 4 : t.n_bytes};
        rp.shards.push_back(std::move(s));
      }
      continue;
    }
    const uint32_t layer = m.spec->scope == Scope::kGlobal ? 0 : m.layer;
    bool ok = true;
    for (int r = 0; r < tp && ok; ++r) {
      // The pieces along `dim`: one per segment, in elements.
      std::vector<Range> pieces;
      if (ep) {
        pieces.push_back(groups.at({layer, Partition::kExpertFfn}).cut[r]);
      } else {
        int64_t start = 0;
        for (const Segment& s : segments_of[i]) {
          const Range u = groups.at({layer, s.partition}).cut[r];
          pieces.push_back({start + u.begin * s.unit, start + u.end * s.unit});
          start += s.size;
        }
      }
      TensorShard s;
      s.mapping = i;
      s.dim = dim;
      s.begin = pieces.front().begin;
      s.end = pieces.back().end;
      uint64_t elems = 0;
      for (const Range& p : pieces) {
        const uint64_t len = static_cast<uint64_t>(p.size());
        const uint64_t begin = static_cast<uint64_t>(p.begin);
        if (len == 0) continue;
        s.extent += p.size();
        ByteRange br;
        br.part = t.part;
        if (dim == 0) {
          // Columns of every row: pieces must fall on quant-block boundaries.
          if (begin % be != 0 || len % be != 0) {
            plan.problems.push_back(absl::StrCat(
                "tensor ", m.name, " (", gguf::GgmlTypeName(static_cast<uint32_t>(t.type)),
                "): its rows of ", ne[0], " would be cut at ", begin, " + ", len,
                " elements, not on its ", be, "-element quant blocks"));
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

  // 5. Each rank's share of each block, and its KV cache per token (spec 10.3, 12.7, 16):
  // GQA caches the rank's KV heads, every layer as wide as its widest; MLA's latent and the
  // DSA indexer keys are per token, replicated on every rank. Mapped MTP blocks have a
  // cache layer of their own (no indexer keys: they attend densely).
  for (int r = 0; r < tp; ++r) {
    RankPlan& rp = plan.ranks[r];
    rp.blocks.resize(n_blocks);
    int64_t widest_kv = 0;
    for (uint32_t l = 0; l < n_blocks; ++l) {
      BlockShare& b = rp.blocks[l];
      const int64_t H = l < hp.n_head.size() ? hp.n_head[l] : 0;
      const int64_t Hkv = l < hp.n_head_kv.size() ? hp.n_head_kv[l] : 0;
      auto cut_of = [&](Partition p, int64_t whole) {
        auto it = groups.find({l, p});
        return it == groups.end() || it->second.cut.empty() ? Range{0, whole} : it->second.cut[r];
      };
      const Range heads = cut_of(Partition::kHeads, H);
      const Range kv = cut_of(Partition::kKvHeads, Hkv);
      b.head_begin = heads.begin;
      b.head_end = heads.end;
      b.kv_head_begin = kv.begin;
      b.kv_head_end = kv.end;
      const bool ep = plan.expert_parallel && groups.contains({l, Partition::kExpertFfn});
      const Range experts = ep ? cut_of(Partition::kExpertFfn, n_expert) : Range{0, n_expert};
      b.expert_begin = experts.begin;
      b.expert_end = experts.end;
      widest_kv = std::max(widest_kv, kv.size());
    }
    uint64_t kv = 0;
    for (uint32_t l = 0; l < n_blocks; ++l) {
      if (hp.is_mla()) {
        // Legacy attn_kv_b files are split into attn_k_b/attn_v_b at load (fixup
        // split_kv_b), so every MLA model caches the latent form.
        kv += uint64_t{hp.kv_lora_rank + hp.n_rot} * options.kv.kv_element_bytes;
        if (hp.indexer_heads > 0 && l < hp.n_layer && l < hp.indexer_full.size() &&
            hp.indexer_full[l]) {
          kv += uint64_t{hp.indexer_head_dim} * options.kv.indexer_element_bytes;
        }
      } else {
        kv += static_cast<uint64_t>(widest_kv) * (hp.head_dim_k + hp.head_dim_v) *
              options.kv.kv_element_bytes;
      }
    }
    rp.kv_bytes_per_token = kv;
  }

  // 6. How each partition was divided, once per distinct way.
  if (tp > 1) {
    for (Partition p : {Partition::kHeads, Partition::kKvHeads, Partition::kFfn,
                        Partition::kExpertFfn, Partition::kSharedFfn, Partition::kVocab}) {
      std::map<std::string, int> ways;  // the way's text, blocks cut so
      std::vector<std::string> order;
      for (const auto& [key, g] : groups) {
        if (key.second != p) continue;
        if (ways[g.how]++ == 0) order.push_back(g.how);
      }
      for (const std::string& how : order) {
        std::string line = absl::StrCat(ToAbsl(PartitionName(p)), ": ", how);
        if (p != Partition::kVocab) {
          // Equal shares look the same rotated or not; unequal ones move by one rank per
          // block.
          bool equal = true;
          for (const auto& [key, g] : groups) {
            if (key.second == p && g.how == how) equal = equal && EqualShares(g.cut);
          }
          absl::StrAppend(
              &line, " (", ways[how], ways[how] == 1 ? " block" : " blocks",
              ways[how] > 1 && !equal ? "; shares rotated by one rank per block)" : ")");
        }
        if (p == Partition::kExpertFfn && plan.expert_parallel) {
          absl::StrAppend(&line, options.experts == ExpertParallel::kOn
                                     ? "; --expert-parallel"
                                     : absl::StrCat("; chosen because ", ep_why));
        }
        plan.strategy.push_back(std::move(line));
      }
    }
  }
  return plan;
}

}  // namespace

ShardPlan BuildShardPlan(const TensorMap& map, const HyperParams& hp, int tp,
                         const PlanOptions& options) {
  return Plan(map, hp, tp, options, /*cuts_only=*/false);
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

std::vector<int> ValidTpSizes(const TensorMap& map, const HyperParams& hp, int max_tp,
                              const PlanOptions& options) {
  std::vector<int> out;
  for (int tp = 1; tp <= max_tp; ++tp) {
    if (Plan(map, hp, tp, options, /*cuts_only=*/true).problems.empty()) out.push_back(tp);
  }
  return out;
}

}  // namespace tessera::model
