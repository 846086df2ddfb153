// `tessera tokenize` / `tessera detokenize` driven in-process: stdin from a string, stdout
// and stderr captured.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/tokenizer_test_vocab.h"
#include "tools/commands.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class TokenizeCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_tokenize_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    ASSERT_TRUE(tokenizer::testing::TinyBpe("gpt-2").WriteFile(Path("gpt2")).ok());
    ASSERT_TRUE(tokenizer::testing::TinyBpe("llama-bpe").WriteFile(Path("llama3")).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) { return (dir_ / (name + ".gguf")).string(); }

  // Runs `command` with `input` on stdin; returns the exit code.
  int Run(int (*command)(const Args&), const Args& args, const std::string& input) {
    std::istringstream in(input);
    std::streambuf* saved = std::cin.rdbuf(in.rdbuf());
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    const int rc = command(args);
    out_ = ::testing::internal::GetCapturedStdout();
    err_ = ::testing::internal::GetCapturedStderr();
    std::cin.rdbuf(saved);
    return rc;
  }

  fs::path dir_;
  std::string out_, err_;
};

TEST_F(TokenizeCommandTest, PrintsIdsOnOneLine) {
  // "the": t + he (no "t he" merge); " hello": Ġ + hell + o.
  ASSERT_EQ(Run(RunTokenize, {"--model", Path("gpt2")}, "the hello"), 0) << err_;
  EXPECT_EQ(out_, "116 256 32 260 111\n");
  ASSERT_EQ(
      Run(RunTokenize, {"--model", Path("gpt2"), "--parse-special", "--json"}, "he<|endoftext|>"),
      0);
  EXPECT_EQ(out_, "[256,262]\n");
  ASSERT_EQ(Run(RunTokenize, {"--model", Path("llama3"), "--add-special"}, "he"), 0);
  EXPECT_EQ(out_, "262 256\n");
  ASSERT_EQ(Run(RunTokenize, {"--model", Path("gpt2"), "--json"}, ""), 0);
  EXPECT_EQ(out_, "[]\n");
}

TEST_F(TokenizeCommandTest, DetokenizeWritesTheTextExactly) {
  ASSERT_EQ(Run(RunDetokenize, {"--model", Path("gpt2")}, "256 262 256\n"), 0) << err_;
  EXPECT_EQ(out_, "he<|endoftext|>he");
  ASSERT_EQ(Run(RunDetokenize, {"--model", Path("gpt2"), "--skip-special"}, "[256, 262, 256]"), 0);
  EXPECT_EQ(out_, "hehe");
  // The output of tokenize feeds detokenize.
  ASSERT_EQ(Run(RunDetokenize, {"--model", Path("gpt2")}, "116 256 32 260 111\n"), 0);
  EXPECT_EQ(out_, "the hello");
}

TEST_F(TokenizeCommandTest, ErrorsNameTheProblem) {
  EXPECT_EQ(Run(RunTokenize, {}, "x"), 2);
  EXPECT_THAT(err_, HasSubstr("--model FILE is required"));
  EXPECT_EQ(Run(RunTokenize, {"--model", Path("gpt2"), "--bogus"}, "x"), 2);
  EXPECT_THAT(err_, HasSubstr("unexpected argument '--bogus'"));
  EXPECT_EQ(Run(RunTokenize, {"--model", Path("missing")}, "x"), 1);
  EXPECT_THAT(err_, HasSubstr("missing.gguf"));
  EXPECT_EQ(Run(RunDetokenize, {"--model", Path("gpt2")}, "1 70000"), 1);
  EXPECT_THAT(err_, HasSubstr("token id 70000 (position 1) is outside the vocabulary of 265"));
  EXPECT_EQ(Run(RunDetokenize, {"--model", Path("gpt2")}, "12 abc"), 1);
  EXPECT_THAT(err_, HasSubstr("'abc' on stdin is not a token id"));
  EXPECT_EQ(Run(RunDetokenize, {"--help"}, ""), 0);
  EXPECT_THAT(out_, HasSubstr("usage: tessera detokenize"));
}

}  // namespace
}  // namespace tessera::cli
