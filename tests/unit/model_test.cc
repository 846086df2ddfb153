// Every architecture: gen-model -> map -> shard plans for TP 1, 2, 4, 8 whose byte ranges
// cover every byte of every split tensor exactly once (replicated tensors: once per rank).
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

// Counts, per byte of each loaded tensor, how many ranks read it.
void ExpectExactCoverage(const TensorMap& map, const ShardPlan& plan) {
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
    uint8_t want = m.spec->split == SplitKind::kReplicated ? plan.tp : 1;
    for (size_t b = 0; b < reads[i].size(); ++b) {
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

  std::vector<int> valid = ValidTpSizes(map, l.hp, 8);
  EXPECT_THAT(valid, ::testing::Contains(1));
  for (int tp : {1, 2, 4, 8}) {
    SCOPED_TRACE(absl::StrCat(o.arch, " ", o.quant, " TP ", tp));
    ShardPlan plan = BuildShardPlan(map, l.hp, tp);
    bool ok = std::find(valid.begin(), valid.end(), tp) != valid.end();
    EXPECT_EQ(plan.problems.empty(), ok);
    if (!ok) continue;
    ExpectExactCoverage(map, plan);
    // Split tensors divide their bytes; the ranks together read the whole model once, plus
    // the replicated tensors (tp - 1) more times.
    uint64_t total = 0, replicated = 0;
    for (const TensorMapping& m : map.tensors) {
      if (!m.loaded()) continue;
      total += m.info->n_bytes;
      if (m.spec->split == SplitKind::kReplicated) replicated += m.info->n_bytes;
    }
    uint64_t read = 0;
    for (const RankPlan& rp : plan.ranks) read += rp.read_bytes;
    EXPECT_EQ(read, total + (tp - 1) * replicated);
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

}  // namespace
}  // namespace tessera::model
