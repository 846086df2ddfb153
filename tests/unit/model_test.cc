// Every architecture: gen-model -> map -> shard plans for TP 1..8 whose byte ranges cover
// every byte of every split tensor exactly once (replicated tensors: once per rank; GQA KV
// heads: once per rank whose query heads use them), and the real models' shapes planned at
// TP 1..8 with balanced ranks.
#include <array>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/model/arch.h"
#include "common/model/shard_plan.h"
#include "common/model/synthetic.h"
#include "common/model/tensor_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::model {
namespace {

using ::testing::HasSubstr;

struct Loaded {
  gguf::GgufModel file;
  HyperParams hp;
  std::vector<KeyProblem> key_problems;
};

std::string WriteSynthetic(const SyntheticOptions& o) {
  auto w = BuildSyntheticModel(o);
  EXPECT_TRUE(w.ok()) << w.status();
  std::string path = absl::StrCat(::testing::TempDir(), "/synthetic-", o.arch, "-", o.quant, "-",
                                  o.preset, ".gguf");
  EXPECT_TRUE(w->WriteFile(path).ok());
  return path;
}

Loaded Load(const std::string& path) {
  auto f = gguf::GgufModel::Open(path);
  EXPECT_TRUE(f.ok()) << f.status();
  std::string arch = *f->metadata().GetString("general.architecture");
  std::vector<KeyProblem> problems;
  HyperParams hp = LoadHyperParams(*FindArch(arch), arch, f->metadata(), nullptr, &problems);
  return {*std::move(f), hp, problems};
}

// How many ranks must read each element along a split tensor's split dim: replicated
// tensors every rank; a GQA KV head every rank whose query heads (BlockShare) include one of
// its group; everything else exactly one rank. Checks on the way that the query heads and
// (under expert parallelism) the experts of every block are dealt out exactly once.
int ExpectedReaders(const TensorMapping& m, const HyperParams& hp, const ShardPlan& plan,
                    int64_t index_along_split) {
  if (m.spec->split == SplitKind::kReplicated || plan.tp == 1) return plan.tp;
  if (m.spec->partition != Partition::kKvHeads) return 1;
  const int64_t unit = m.spec->split_unit(hp, m.layer);
  const int64_t kv = index_along_split / unit;
  const int64_t group = hp.n_head[m.layer] / hp.n_head_kv[m.layer];
  int readers = 0;
  for (const RankPlan& rp : plan.ranks) {
    const BlockShare& b = rp.blocks[m.layer];
    if (b.heads() > 0 && b.head_begin < (kv + 1) * group && b.head_end > kv * group) ++readers;
  }
  return readers;
}

void ExpectSharesPartition(const HyperParams& hp, const ShardPlan& plan) {
  for (uint32_t l = 0; l < hp.n_layer; ++l) {
    std::vector<int> head_owners(hp.n_head[l], 0), expert_owners(hp.n_expert, 0);
    for (const RankPlan& rp : plan.ranks) {
      const BlockShare& b = rp.blocks[l];
      for (int64_t h = b.head_begin; h < b.head_end; ++h) ++head_owners[h];
      for (int64_t e = b.expert_begin; e < b.expert_end; ++e) ++expert_owners[e];
    }
    for (int n : head_owners) ASSERT_EQ(n, 1) << "block " << l << " at TP " << plan.tp;
    if (plan.expert_parallel && hp.is_moe_block(l)) {
      for (int n : expert_owners) ASSERT_EQ(n, 1) << "block " << l << " at TP " << plan.tp;
    }
  }
}

// Counts, per byte of each loaded tensor, how many ranks read it, against ExpectedReaders.
void ExpectExactCoverage(const TensorMap& map, const HyperParams& hp, const ShardPlan& plan) {
  ExpectSharesPartition(hp, plan);
  std::vector<std::vector<uint8_t>> reads(map.tensors.size());
  for (size_t i = 0; i < map.tensors.size(); ++i) {
    if (map.tensors[i].loaded()) reads[i].assign(map.tensors[i].info->n_bytes, 0);
  }
  for (const RankPlan& rp : plan.ranks) {
    for (const TensorShard& s : rp.shards) {
      const gguf::TensorInfo& t = *map.tensors[s.mapping].info;
      for (const ByteRange& r : s.ranges) {
        ASSERT_EQ(r.part, t.part);
        for (uint64_t k = 0; k < r.count; ++k) {
          uint64_t begin = r.offset + k * r.stride;
          ASSERT_GE(begin, t.file_offset) << t.name;
          ASSERT_LE(begin + r.length, t.file_offset + t.n_bytes) << t.name;
          for (uint64_t b = begin; b < begin + r.length; ++b) ++reads[s.mapping][b - t.file_offset];
        }
      }
    }
  }
  for (size_t i = 0; i < map.tensors.size(); ++i) {
    const TensorMapping& m = map.tensors[i];
    if (!m.loaded()) continue;
    const gguf::TensorInfo& t = *m.info;
    // Byte b's index along the split dim: KV tensors are split by rows (attn_k/v) or are
    // 1-D biases.
    const uint64_t row_bytes = t.dims.size() == 1 ? t.n_bytes / t.dims[0] : t.n_bytes / t.dims[1];
    for (size_t b = 0; b < reads[i].size(); ++b) {
      const int want = ExpectedReaders(m, hp, plan, static_cast<int64_t>(b / row_bytes));
      ASSERT_EQ(reads[i][b], want) << m.name << " byte " << b << " at TP " << plan.tp;
    }
  }
}

class EveryArch : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(EveryArch, GeneratedModelMapsCleanlyAndShardsExactly) {
  SyntheticOptions o;
  o.arch = std::get<0>(GetParam());
  o.quant = std::get<1>(GetParam());
  Loaded l = Load(WriteSynthetic(o));
  for (const KeyProblem& p : l.key_problems) EXPECT_FALSE(p.error) << p.message;
  const ArchSpec& arch = *FindArch(o.arch);
  TensorMap map = MapTensors(arch, l.hp, l.file);
  EXPECT_THAT(map.problems, ::testing::IsEmpty());
  size_t found = 0, skipped = 0;
  for (const TensorMapping& m : map.tensors) {
    if (m.loaded()) ++found;
    if (m.status == MapStatus::kSkipped) {
      ++skipped;
      EXPECT_EQ(m.reason, "MTP layer, not used for decoding") << m.name;
      EXPECT_GE(m.layer, l.hp.n_layer);
    }
    if (m.loaded() && m.spec->needs_float && m.info->type != gguf::GgmlType::kF32) {
      ASSERT_FALSE(m.fixups.empty()) << m.name;
      EXPECT_EQ(m.fixups[0].kind, FixupKind::kDequantize);
    }
  }
  EXPECT_EQ(found + skipped, l.file.tensors().size());
  EXPECT_EQ(skipped, map.mtp_tensors);
  EXPECT_EQ(skipped > 0, l.hp.n_nextn > 0);

