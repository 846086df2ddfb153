// `tessera validate` end to end: clean models, and each error path names the right tensor
// or key.
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/gguf/split.h"
#include "common/gguf/writer.h"
#include "common/model/synthetic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/shared_data.h"
#include "tools/commands.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Result {
  int rc;
  nlohmann::json json;
  std::string problems;  // all problem lines joined
};

Result Validate(std::vector<std::string> args) {
  args.push_back("--json");
  ::testing::internal::CaptureStdout();
  int rc = RunValidate(args);
  std::string out = ::testing::internal::GetCapturedStdout();
  Result r{rc, nlohmann::json::parse(out, nullptr, false), ""};
  if (!r.json.is_discarded()) {
    r.problems = absl::StrJoin(r.json["problems"].get<std::vector<std::string>>(), "\n");
  }
  return r;
}

std::string Dir() {
  std::string d = ::testing::TempDir() + "/validate_test";
  fs::create_directories(d);
  return d;
}

// Writes a copy of `src` through `edit`, which may change metadata and tensors.
using Edit = std::function<void(gguf::Metadata&, std::vector<gguf::TensorInfo>&)>;
std::string Rewrite(const std::string& src, const std::string& name, const Edit& edit) {
  auto in = gguf::GgufModel::Open(src);
  EXPECT_TRUE(in.ok());
  gguf::GgufWriter w;
  w.metadata() = in->metadata();
  std::vector<gguf::TensorInfo> tensors = in->tensors();
  edit(w.metadata(), tensors);
  for (const gguf::TensorInfo& t : tensors) {
    const gguf::TensorInfo* orig = in->FindTensor(t.name);
    if (orig && orig->dims == t.dims && orig->type == t.type) {
      EXPECT_TRUE(w.AddTensor(t.name, t.dims, t.type, in->TensorData(*orig)).ok());
    } else {
      EXPECT_TRUE(w.AddZeroTensor(t.name, t.dims, t.type).ok()) << t.name;
    }
  }
  std::string path = Dir() + "/" + name + ".gguf";
  EXPECT_TRUE(w.WriteFile(path).ok());
  return path;
}

std::string Synthetic(const std::string& arch, const std::string& quant = "F32") {
  model::SyntheticOptions o;
  o.arch = arch;
  o.quant = quant;
  auto w = model::BuildSyntheticModel(o);
  EXPECT_TRUE(w.ok());
  std::string path = Dir() + "/" + arch + "-" + quant + ".gguf";
  EXPECT_TRUE(w->WriteFile(path).ok());
  return path;
}

TEST(Validate, SyntheticModelIsLoadable) {
  Result r = Validate({"--model", Synthetic("glm-dsa"), "--tp", "2"});
  EXPECT_EQ(r.rc, 0) << r.problems;
  EXPECT_EQ(r.json["format"], "tessera-validate/1");
  EXPECT_TRUE(r.json["loadable"].get<bool>());
  EXPECT_EQ(r.json["architecture"], "glm-dsa");
  EXPECT_EQ(r.json["ranks"].size(), 2u);
  EXPECT_GT(r.json["probes"]["mtp_tensors"].get<int>(), 0);
  EXPECT_TRUE(r.json["probes"]["chat_template"].get<bool>());
  int skipped = 0;
  for (const auto& t : r.json["tensors"]) {
    if (t["status"] == "skipped") {
      ++skipped;
      EXPECT_EQ(t["reason"], "MTP layer, not used for decoding");
    }
  }
  EXPECT_EQ(skipped, r.json["probes"]["mtp_tensors"].get<int>());
}

TEST(Validate, QuantBlocksDecideUnevenShares) {
  // tiny Q4_K_M: attn_output rows are 256 = one K-quant block, so each block's 4 heads go
  // to one rank (rotated by block), and the plan says so.
  Result r = Validate({"--model", Synthetic("glm-dsa", "Q4_K_M"), "--tp", "2"});
  EXPECT_EQ(r.rc, 0) << r.problems;
  EXPECT_THAT(r.json["strategy"].dump(), HasSubstr("attention heads: 4 over 2: 0/4 (uneven"));
  EXPECT_THAT(r.json["valid_tp"], ::testing::Contains(2));
  // The experts' 256 columns are one K-quant block too: whole experts per rank.
  EXPECT_TRUE(r.json["expert_parallel"].get<bool>());
  EXPECT_THAT(r.json["strategy"].dump(), HasSubstr("is 1 quant block, which 2 ranks cannot"));
}

