// The tokenizer against llama.cpp's own outputs: the vocabulary test vectors copied from
// llama.cpp's models/ folder, and the prompt tokenizations of the conformance models.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/tokenizer/streaming_detokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/utf8.h"
#include "tests/support/shared_data.h"

namespace tessera::tokenizer {
namespace {

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> SplitCases(const std::string& inp) {
  static const std::string kSeparator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> cases;
  size_t pos = 0;
  while (true) {
    size_t next = inp.find(kSeparator, pos);
    if (next == std::string::npos) break;  // the file ends with a separator
    cases.push_back(inp.substr(pos, next - pos));
    pos = next + kSeparator.size();
  }
  return cases;
}

std::vector<std::vector<TokenId>> ReadExpected(const std::string& out) {
  std::vector<std::vector<TokenId>> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<TokenId> ids;
    TokenId id;
    while (ls >> id) ids.push_back(id);
    lines.push_back(ids);
  }
  return lines;
}

class VocabVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabVectors, EveryCaseMatchesLlamaCpp) {
  const std::string name = std::string("tokenizer/ggml-vocab-") + GetParam() + ".gguf";
  TESSERA_REQUIRE_CONFORMANCE(gguf, name);
  auto tok = Tokenizer::Open(gguf.string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<std::string> cases = SplitCases(ReadFile(gguf.string() + ".inp"));
  const auto expected = ReadExpected(ReadFile(gguf.string() + ".out"));
  ASSERT_EQ(cases.size(), 46u);
  ASSERT_GE(expected.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(tok->Encode(cases[i]), expected[i]) << "case " << i << ": '" << cases[i] << "'";
  }
}

// Byte-level BPE loses nothing; SentencePiece adds a dummy prefix that decoding removes.
TEST_P(VocabVectors, RoundTripsEveryCase) {
  const std::string name = std::string("tokenizer/ggml-vocab-") + GetParam() + ".gguf";
  TESSERA_REQUIRE_CONFORMANCE(gguf, name);
  auto tok = Tokenizer::Open(gguf.string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  for (const std::string& text : SplitCases(ReadFile(gguf.string() + ".inp"))) {
    auto back = tok->Decode(tok->Encode(text));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, text);
  }
}

// Streaming over every byte prefix of multi-byte text (CJK, emoji, combining marks): the
// streamed text equals the one-shot decode, and before Finish it never ends mid-character.
TEST_P(VocabVectors, StreamingEqualsOneShotForEveryPrefix) {
  const std::string name = std::string("tokenizer/ggml-vocab-") + GetParam() + ".gguf";
  TESSERA_REQUIRE_CONFORMANCE(gguf, name);
  auto tok = Tokenizer::Open(gguf.string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string text =
      "\xE6\x88\x91\xE6\x83\xB3 apple \xF0\x9F\xA6\x99\xF0\x9F\x98\x81 "
      "\xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE "
      "\xE1\x9E\x80\xE1\x9E\xB6\xE1\x9E\x93\xE1\x9F\x8B C\xE1\xBB\xAD\x61 "
      "\xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F end";
  for (size_t n = 0; n <= text.size(); ++n) {
    const std::vector<TokenId> ids = tok->Encode(text.substr(0, n));
    auto one_shot = tok->Decode(ids);
    ASSERT_TRUE(one_shot.ok());
    StreamingDetokenizer stream(&*tok);
    std::string out;
    for (TokenId id : ids) {
      ASSERT_TRUE(stream.Feed(id, &out).ok());
      ASSERT_EQ(CompleteUtf8Prefix(out), out.size()) << "prefix " << n;
    }
    stream.Finish(&out);
    EXPECT_EQ(out, *one_shot) << "prefix " << n;
    EXPECT_EQ(out, text.substr(0, n)) << "prefix " << n;  // every vocabulary here is lossless
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, VocabVectors,
                         ::testing::Values("deepseek-coder", "deepseek-llm", "falcon", "gpt-2",
                                           "llama-spm", "phi-3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

// The model cases' tokens.json: llama.cpp's tokenization of a chat-formatted prompt with
// add_special and parse_special, truncated to 64 tokens.
class ModelPrompts : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelPrompts, MatchesLlamaCppPrefix) {
  const std::string dir = std::string("models/") + GetParam();
  TESSERA_REQUIRE_CONFORMANCE(tokens_json, dir + "/tokens.json");
  TESSERA_REQUIRE_CONFORMANCE(model, dir + "/model.gguf");
  const auto j = nlohmann::json::parse(ReadFile(tokens_json));
  const std::vector<TokenId> expected = j.at("tokens").get<std::vector<TokenId>>();
  auto tok = Tokenizer::Open(model.string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::vector<TokenId> ids = tok->Encode(j.at("source_text").get<std::string>(),
                                         {.add_special = true, .parse_special = true});
  ASSERT_GE(ids.size(), expected.size());
  ids.resize(expected.size());
  EXPECT_EQ(ids, expected);
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, ModelPrompts,
                         ::testing::Values("llama-f32", "qwen3-q4_k_m", "deepseek2-f32",
                                           "glm-dsa-q4_k_m", "stories260k-f32"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace tessera::tokenizer