  // Every TP size plans (uneven shares, replicated KV heads and whole-on-one-rank parts
  // where needed), and every byte is read by exactly the ranks that compute with it.
  EXPECT_EQ(ValidTpSizes(map, l.hp, 8), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
  for (int tp : {1, 2, 3, 4, 6, 8}) {
    SCOPED_TRACE(absl::StrCat(o.arch, " ", o.quant, " TP ", tp));
    ShardPlan plan = BuildShardPlan(map, l.hp, tp);
    ASSERT_THAT(plan.problems, ::testing::IsEmpty());
    ExpectExactCoverage(map, l.hp, plan);
    // Split tensors divide their bytes; the ranks together read the whole model once, plus
    // the replicated tensors (tp - 1) more times, plus KV heads held by several ranks.
    uint64_t total = 0, replicated = 0;
    for (const TensorMapping& m : map.tensors) {
      if (!m.loaded()) continue;
      total += m.info->n_bytes;
      if (m.spec->split == SplitKind::kReplicated) replicated += m.info->n_bytes;
    }
    uint64_t read = 0;
    for (const RankPlan& rp : plan.ranks) read += rp.read_bytes;
    EXPECT_GE(read, total + (tp - 1) * replicated);
  }
}

INSTANTIATE_TEST_SUITE_P(Synthetic, EveryArch,
                         ::testing::Combine(::testing::Values("llama", "qwen2", "qwen3", "qwen3moe",
                                                              "deepseek2", "glm4moe", "glm-dsa"),
                                            ::testing::Values("F32", "Q4_K_M", "Q8_0")),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(Hyperparams, GqaKvBytesPerTokenFollowTheHeads) {
  SyntheticOptions o;  // llama tiny: 2 layers, 2 KV heads of 64
  Loaded l = Load(WriteSynthetic(o));
  TensorMap map = MapTensors(*FindArch("llama"), l.hp, l.file);
  // 2 layers x 2 KV heads x (64 + 64) x 2 bytes
  EXPECT_EQ(BuildShardPlan(map, l.hp, 1).ranks[0].kv_bytes_per_token, 2u * 2 * 128 * 2);
  EXPECT_EQ(BuildShardPlan(map, l.hp, 2).ranks[1].kv_bytes_per_token, 2u * 1 * 128 * 2);
}

TEST(Hyperparams, MlaCachesTheLatentAndIndexerKeys) {
  SyntheticOptions o;
  o.arch = "glm-dsa";  // tiny: 2 trunk layers, c 256, rope 32, indexer keys 64
  Loaded l = Load(WriteSynthetic(o));
  TensorMap map = MapTensors(*FindArch("glm-dsa"), l.hp, l.file);
  uint64_t per_token = 2u * ((256 + 32) * 2 + 64 * 4);
  EXPECT_EQ(BuildShardPlan(map, l.hp, 1).ranks[0].kv_bytes_per_token, per_token);
  // Not reduced by TP: the latent is shared by all heads.
  EXPECT_EQ(BuildShardPlan(map, l.hp, 2).ranks[1].kv_bytes_per_token, per_token);
}

TEST(Glm5Shape, HasGlm5sCensusAndPlansAtTp8) {
  SyntheticOptions o;
  o.arch = "glm-dsa";
  o.preset = "glm5-shape";
  auto w = BuildSyntheticModel(o);
  ASSERT_TRUE(w.ok()) << w.status();
  // Spec 12.2: 3 + 3*18 + 75*23 + 27 = 1809 tensors.
  EXPECT_EQ(w->tensor_count(), 1809u);
  std::string prefix = ::testing::TempDir() + "/glm5";
  auto parts = w->WriteSplit(prefix, 181);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->size(), 10u);
  Loaded l = Load(parts->front());
  EXPECT_EQ(l.hp.n_layer, 78u);
  TensorMap map = MapTensors(*FindArch("glm-dsa"), l.hp, l.file);
  EXPECT_THAT(map.problems, ::testing::IsEmpty());
  EXPECT_EQ(map.mtp_tensors, 27u);
  // The operators' traps: router and indexer.proj stored Q4_K get the dequantize fixup.
  for (const char* name : {"blk.5.ffn_gate_inp.weight", "blk.5.indexer.proj.weight"}) {
    const TensorMapping* m = nullptr;
    for (const TensorMapping& t : map.tensors) {
      if (t.name == name) m = &t;
    }
    ASSERT_NE(m, nullptr) << name;
    EXPECT_EQ(m->info->type, gguf::GgmlType::kQ4_K);
    ASSERT_EQ(m->fixups.size(), 1u);
    EXPECT_EQ(m->fixups[0].kind, FixupKind::kDequantize);
  }
  ShardPlan plan = BuildShardPlan(map, l.hp, 8);
  EXPECT_THAT(plan.problems, ::testing::IsEmpty());
  // 78 layers x (576 x 2 B latent + 128 x 4 B indexer key) per token, on every rank.
  EXPECT_EQ(plan.ranks[7].kv_bytes_per_token, 78u * (576 * 2 + 128 * 4));
  for (const auto& f : *parts) std::filesystem::remove(f);
}

// The presets whose shapes tensor parallelism cannot divide evenly: every TP size plans,
// with expert parallelism chosen where the experts' hidden dim cannot be shared evenly in
// whole blocks (and on or off as asked), and every byte read by exactly its ranks.
TEST(ShardPlan, UnevenShapesPlanAtEveryTp) {
  for (const std::string arch :
       {"llama", "qwen2", "qwen3", "qwen3moe", "deepseek2", "glm4moe", "glm-dsa"}) {
    for (const std::string quant : {"Q6_K", "Q4_K_M", "Q8_0"}) {
      SyntheticOptions o;
      o.arch = arch;
      o.preset = "uneven";
      o.quant = quant;
      Loaded l = Load(WriteSynthetic(o));
      TensorMap map = MapTensors(*FindArch(arch), l.hp, l.file);
      ASSERT_THAT(map.problems, ::testing::IsEmpty());
      for (ExpertParallel ep : {ExpertParallel::kAuto, ExpertParallel::kOn, ExpertParallel::kOff}) {
        for (int tp = 1; tp <= 8; ++tp) {
          SCOPED_TRACE(absl::StrCat(arch, " ", quant, " TP ", tp, " EP ",
                                    std::string(ExpertParallelName(ep))));
          ShardPlan plan = BuildShardPlan(map, l.hp, tp, {.kv = {}, .experts = ep});
          ASSERT_THAT(plan.problems, ::testing::IsEmpty());
          EXPECT_EQ(plan.expert_parallel,
                    l.hp.is_moe() && tp > 1 &&
                        (ep == ExpertParallel::kOn ||
                         // 192 columns: 6 blocks of 32 (K-quants fall back to 32-element
                         // types for rows that are not whole 256-element blocks).
                         (ep == ExpertParallel::kAuto && 6 % tp != 0)));
          ExpectExactCoverage(map, l.hp, plan);
          if (tp > 1) {
            EXPECT_THAT(plan.strategy, ::testing::Not(::testing::IsEmpty()));
          }
        }
      }
    }
  }
}

TEST(ShardPlan, FewerKvHeadsThanRanksAreReplicatedWhereTheirQueryHeadsAre) {
  SyntheticOptions o;  // uneven: 8 query heads of 32 over 2 KV heads (groups of 4), F32
  o.preset = "uneven";
  Loaded l = Load(WriteSynthetic(o));
  TensorMap map = MapTensors(*FindArch("llama"), l.hp, l.file);
  ShardPlan plan = BuildShardPlan(map, l.hp, 3);
  ASSERT_THAT(plan.problems, ::testing::IsEmpty());
  // Block 0 (not rotated): query heads 0-1 / 2-4 / 5-7; rank 1's cut the first group, so it
  // keeps both KV heads.
  const std::vector<std::array<int64_t, 4>> want = {{0, 2, 0, 1}, {2, 5, 0, 2}, {5, 8, 1, 2}};
  for (int r = 0; r < 3; ++r) {
    const BlockShare& b = plan.ranks[r].blocks[0];
    EXPECT_EQ((std::array<int64_t, 4>{b.head_begin, b.head_end, b.kv_head_begin, b.kv_head_end}),
              want[r])
        << "rank " << r;
  }
  // Block 1 is rotated by one rank: rank 0 takes the second share, rank 2 the first.
  EXPECT_EQ(plan.ranks[0].blocks[1].head_begin, 2);
  EXPECT_EQ(plan.ranks[2].blocks[1].head_begin, 0);
  // The cache: 3 layers x 2 KV heads (every rank's widest) x (32 + 32) x 2 bytes.
  for (const RankPlan& rp : plan.ranks) EXPECT_EQ(rp.kv_bytes_per_token, 3u * 2 * 64 * 2);
  EXPECT_THAT(plan.strategy,
              ::testing::Contains(HasSubstr("KV heads: 2 over 3: 1/2/1 (replicated")));
}

TEST(ShardPlan, ExpertParallelismDealsOutWholeExperts) {
  SyntheticOptions o;
  o.arch = "qwen3moe";
  o.preset = "uneven";  // 6 experts of 192
  o.quant = "Q8_0";
  Loaded l = Load(WriteSynthetic(o));
  TensorMap map = MapTensors(*FindArch("qwen3moe"), l.hp, l.file);
  ShardPlan plan = BuildShardPlan(map, l.hp, 4);  // 6 blocks of 32 over 4 ranks: EP
  ASSERT_THAT(plan.problems, ::testing::IsEmpty());
  ASSERT_TRUE(plan.expert_parallel);
  EXPECT_THAT(plan.strategy,
              ::testing::Contains(HasSubstr("routed experts: expert parallel, 6 experts: ")));
  EXPECT_THAT(plan.strategy, ::testing::Contains(HasSubstr("cannot share evenly")));
  // Each rank reads whole experts: its gate stack is [experts x 192 rows x 256 columns].
  for (const RankPlan& rp : plan.ranks) {
    const BlockShare& b = rp.blocks[0];
    for (const TensorShard& s : rp.shards) {
      const TensorMapping& m = map.tensors[s.mapping];
      if (m.name != "blk.0.ffn_gate_exps.weight") continue;
      EXPECT_EQ(s.dim, 2);
      EXPECT_EQ(s.begin, b.expert_begin);
      EXPECT_EQ(s.end, b.expert_end);
      EXPECT_EQ(s.read_bytes, m.info->n_bytes / 6 * (b.expert_end - b.expert_begin));
    }
  }
  // Asked off, the experts' hidden dim is divided instead (unevenly: 2/2/1/1 blocks).
  ShardPlan off = BuildShardPlan(map, l.hp, 4, {.kv = {}, .experts = ExpertParallel::kOff});
  ASSERT_THAT(off.problems, ::testing::IsEmpty());
  EXPECT_FALSE(off.expert_parallel);
  // And on where it is not needed (TP 2 divides 6 blocks evenly).
  EXPECT_FALSE(BuildShardPlan(map, l.hp, 2).expert_parallel);
  EXPECT_TRUE(
      BuildShardPlan(map, l.hp, 2, {.kv = {}, .experts = ExpertParallel::kOn}).expert_parallel);
}

// The real models' shapes (metadata only, Q4_K_M-like mixes): every TP size from 1 to 8
// plans, with the per-rank weights within 10% of each other.
TEST(RealShapes, EveryModelPlansAtEveryTpWithBalancedRanks) {
  struct Shape {
    const char* arch;
    const char* preset;
  };
  for (const Shape& sh :
       {Shape{"qwen3moe", "qwen3-235b-shape"}, Shape{"qwen3moe", "qwen3-30b-shape"},
        Shape{"glm4moe", "glm45-air-shape"}, Shape{"deepseek2", "deepseek-v3-shape"},
        Shape{"glm-dsa", "glm5-shape"}}) {
    SyntheticOptions o;
    o.arch = sh.arch;
    o.preset = sh.preset;
    auto w = BuildSyntheticModel(o);
    ASSERT_TRUE(w.ok()) << w.status();
    const std::string path = absl::StrCat(::testing::TempDir(), "/", sh.preset, ".gguf");
    ASSERT_TRUE(w->WriteFile(path).ok());
    Loaded l = Load(path);
    TensorMap map = MapTensors(*FindArch(sh.arch), l.hp, l.file);
    ASSERT_THAT(map.problems, ::testing::IsEmpty()) << sh.preset;
    for (int tp = 1; tp <= 8; ++tp) {
      ShardPlan plan = BuildShardPlan(map, l.hp, tp);
      ASSERT_THAT(plan.problems, ::testing::IsEmpty()) << sh.preset << " TP " << tp;
      uint64_t lo = UINT64_MAX, hi = 0;
      for (const RankPlan& rp : plan.ranks) {
        lo = std::min(lo, rp.weight_bytes);
        hi = std::max(hi, rp.weight_bytes);
      }
      const double spread = static_cast<double>(hi - lo) / static_cast<double>(lo);
      std::printf("%-18s TP %d: %s, rank weights %.2f-%.2f GiB (spread %.2f%%)\n", sh.preset, tp,
                  plan.expert_parallel ? "EP" : "TP experts", lo / 1073741824.0, hi / 1073741824.0,
                  100 * spread);
      EXPECT_LE(spread, 0.10) << sh.preset << " TP " << tp;
    }
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace tessera::model