TEST(Validate, ExpertParallelismIsChosenNamedAndOverridable) {
  model::SyntheticOptions o;
  o.arch = "qwen3moe";
  o.preset = "uneven";  // 6 experts of 192 columns
  o.quant = "Q8_0";
  auto w = model::BuildSyntheticModel(o);
  ASSERT_TRUE(w.ok());
  const std::string path = Dir() + "/qwen3moe-uneven.gguf";
  ASSERT_TRUE(w->WriteFile(path).ok());
  // 192 columns are 6 blocks of 32: 4 ranks cannot share them evenly, so experts go whole.
  Result r = Validate({"--model", path, "--tp", "4"});
  EXPECT_EQ(r.rc, 0) << r.problems;
  EXPECT_TRUE(r.json["expert_parallel"].get<bool>());
  EXPECT_THAT(r.json["strategy"].dump(), HasSubstr("routed experts: expert parallel, 6 experts"));
  EXPECT_THAT(r.json["strategy"].dump(), HasSubstr("4 ranks cannot share evenly"));
  // Which experts live where: every rank's ranges, together each expert once per block.
  std::vector<int> owners(6, 0);
  for (const auto& rank : r.json["ranks"]) {
    ASSERT_TRUE(rank.contains("experts"));
    const auto& first = rank["experts"][0];
    EXPECT_EQ(first["block"], 0);
    for (int e = first["experts"][0]; e < first["experts"][1].get<int>(); ++e) ++owners[e];
  }
  EXPECT_EQ(owners, std::vector<int>(6, 1));
  // Asked otherwise: every expert's hidden dim divided (unevenly), or EP where TP 3 would
  // divide it evenly.
  r = Validate({"--model", path, "--tp", "4", "--no-expert-parallel"});
  EXPECT_EQ(r.rc, 0) << r.problems;
  EXPECT_FALSE(r.json["expert_parallel"].get<bool>());
  EXPECT_THAT(r.json["strategy"].dump(), HasSubstr("routed experts: 192 over 4"));
  r = Validate({"--model", path, "--tp", "3", "--expert-parallel"});
  EXPECT_TRUE(r.json["expert_parallel"].get<bool>());
  EXPECT_THAT(r.json["strategy"].dump(), HasSubstr("--expert-parallel"));
}

TEST(Validate, MissingTensorIsNamed) {
  std::string path = Rewrite(Synthetic("llama"), "missing", [](auto&, auto& tensors) {
    std::erase_if(tensors,
                  [](const gguf::TensorInfo& t) { return t.name == "blk.1.attn_k.weight"; });
  });
  Result r = Validate({"--model", path});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.problems, HasSubstr("tensor blk.1.attn_k.weight: missing"));
  EXPECT_THAT(r.problems, HasSubstr("expected shape [256, 128]"));
}

TEST(Validate, WrongShapeIsNamed) {
  std::string path = Rewrite(Synthetic("qwen3"), "shape", [](auto&, auto& tensors) {
    for (auto& t : tensors) {
      if (t.name == "blk.0.ffn_up.weight") t.dims = {256, 256};
    }
  });
  Result r = Validate({"--model", path});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(
      r.problems,
      HasSubstr("tensor blk.0.ffn_up.weight: expected shape [256, 512], file has [256, 256]"));
}

TEST(Validate, UnknownArchitectureNeedsArchAs) {
  std::string path = Rewrite(Synthetic("llama"), "mystery", [](gguf::Metadata& md, auto&) {
    gguf::Metadata renamed;
    for (const auto& [k, v] : md.entries()) {
      std::string key = k.rfind("llama.", 0) == 0 ? "mystery." + k.substr(6) : k;
      renamed.Set(key, v);
    }
    renamed.Set("general.architecture", gguf::Value::String("mystery"));
    md = renamed;
  });
  Result r = Validate({"--model", path});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.problems, HasSubstr("unknown architecture 'mystery'"));
  EXPECT_THAT(r.problems, HasSubstr("llama, qwen2, qwen3, qwen3moe, deepseek2, glm4moe, glm-dsa"));
  EXPECT_THAT(r.problems, HasSubstr("--arch-as"));
  r = Validate({"--model", path, "--arch-as", "llama"});
  EXPECT_EQ(r.rc, 0) << r.problems;
  r = Validate({"--model", path, "--arch-as", "gpt-j"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.problems, HasSubstr("--arch-as gpt-j: not a supported architecture"));
}

