// Loading the NextN/MTP block (ExecutorOptions::load_mtp, model::MapOptions::mtp): what is
// mapped and skipped, the cache layer and memory it adds, the trunk unchanged by it, the
// errors of models without the block, and `tessera validate`'s report of it.
#include <string>
#include <vector>

#include "common/gguf/split.h"
#include "common/model/arch.h"
#include "common/model/shard_plan.h"
#include "common/model/tensor_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/synthetic_model.h"
#include "tools/commands.h"
#include "worker/executor/executor.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

std::string SmallModel(const std::string& arch) {
  return testing::WriteSmallModel(arch, "F32", 3, "mtp_load");
}

TEST(MtpLoad, MapsTheBlockWithoutItsIndexerAndAddsACacheLayer) {
  auto file = gguf::GgufModel::Open(SmallModel("glm-dsa"));
  ASSERT_TRUE(file.ok()) << file.status();
  const model::ArchSpec& arch = *model::FindArch("glm-dsa");
  std::vector<model::KeyProblem> kp;
  model::HyperParams hp = model::LoadHyperParams(arch, "glm-dsa", file->metadata(), nullptr, &kp);
  ASSERT_EQ(hp.n_nextn, 1u);
  model::TensorMap trunk = model::MapTensors(arch, hp, *file);
  model::TensorMap mtp = model::MapTensors(arch, hp, *file, {.mtp = true});
  EXPECT_TRUE(mtp.problems.empty()) << mtp.problems[0];
  EXPECT_EQ(trunk.mtp_blocks, 0u);
  EXPECT_EQ(mtp.mtp_blocks, 1u);
  EXPECT_EQ(mtp.mtp_tensors, trunk.mtp_tensors);
  const std::string b = "blk." + std::to_string(hp.n_layer) + ".";
  int loaded = 0, skipped = 0;
  for (const model::TensorMapping& m : mtp.tensors) {
    if (m.name.rfind(b, 0) != 0 || m.status == model::MapStatus::kAbsentOptional) continue;
    if (m.name.find(".indexer.") != std::string::npos) {
      EXPECT_EQ(m.status, model::MapStatus::kSkipped) << m.name;
      EXPECT_THAT(m.reason, HasSubstr("not run")) << m.name;
      ++skipped;
    } else {
      EXPECT_TRUE(m.loaded()) << m.name << ": " << m.reason;
      ++loaded;
    }
  }
  EXPECT_EQ(static_cast<uint32_t>(loaded + skipped), trunk.mtp_tensors);
  EXPECT_GT(skipped, 0);
  for (const char* name : {"nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight",
                           "attn_kv_a_mqa.weight", "ffn_gate_exps.weight"}) {
    EXPECT_TRUE(std::any_of(
        mtp.tensors.begin(), mtp.tensors.end(),
        [&](const model::TensorMapping& m) { return m.name == b + name && m.loaded(); }))
        << name;
  }
  // One more latent row per token: c + r values at 2 bytes.
  model::ShardPlan p0 = model::BuildShardPlan(trunk, hp, 1), p1 = model::BuildShardPlan(mtp, hp, 1);
  EXPECT_EQ(p1.ranks[0].kv_bytes_per_token - p0.ranks[0].kv_bytes_per_token,
            (hp.kv_lora_rank + hp.n_rot) * 2u);
  EXPECT_GT(p1.ranks[0].weight_bytes, p0.ranks[0].weight_bytes);
}

// Loading the block changes nothing in the trunk: its logits are the same bits.
TEST(MtpLoad, TheTrunkIsUnchangedByTheBlock) {
  const std::string path = SmallModel("glm-dsa");
  std::vector<std::vector<float>> logits;
  for (bool mtp : {false, true}) {
    executor::ExecutorOptions o;
    o.kv_tokens = 64;
    o.threads = 2;
    o.load_mtp = mtp;
    auto ex = executor::Executor::Create(path, o);
    ASSERT_TRUE(ex.ok()) << ex.status();
    EXPECT_EQ((*ex)->has_mtp(), mtp);
    executor::SequenceInput s;
    for (int i = 0; i < 24; ++i) s.tokens.push_back((13 * i + 5) % 250);
    for (int b = 0; b < (*ex)->n_blocks(); ++b) s.block_table.push_back(b);
    s.all_logits = true;
    auto l = (*ex)->Step({&s, 1});
    ASSERT_TRUE(l.ok()) << l.status();
    logits.push_back((*l)[0]);
    if (!mtp) {
      auto m = (*ex)->MtpStep({&s, 1});
      EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_THAT(m.status().message(), HasSubstr("load_mtp"));
    } else {
      s.mtp_hidden.assign(3, 0.0f);  // not tokens x n_embd
      auto m = (*ex)->MtpStep({&s, 1});
      EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(m.status().message(), HasSubstr("mtp_hidden"));
    }
  }
  EXPECT_EQ(logits[0], logits[1]);
}

