// tessera generate's sampling flags are checked by the daemon's rule
// (serving::ValidateSampling): the same ranges and messages as a REST or gRPC request. The
// refusals come before the model is opened, so no model file is needed.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/commands.h"

namespace tessera::cli {
namespace {

using ::testing::HasSubstr;

struct GenerateRun {
  int rc = 0;
  std::string err;
};

GenerateRun Generate(const std::string& flag, const std::string& value) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  GenerateRun r;
  r.rc = RunGenerate({"--model", "/nonexistent/model.gguf", "--prompt", "hi", flag, value});
  r.err = ::testing::internal::GetCapturedStderr();
  ::testing::internal::GetCapturedStdout();
  return r;
}

TEST(GenerateFlagsTest, SamplingRangesAreTheDaemons) {
  struct Case {
    const char* flag;
    const char* value;
    const char* message;
  };
  const Case cases[] = {
      {"--temperature", "3", "temperature: expected a value in [0, 2] (0 = greedy), got 3"},
      {"--top-p", "0", "top_p: expected a value in (0, 1], got 0"},
      {"--top-k", "-2", "top_k: expected a value >= -1 (0 or -1 = off), got -2"},
      {"--min-p", "1.5", "min_p: expected a value in [0, 1], got 1.5"},
      {"--repetition-penalty", "12", "repetition_penalty: expected a value in (0, 10]"},
      {"--presence-penalty", "-2.5", "presence_penalty: expected a value in [-2, 2], got -2.5"},
      {"--frequency-penalty", "nan", "frequency_penalty: expected a value in [-2, 2], got nan"},
  };
  for (const Case& c : cases) {
    const GenerateRun r = Generate(c.flag, c.value);
    EXPECT_EQ(r.rc, 2) << c.flag;
    EXPECT_THAT(r.err, HasSubstr(std::string("tessera generate: ") + c.message)) << r.err;
  }
  // In range: the flags pass, and the run fails later, on the missing model.
  const GenerateRun ok = Generate("--temperature", "2");
  EXPECT_EQ(ok.rc, 1);
  EXPECT_THAT(ok.err, ::testing::Not(HasSubstr("temperature")));
}

TEST(GenerateFlagsTest, RepackWeightsTakesAutoOnOff) {
  const GenerateRun bad = Generate("--repack-weights", "sometimes");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_THAT(bad.err, HasSubstr("tessera generate: --repack-weights: 'sometimes' is not one of "
                                 "auto, on, off"));
  for (const char* mode : {"auto", "on", "off"}) {
    const GenerateRun ok = Generate("--repack-weights", mode);
    EXPECT_EQ(ok.rc, 1) << mode << ": the flag passes, the missing model fails";
    EXPECT_THAT(ok.err, ::testing::Not(HasSubstr("repack"))) << ok.err;
  }
}

}  // namespace
}  // namespace tessera::cli