TEST(Validate, UnsupportedQuantTypeIsNamed) {
  std::string path = Rewrite(Synthetic("llama"), "iq2", [](auto&, auto& tensors) {
    for (auto& t : tensors) {
      if (t.name == "blk.0.ffn_gate.weight") t.type = gguf::GgmlType::kIQ2_XXS;
    }
  });
  Result r = Validate({"--model", path});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.problems, HasSubstr("blk.0.ffn_gate.weight"));
  EXPECT_THAT(r.problems, HasSubstr("iq2_xxs"));
  EXPECT_THAT(r.problems, HasSubstr("not supported"));
}

TEST(Validate, FewerKvHeadsThanRanksAreReplicated) {
  // llama tiny: 4 query heads over 2 KV heads; at TP 4 each rank keeps the KV head its one
  // query head uses.
  Result r = Validate({"--model", Synthetic("llama"), "--tp", "4"});
  EXPECT_EQ(r.rc, 0) << r.problems;
  EXPECT_THAT(r.json["strategy"].dump(), HasSubstr("KV heads: 2 over 4: 1/1/1/1 (replicated"));
  EXPECT_THAT(r.json["valid_tp"], ::testing::Contains(4));
  // 2 layers x 1 KV head x (64 + 64) x 2 bytes per token on every rank.
  for (const auto& rank : r.json["ranks"]) EXPECT_EQ(rank["kv_bytes_per_token"], 2 * 128 * 2);
}

TEST(Validate, MissingRequiredKeyAndHfConfigOverride) {
  std::string path = Rewrite(Synthetic("glm-dsa"), "nokey", [](gguf::Metadata& md, auto&) {
    md.Erase("glm-dsa.attention.indexer.top_k");
  });
  Result r = Validate({"--model", path});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.problems,
              HasSubstr("required metadata key 'glm-dsa.attention.indexer.top_k' is missing"));
  std::string hf = Dir() + "/config.json";
  std::ofstream(hf) << R"({"model_type": "glm_moe_dsa", "index_topk": 16})";
  r = Validate({"--model", path, "--hf-config", hf});
  EXPECT_EQ(r.rc, 0) << r.problems;
  EXPECT_EQ(r.json["hyperparameters"]["indexer_top_k"], 16);
  // Fields of the wrong type are a problem named after the flag, not a crash.
  std::ofstream(hf) << R"({"num_hidden_layers": 2, "num_nextn_predict_layers": "one",
                         "qk_rope_head_dim": "x", "qk_nope_head_dim": 1})";
  r = Validate({"--model", path, "--hf-config", hf});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.problems, HasSubstr("--hf-config"));
}

TEST(Validate, LegacyKvBIsSplitAtLoad) {
  // A pre-2025-04 deepseek2 file (spec 10.4): one attn_kv_b {c, H*(n+v)}, no *_mla keys,
  // per-head key/value lengths and head_count_kv = H.
  std::string path =
      Rewrite(Synthetic("deepseek2"), "legacy", [](gguf::Metadata& md, auto& tensors) {
        md.Erase("deepseek2.attention.key_length_mla");
        md.Erase("deepseek2.attention.value_length_mla");
        md.Set("deepseek2.attention.key_length", gguf::Value::U32(96));
        md.Set("deepseek2.attention.value_length", gguf::Value::U32(64));
        md.Set("deepseek2.attention.head_count_kv", gguf::Value::U32(4));
        std::erase_if(tensors, [](const gguf::TensorInfo& t) {
          return t.name.find("attn_v_b") != std::string::npos;
        });
        for (auto& t : tensors) {
          if (t.name.find("attn_k_b") == std::string::npos) continue;
          t.name.replace(t.name.find("attn_k_b"), 8, "attn_kv_b");
          t.dims = {256, 4 * (64 + 64)};  // c = 256; 4 heads of n = 64 nope + v = 64
        }
      });
  Result r = Validate({"--model", path, "--tp", "2"});
  EXPECT_EQ(r.rc, 0) << r.problems;
  EXPECT_EQ(r.json["hyperparameters"]["mla_form"], "legacy attn_kv_b");
  bool seen = false;
  for (const auto& t : r.json["tensors"]) {
    if (t["name"] != "blk.0.attn_kv_b.weight") continue;
    seen = true;
    EXPECT_EQ(t["status"], "found");
    EXPECT_EQ(t["fixups"][0]["kind"], "split_kv_b");
  }
  EXPECT_TRUE(seen);
  // After the split the latent is cached: 2 layers x (c 256 + rope 32) x 2 bytes.
  EXPECT_EQ(r.json["ranks"][0]["kv_bytes_per_token"], 2 * (256 + 32) * 2);
}

