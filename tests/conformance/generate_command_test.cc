#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/shared_data.h"
#include "tests/support/synthetic_model.h"
#include "tools/commands.h"

namespace tessera::cli {
namespace {

using ::testing::HasSubstr;

std::string RunCli(const Args& args, int* rc) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  *rc = RunGenerate(args);
  ::testing::internal::GetCapturedStderr();
  return ::testing::internal::GetCapturedStdout();
}

TEST(Generate, Stories260kGreedyFromBosTellsTheReferenceStory) {
  TESSERA_REQUIRE_CONFORMANCE(model, "models/stories260k-f32/model.gguf");
  int rc = 0;
  // BOS only, greedy, as llama.cpp's greedy.json was made.
  std::string out = RunCli({"--model", model.string(), "--prompt-tokens", "1", "--temperature", "0",
                            "--max-tokens", "32", "--exact"},
                           &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_THAT(out, HasSubstr("Once upon a time, there was a little girl named Lily."));
}

TEST(Generate, SameSeedSameTokensAndJsonSummary) {
  TESSERA_REQUIRE_CONFORMANCE(model, "models/stories260k-f32/model.gguf");
  int rc = 0;
  Args args = {"--model",      model.string(), "--prompt",      "Once upon a time",
               "--max-tokens", "16",           "--temperature", "1.0",
               "--seed",       "42",           "--json"};
  std::string a = RunCli(args, &rc);
  ASSERT_EQ(rc, 0);
  std::string b = RunCli(args, &rc);
  std::vector<std::string> la, lb;
  auto tokens = [](const std::string& s) {
    std::vector<int> ids;
    nlohmann::json summary;
    size_t at = 0;
    while (at < s.size()) {
      size_t nl = s.find('\n', at);
      auto j = nlohmann::json::parse(s.substr(at, nl - at));
      if (j.contains("token")) ids.push_back(j["token"]);
      if (j.contains("completion_tokens")) summary = j;
      at = nl + 1;
    }
    return std::make_pair(ids, summary);
  };
  auto [ids_a, sum_a] = tokens(a);
  auto [ids_b, sum_b] = tokens(b);
  EXPECT_EQ(ids_a, ids_b);
  EXPECT_FALSE(ids_a.empty());
  EXPECT_GT(sum_a["prompt_tokens"].get<int>(), 1);
  EXPECT_GT(sum_a["decode_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(sum_a["prefill_tokens_per_s"].get<double>(), 0);
  EXPECT_EQ(sum_a["seed"], 42);
  // A different seed samples a different continuation.
  args[9] = "43";
  auto [ids_c, sum_c] = tokens(RunCli(args, &rc));
  EXPECT_NE(ids_a, ids_c);
}

// A prompt longer than one prefill chunk (512 tokens) goes in several steps, each attending
// to what the earlier ones cached: its first greedy token must be the argmax of the last row
// of the same tokens run in one step (eval-logits), on the exact path.
TEST(Generate, LongPromptInChunksMatchesOneStep) {
  model::SyntheticOptions o;
  o.arch = "llama";
  o.preset = "small";
  o.quant = "Q8_0";
  o.seed = 5;
  const std::string model = testing::WriteSyntheticModel(o, "generate-chunks");
  std::string ids;
  const int n = 1100;  // chunks of 512, 512 and 76
  for (int i = 0; i < n; ++i) absl::StrAppend(&ids, i ? "," : "", 3 + (i * 37) % 200);
  int rc = 0;
  std::string out = RunCli({"--model", model, "--prompt-tokens", ids, "--temperature", "0",
                            "--max-tokens", "1", "--exact", "--json"},
                           &rc);
  ASSERT_EQ(rc, 0) << out;
  const nlohmann::json first = nlohmann::json::parse(out.substr(0, out.find('\n')));
  const std::string logits_path = ::testing::TempDir() + "/generate-chunks.f32";
  ::testing::internal::CaptureStderr();
  rc = RunEvalLogits({"--model", model, "--tokens", ids, "--out", logits_path, "--exact"});
  ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(rc, 0);
  std::ifstream f(logits_path, std::ios::binary | std::ios::ate);
  const auto bytes = static_cast<size_t>(f.tellg());
  ASSERT_EQ(bytes % (n * sizeof(float)), 0u);
  const size_t vocab = bytes / (n * sizeof(float));
  std::vector<float> last(vocab);
  f.seekg(static_cast<std::streamoff>((n - 1) * vocab * sizeof(float)));
  f.read(reinterpret_cast<char*>(last.data()), static_cast<std::streamsize>(vocab * sizeof(float)));
  const int argmax = static_cast<int>(std::max_element(last.begin(), last.end()) - last.begin());
  EXPECT_EQ(first["token"].get<int>(), argmax);
  // And the same log-probability (the raw log-softmax of that row), which a chunk attending
  // to the wrong positions or keys would move far beyond float reassociation.
  double z = 0;
  for (float l : last) z += std::exp(double{l} - last[argmax]);
  EXPECT_NEAR(first["logprob"].get<double>(), -std::log(z), 1e-3);
}

TEST(Generate, UsageErrors) {
  int rc = 0;
  RunCli({"--prompt", "x"}, &rc);
  EXPECT_EQ(rc, 2);
  RunCli({"--model", "m", "--prompt", "x", "--chat", "y"}, &rc);
  EXPECT_EQ(rc, 2);
  RunCli({"--model", "m", "--prompt", "x", "--top-p", "2"}, &rc);
  EXPECT_EQ(rc, 2);
  RunCli({"--model", "/nonexistent.gguf", "--prompt", "x"}, &rc);
  EXPECT_EQ(rc, 1);
}

}  // namespace
}  // namespace tessera::cli
