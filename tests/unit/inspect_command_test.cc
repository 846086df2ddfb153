#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/gguf/writer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/commands.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;
using gguf::GgufWriter;
using gguf::Value;

class InspectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_inspect_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  int Run(const Args& args, std::string* out) {
    ::testing::internal::CaptureStdout();
    int rc = RunInspect(args);
    *out = ::testing::internal::GetCapturedStdout();
    return rc;
  }

  fs::path dir_;
};

TEST_F(InspectTest, JsonDescribesASplitSet) {
  GgufWriter w;
  w.metadata().Set("general.architecture", Value::String("qwen3"));
  w.metadata().Set("qwen3.block_count", Value::U32(2));
  w.metadata().Set("qwen3.rope.freq_base", Value::F32(1e6f));
  w.metadata().Set("tokenizer.ggml.model", Value::String("gpt2"));
  w.metadata().Set("tokenizer.ggml.tokens", Value::StringArray({"a", "b", "c"}));
  w.metadata().Set("tokenizer.ggml.eos_token_id", Value::U32(2));
  ASSERT_TRUE(w.AddZeroTensor("a", {256, 4}, GgmlType::kQ4_K).ok());  // 576 bytes
  ASSERT_TRUE(w.AddZeroTensor("b", {256, 2}, GgmlType::kQ4_K).ok());  // 288
  ASSERT_TRUE(w.AddZeroTensor("c", {64}, GgmlType::kF32).ok());       // 256
  auto parts = w.WriteSplit((dir_ / "m").string(), 2);
  ASSERT_TRUE(parts.ok());

  std::string out;
  ASSERT_EQ(Run({(*parts)[1], "--json", "--tensors"}, &out), 0);
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["format"], "tessera-inspect/1");
  EXPECT_EQ(j["architecture"], "qwen3");
  EXPECT_EQ(j["tensor_count"], 3);
  // 6 model keys + split.no, split.count, split.tensors.count
  EXPECT_EQ(j["metadata_key_count"], 9);
  EXPECT_EQ(j["hyperparameters"]["qwen3.block_count"], 2);
  EXPECT_EQ(j["hyperparameters"]["qwen3.rope.freq_base"], 1e6);
  EXPECT_EQ(j["tokenizer"]["vocab_size"], 3);
  EXPECT_EQ(j["tokenizer"]["special_token_ids"]["eos"], 2);
  EXPECT_EQ(j["types"]["q4_K"]["tensors"], 2);
  EXPECT_EQ(j["types"]["q4_K"]["bytes"], 864);
  EXPECT_EQ(j["types"]["f32"]["bytes"], 256);
  EXPECT_EQ(j["total_tensor_bytes"], 1120);
  ASSERT_EQ(j["parts"].size(), 2u);
  EXPECT_EQ(j["parts"][1]["tensor_count"], 1);
  ASSERT_EQ(j["tensors"].size(), 3u);
  EXPECT_EQ(j["tensors"][2]["name"], "c");
  EXPECT_EQ(j["tensors"][2]["part"], 1);
  EXPECT_EQ(j["tensors"][0]["shape"], nlohmann::json::array({256, 4}));
}

TEST_F(InspectTest, DumpWritesFloat32) {
  // fp16 bit patterns with hand-checked values: 1, -2, 65504 (max), 2^-24 (min subnormal),
  // 0.333251953125 (0x3555), -0.
  const uint16_t halves[] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x3555, 0x8000};
  const float expected[] = {1.0f, -2.0f, 65504.0f, 5.9604644775390625e-08f, 0.333251953125f, -0.0f};
  // bf16: 1.5 (0x3fc0), -3 (0xc040)
  const uint16_t bf[] = {0x3fc0, 0xc040};
  GgufWriter w;
  ASSERT_TRUE(w.AddTensor("h", {3, 2}, GgmlType::kF16,
                          {reinterpret_cast<const uint8_t*>(halves), sizeof halves})
                  .ok());
  ASSERT_TRUE(
      w.AddTensor("b", {2}, GgmlType::kBF16, {reinterpret_cast<const uint8_t*>(bf), sizeof bf})
          .ok());
  std::string model = (dir_ / "d.gguf").string();
  ASSERT_TRUE(w.WriteFile(model).ok());

  std::string out, dump = (dir_ / "h.f32").string();
  ASSERT_EQ(Run({model, "--dump", "h", "--out", dump}, &out), 0);
  std::ifstream in(dump, std::ios::binary);
  std::vector<float> got(6);
  in.read(reinterpret_cast<char*>(got.data()), 24);
  ASSERT_EQ(in.gcount(), 24);
  EXPECT_EQ(in.peek(), EOF);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(std::memcmp(&got[i], &expected[i], 4), 0) << i << ": " << got[i];
  }
  ASSERT_EQ(Run({model, "--dump", "b", "--out", dump}, &out), 0);
  std::ifstream in2(dump, std::ios::binary);
  in2.read(reinterpret_cast<char*>(got.data()), 8);
  EXPECT_EQ(got[0], 1.5f);
  EXPECT_EQ(got[1], -3.0f);

  EXPECT_EQ(Run({model, "--dump", "nope", "--out", dump}, &out), 1);
}

TEST_F(InspectTest, InvalidUtf8InMetadataIsReplacedNotFatal) {
  GgufWriter w;
  w.metadata().Set("general.architecture", Value::String("llama"));
  w.metadata().Set("general.name", Value::String("bad \xff\xfe name"));
  w.metadata().Set("llama.tag", Value::String("\xc3"));  // truncated 2-byte sequence
  std::string model = (dir_ / "utf8.gguf").string();
  ASSERT_TRUE(w.WriteFile(model).ok());
  std::string out;
  ASSERT_EQ(Run({model, "--json"}, &out), 0);
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["name"], "bad \xef\xbf\xbd\xef\xbf\xbd name");  // two U+FFFD
  ASSERT_EQ(Run({model}, &out), 0);
}

TEST_F(InspectTest, UsageErrors) {
  std::string out;
  EXPECT_EQ(Run({}, &out), 2);
  EXPECT_EQ(Run({"a.gguf", "--bogus"}, &out), 2);
  EXPECT_EQ(Run({"a.gguf", "--dump", "x"}, &out), 2);
  EXPECT_EQ(Run({(dir_ / "missing.gguf").string()}, &out), 1);
  EXPECT_EQ(Run({"--help"}, &out), 0);
  EXPECT_NE(out.find("usage: tessera inspect"), std::string::npos);
}

}  // namespace
}  // namespace tessera::cli