TEST(Validate, TruncatedFileAndMissingPart) {
  std::string path = Synthetic("qwen2");
  std::string cut = Dir() + "/cut.gguf";
  fs::copy_file(path, cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, fs::file_size(cut) / 2);
  Result r = Validate({"--model", cut});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.problems, HasSubstr("runs past the end of the file"));

  auto in = gguf::GgufModel::Open(path);
  gguf::GgufWriter w;
  w.metadata() = in->metadata();
  for (const auto& t : in->tensors())
    ASSERT_TRUE(w.AddTensor(t.name, t.dims, t.type, in->TensorData(t)).ok());
  auto parts = w.WriteSplit(Dir() + "/q2", 10);
  ASSERT_TRUE(parts.ok());
  ASSERT_GE(parts->size(), 3u);
  EXPECT_EQ(Validate({"--model", (*parts)[1]}).rc, 0);
  fs::remove((*parts)[2]);
  r = Validate({"--model", (*parts)[0]});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.problems, HasSubstr("part 3 of"));
}

TEST(Validate, MemoryArithmetic) {
  // qwen3 tiny F32 at TP 1: a 64 MiB device cannot hold the KV for 4096 tokens.
  Result r = Validate({"--model", Synthetic("qwen3"), "--device-memory", "8MiB",
                       "--gpu-memory-utilization", "1.0", "--max-model-len", "4096"});
  EXPECT_EQ(r.rc, 1);
  uint64_t weights = r.json["ranks"][0]["weight_bytes"];
  uint64_t kv = r.json["ranks"][0]["kv_bytes_per_token"];
  EXPECT_EQ(kv, 2u * 2 * 128 * 2);  // layers x KV heads x (k + v) x f16
  EXPECT_EQ(r.json["ranks"][0]["kv_tokens"].get<uint64_t>(), (8u * 1048576 - weights) / kv);
  EXPECT_THAT(r.problems, HasSubstr("fewer than the max model length 4096"));
}

TEST(Validate, ConformanceModelsValidateCleanly) {
  TESSERA_REQUIRE_CONFORMANCE(models, "models");
  int n = 0;
  for (const auto& dir : fs::directory_iterator(models)) {
    fs::path file = dir.path() / "model.gguf";
    if (!fs::exists(file)) continue;
    SCOPED_TRACE(file.string());
    Result r = Validate({"--model", file.string()});
    EXPECT_EQ(r.rc, 0) << r.problems;
    for (const auto& t : r.json["tensors"]) {
      EXPECT_TRUE(t["status"] == "found" || t["status"] == "absent (optional)" ||
                  (t["status"] == "skipped" && t["reason"] == "MTP layer, not used for decoding"))
          << t.dump();
    }
    ++n;
  }
  EXPECT_GE(n, 8);
}

TEST(Validate, UsageErrors) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunValidate({}), 2);
  EXPECT_EQ(RunValidate({"--model", "x", "--tp", "0"}), 2);
  EXPECT_EQ(RunValidate({"--model", "x", "--device-memory", "lots"}), 2);
  EXPECT_EQ(RunValidate({"--model", "x", "--bogus", "1"}), 2);
  ::testing::internal::GetCapturedStderr();
}

}  // namespace
}  // namespace tessera::cli