// Models without the block: a clear error naming the key (or the architecture), no crash.
TEST(MtpLoad, ModelsWithoutTheBlockSaySo) {
  struct Case {
    const char* arch;
    const char* expected;
  };
  for (const Case& c : {Case{"deepseek2", "deepseek2.nextn_predict_layers is 0 or absent"},
                        Case{"llama", "architecture llama has no MTP (NextN) draft head"},
                        Case{"glm4moe", "architecture glm4moe has no MTP (NextN) draft head"}}) {
    SCOPED_TRACE(c.arch);
    executor::ExecutorOptions o;
    o.kv_tokens = 32;
    o.threads = 1;
    o.load_mtp = true;
    auto ex = executor::Executor::Create(SmallModel(c.arch), o);
    ASSERT_FALSE(ex.ok());
    EXPECT_EQ(ex.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(ex.status().message(), HasSubstr("the MTP draft head was asked for"));
    EXPECT_THAT(ex.status().message(), HasSubstr(c.expected));
    o.load_mtp = false;
    EXPECT_TRUE(executor::Executor::Create(SmallModel(c.arch), o).ok());
  }
}

nlohmann::json ValidateJson(const std::string& path, int tp) {
  ::testing::internal::CaptureStdout();
  int rc = cli::RunValidate({"--model", path, "--tp", std::to_string(tp), "--json"});
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0) << out;
  return nlohmann::json::parse(out, nullptr, false);
}

TEST(MtpValidate, ReportsTheBlockAndItsMemoryPerRank) {
  nlohmann::json r = ValidateJson(SmallModel("glm-dsa"), 2);
  ASSERT_FALSE(r.is_discarded());
  const nlohmann::json& m = r["mtp"];
  ASSERT_TRUE(m["available"].get<bool>()) << m.dump();
  EXPECT_EQ(m["blocks"], nlohmann::json::array({r["hyperparameters"]["n_layer"]}));
  EXPECT_GT(m["tensors_loaded"].get<int>(), 0);
  EXPECT_EQ(m["tensors_loaded"].get<int>() + m["tensors_skipped"].get<int>(),
            r["probes"]["mtp_tensors"].get<int>());
  EXPECT_TRUE(m["problems"].empty()) << m["problems"].dump();
  ASSERT_EQ(m["ranks"].size(), 2u);
  for (const nlohmann::json& rank : m["ranks"]) {
    EXPECT_GT(rank["weight_bytes"].get<uint64_t>(), 0u);
    EXPECT_GT(rank["kv_bytes_per_token"].get<uint64_t>(), 0u);
  }
  // Sharded, not replicated: each of two ranks holds less than one rank of one.
  nlohmann::json one = ValidateJson(SmallModel("glm-dsa"), 1);
  EXPECT_LT(m["ranks"][0]["weight_bytes"].get<uint64_t>(),
            one["mtp"]["ranks"][0]["weight_bytes"].get<uint64_t>());

  nlohmann::json none = ValidateJson(SmallModel("deepseek2"), 1);
  EXPECT_FALSE(none["mtp"]["available"].get<bool>());
  EXPECT_THAT(none["mtp"]["reason"].get<std::string>(),
              HasSubstr("deepseek2.nextn_predict_layers"));

  // DeepSeek-V3's layout (deepseek2 with a NextN block): available, its MoE block sharded.
  model::SyntheticOptions o;
  o.arch = "deepseek2";
  o.preset = "small";
  o.nextn = 1;
  nlohmann::json ds = ValidateJson(testing::WriteSyntheticModel(o, "mtp_load-nextn"), 2);
  ASSERT_TRUE(ds["mtp"]["available"].get<bool>()) << ds["mtp"].dump();
  EXPECT_EQ(ds["mtp"]["tensors_skipped"], 0);  // no indexer to leave out
  EXPECT_TRUE(ds["mtp"]["problems"].empty()) << ds["mtp"]["problems"].dump();
}

}  // namespace
}  // namespace tessera
