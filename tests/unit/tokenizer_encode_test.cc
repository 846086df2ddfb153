// Encoding on hand-made vocabularies and pre-tokenizer splits, every expectation derived by
// hand from the spec (sections 14.2 and 14.3).
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/tokenizer/pre_tokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "tests/unit/tokenizer_test_vocab.h"

namespace tessera::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

Tokenizer Make(gguf::GgufWriter w) {
  auto t = Tokenizer::FromMetadata(w.metadata());
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(*t);
}

std::vector<std::string> Split(const std::string& pre, const std::string& text) {
  const PreTokenizerSpec* spec = FindPreTokenizerSpec(pre);
  EXPECT_NE(spec, nullptr) << pre;
  auto p = PreTokenizer::Create(*spec);
  EXPECT_TRUE(p.ok()) << p.status();
  std::vector<std::string_view> pieces;
  p->Split(text, &pieces);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

TEST(BpeEncodeTest, MergesByRankNotPosition) {
  Tokenizer t = Make(testing::TinyBpe());
  // " the": Ġ t h e -> (h e, rank 0) -> (Ġ t, rank 1) -> (Ġt he, rank 2) = Ġthe.
  EXPECT_THAT(t.Encode(" the"), ElementsAre(258));
  // " hello": he (0), then ll (3) before lo (5), then hell (4); Ġ and o stay bytes.
  EXPECT_THAT(t.Encode(" the hello"), ElementsAre(258, ' ', 260, 'o'));
  // Equal ranks merge leftmost first.
  EXPECT_THAT(t.Encode("lll"), ElementsAre(259, 'l'));
  EXPECT_THAT(t.Encode(""), IsEmpty());
}

TEST(BpeEncodeTest, IgnoreMergesEmitsWholeWordTokens) {
  // gpt-2 reaches only "hell" + "o"; llama3's ignore_merges takes the "hello" token.
  EXPECT_THAT(Make(testing::TinyBpe("gpt-2")).Encode("hello"), ElementsAre(260, 'o'));
  EXPECT_THAT(Make(testing::TinyBpe("llama3")).Encode("hello"), ElementsAre(264));
}

TEST(BpeEncodeTest, SpecialTokensOnlyWhenParsingSpecial) {
  Tokenizer t = Make(testing::TinyBpe());
  // Plain text: "<|", "endoftext", "|>" as bytes (no merge applies).
  EXPECT_THAT(t.Encode("<|endoftext|>"),
              ElementsAre('<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|', '>'));
  EXPECT_THAT(t.Encode("he<|endoftext|>he", {.parse_special = true}), ElementsAre(256, 262, 256));
  // Longest first: "<|im_end|>" is not cut by a shorter token.
  EXPECT_THAT(t.Encode("<|im_end|><|endoftext|>", {.parse_special = true}), ElementsAre(263, 262));
}

TEST(BpeEncodeTest, UserDefinedTokensAreMatchedLongestFirstEvenAsPlainText) {
  // USER_DEFINED "xyz"(265) and "wx"(266): llama.cpp takes the longer token first wherever it
  // occurs, so "wxyz" is w + xyz even though "wx" starts earlier.
  Tokenizer t = Make(testing::TinyBpe("gpt-2", {{"xyz", 4}, {"wx", 4}}));
  EXPECT_THAT(t.Encode("wxyz"), ElementsAre('w', 265));
  EXPECT_THAT(t.Encode("wx wxyzwx"), ElementsAre(266, ' ', 'w', 265, 266));
}

TEST(BpeEncodeTest, AddSpecialFollowsTheVocabulary) {
  EXPECT_THAT(Make(testing::TinyBpe("gpt-2")).Encode("he", {.add_special = true}),
              ElementsAre(256));
  EXPECT_THAT(Make(testing::TinyBpe("llama-bpe")).Encode("he", {.add_special = true}),
              ElementsAre(262, 256));
  // A template that emits BOS itself: one BOS only when asked to skip the duplicate.
  Tokenizer llama3 = Make(testing::TinyBpe("llama-bpe"));
  EXPECT_THAT(llama3.Encode("<|endoftext|>he", {.add_special = true, .parse_special = true}),
              ElementsAre(262, 262, 256));
  EXPECT_THAT(
      llama3.Encode("<|endoftext|>he",
                    {.add_special = true, .parse_special = true, .skip_duplicate_bos = true}),
      ElementsAre(262, 256));
  auto w = testing::TinyBpe();
  w.metadata().Set("tokenizer.ggml.add_eos_token", gguf::Value::Bool(true));
  EXPECT_THAT(Make(std::move(w)).Encode("he", {.add_special = true}), ElementsAre(256, 262));
}

TEST(BpeEncodeTest, InvalidUtf8IsEncodedBytewise) {
  Tokenizer t = Make(testing::TinyBpe());
  EXPECT_THAT(t.Encode("he\xFF\xC3"), ElementsAre(256, 0xFF, 0xC3));
}

TEST(SpmEncodeTest, HighestScoreMergesFirst) {
  Tokenizer t = Make(testing::TinySpm());
  // "▁abc": bc (-1.5) beats ▁a (-2.5) and ab (-3); then ▁a; "▁abc" is no token.
  EXPECT_THAT(t.Encode("abc"), ElementsAre(265, 264));
  // "▁ab": ▁a (-2.5) beats ab (-3).
  EXPECT_THAT(t.Encode("ab"), ElementsAre(265, 261));
  // Spaces become ▁; "▁▁" and "▁c" are no tokens.
  EXPECT_THAT(t.Encode(" c"), ElementsAre(259, 259, 262));
  EXPECT_THAT(t.Encode(""), IsEmpty());
  EXPECT_THAT(t.Encode("", {.add_special = true}), ElementsAre(1));
}

TEST(SpmEncodeTest, ByteFallbackForUnknownCharacters) {
  Tokenizer t = Make(testing::TinySpm());
  // é = C3 A9 is not a piece: its bytes' <0xNN> tokens (id 3 + byte).
  EXPECT_THAT(t.Encode("\xC3\xA9"), ElementsAre(259, 3 + 0xC3, 3 + 0xA9));
}

TEST(SpmEncodeTest, DummyPrefixAfterSpecialTokens) {
  Tokenizer t = Make(testing::TinySpm());
  EXPECT_THAT(t.Encode("<s>ab", {.add_special = true, .parse_special = true}),
              ElementsAre(1, 1, 265, 261));
  // As text: "▁<s>ab" -> ▁ < s > ab.
  EXPECT_THAT(t.Encode("<s>ab"), ElementsAre(259, 3 + '<', 3 + 's', 3 + '>', 263));
  auto w = testing::TinySpm();
  w.metadata().Set("tokenizer.ggml.add_space_prefix", gguf::Value::Bool(false));
  EXPECT_THAT(Make(std::move(w)).Encode("abc"), ElementsAre(260, 264));
}

TEST(PreTokenizerTest, Gpt2) {
  EXPECT_THAT(Split("gpt-2", "Hello world's  12345 !!"),
              ElementsAre("Hello", " world", "'s", " ", " 12345", " !!"));
}

TEST(PreTokenizerTest, Llama3AndGlm4GroupDigitsByThree) {
  const std::string text = "Hello world's  12345 !!\n\n x";
  const auto expected =
      ElementsAre("Hello", " world", "'s", " ", " ", "123", "45", " !!\n\n", " x");
  EXPECT_THAT(Split("llama-bpe", text), expected);
  EXPECT_THAT(Split("glm4", text), expected);
}

TEST(PreTokenizerTest, Qwen2SplitsSingleDigits) {
  EXPECT_THAT(Split("qwen2", "ab 123"), ElementsAre("ab", " ", "1", "2", "3"));
}

TEST(PreTokenizerTest, DeepseekV3) {
  EXPECT_THAT(Split("deepseek-v3", "abc 1234 你好ab"),
              ElementsAre("abc", " ", "123", "4", " ", "你好", "ab"));
}

TEST(PreTokenizerTest, DeepseekLlm) {
  EXPECT_THAT(Split("deepseek-llm", "Hello, 世界 123\n"),
              ElementsAre("Hello", ",", " ", "世界", " ", "123", "\n"));
  // U+3000 is whitespace, never part of the CJK punctuation class.
  EXPECT_THAT(Split("deepseek-llm", "a\u3000\u3000b"), ElementsAre("a", "\u3000", "\u3000b"));
}

TEST(PreTokenizerTest, DeepseekCoderCjkRangeSkipsWhitespace) {
  // ★ (U+2605, a symbol) is in the U+0800-U+4E00 range; U+3000 between them is not.
  EXPECT_THAT(Split("deepseek-coder", "★\u3000★"), ElementsAre("★", "\u3000", "★"));
}

TEST(PreTokenizerTest, FalconAndStarcoderAndDefault) {
  EXPECT_THAT(Split("falcon", "Hello, world 1234"),
              ElementsAre("Hello", ",", " world", " ", "123", "4"));
  EXPECT_THAT(Split("starcoder", "ab 12"), ElementsAre("ab", " ", "1", "2"));
  EXPECT_THAT(Split("default", "a+b 123"), ElementsAre("a", "+", "b", " ", "123"));
}

TEST(PreTokenizerTest, Gpt4oSplitsCamelCaseAndKeepsContractions) {
  EXPECT_THAT(Split("gpt-4o", "HelloWorld's"), ElementsAre("Hello", "World's"));
}

TEST(PreTokenizerTest, PiecesAlwaysCoverTheText) {
  std::vector<std::string> texts = {"x \xFF\xFE y\xE4\xBD 1\t\t\n"};  // invalid UTF-8 included
  uint64_t state = 99;
  for (int i = 0; i < 100; ++i) {
    std::string t;
    for (int j = 0; j < 30; ++j) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      t.push_back(static_cast<char>(state >> 56));
    }
    texts.push_back(t);
  }
  for (std::string_view id : KnownPreTokenizers()) {
    auto pre = PreTokenizer::Create(*FindPreTokenizerSpec(id));
    ASSERT_TRUE(pre.ok());
    std::vector<std::string_view> pieces;
    for (const std::string& text : texts) {
      pre->Split(text, &pieces);
      std::string joined;
      for (std::string_view p : pieces) {
        EXPECT_FALSE(p.empty()) << id;
        joined += p;
      }
      EXPECT_EQ(joined, text) << id;
    }
  }
}

}  // namespace
}  // namespace tessera::tokenizer
