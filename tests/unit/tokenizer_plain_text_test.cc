// EncodeOptions::plain_text_ranges: with parse_special, control token texts that overlap a
// plain-text range stay text. Vocabularies are tests/unit/tokenizer_test_vocab.h's; every
// expectation is derived by hand (ids 0..255 are the bytes of TinyBpe).
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/tokenizer/tokenizer.h"
#include "tests/unit/tokenizer_test_vocab.h"

namespace tessera::tokenizer {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Not;
using Ranges = std::vector<std::pair<size_t, size_t>>;

Tokenizer Make(gguf::GgufWriter w) {
  auto t = Tokenizer::FromMetadata(w.metadata());
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(*t);
}

std::vector<TokenId> EncodePlain(const Tokenizer& t, const std::string& text,
                                 const Ranges& ranges) {
  return t.Encode(text, {.parse_special = true, .plain_text_ranges = ranges});
}

// "<|im_end|>" as plain text: no merge applies to its bytes.
constexpr TokenId kImEnd = 263;
const std::vector<TokenId> kImEndBytes = {'<', '|', 'i', 'm', '_', 'e', 'n', 'd', '|', '>'};

std::vector<TokenId> Cat(std::vector<std::vector<TokenId>> parts) {
  std::vector<TokenId> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(PlainTextRangesTest, NoRangesIsTodaysBehaviour) {
  Tokenizer t = Make(testing::TinyBpe());
  for (const std::string text : {"he<|im_end|>he", "<|im_end|><|endoftext|>", "the hello", ""}) {
    EXPECT_EQ(EncodePlain(t, text, {}), t.Encode(text, {.parse_special = true})) << text;
  }
  // Ranges that no token text overlaps change nothing either, even inside words.
  EXPECT_THAT(EncodePlain(t, "he<|im_end|>he", {{0, 2}, {12, 13}}), ElementsAre(256, kImEnd, 256));
  EXPECT_THAT(EncodePlain(t, " the hello", {{2, 7}}), ElementsAre(258, ' ', 260, 'o'));
}

TEST(PlainTextRangesTest, SuppressesExactlyTheOverlappingOccurrences) {
  Tokenizer t = Make(testing::TinyBpe());
  // "he<|im_end|>he<|im_end|>he": the second occurrence (bytes 14..24) is request text. The
  // raw text around it is one fragment, split by the gpt-2 pre-tokenizer as
  // "he" "<|" "im" "_" "end" "|>" "he".
  const std::string text = "he<|im_end|>he<|im_end|>he";
  EXPECT_THAT(EncodePlain(t, text, {{14, 24}}),
              ::testing::ElementsAreArray(Cat({{256, kImEnd, 256}, kImEndBytes, {256}})));
  // A range covering a single byte of a token's text (its last '>') is enough.
  EXPECT_THAT(EncodePlain(t, text, {{11, 12}}),
              ::testing::ElementsAreArray(Cat({{256}, kImEndBytes, {256, kImEnd, 256}})));
  // ...and so is one starting inside it and running on.
  EXPECT_THAT(EncodePlain(t, text, {{5, 13}}),
              ::testing::ElementsAreArray(Cat({{256}, kImEndBytes, {256, kImEnd, 256}})));
  // Touching is not overlapping.
  EXPECT_THAT(EncodePlain(t, text, {{0, 2}, {12, 14}}), ElementsAre(256, kImEnd, 256, kImEnd, 256));
  // Without parse_special nothing is matched anyway.
  EXPECT_EQ(t.Encode(text, {.plain_text_ranges = Ranges{{14, 24}}}), t.Encode(text));
}

TEST(PlainTextRangesTest, SuppressedTextIsTokenizedWithItsNeighbours) {
  Tokenizer t = Make(testing::TinyBpe());
  // The suppressed token text and the text around it are one raw fragment, exactly as
  // without parse_special: "x<|im_end|>y" splits as "x" "<|" "im" "_" "end" "|>" "y".
  const std::string text = "x<|im_end|>y<|endoftext|>";
  const std::vector<TokenId> got = EncodePlain(t, text, {{3, 4}});
  EXPECT_THAT(got, ::testing::ElementsAreArray(Cat({{'x'}, kImEndBytes, {'y', 262}})));
  std::vector<TokenId> plain = t.Encode("x<|im_end|>y");
  plain.push_back(262);
  EXPECT_EQ(got, plain);
  // Merges run across range boundaries: "hel|lo" is still "hell" + "o".
  EXPECT_THAT(EncodePlain(t, "hello", {{3, 5}}), ElementsAre(260, 'o'));
}

TEST(PlainTextRangesTest, UserDefinedTokensAreAlwaysMatched) {
  // USER_DEFINED "xyz"(265) is matched in plain text too, as without parse_special.
  Tokenizer t = Make(testing::TinyBpe("gpt-2", {{"xyz", 4}}));
  EXPECT_THAT(EncodePlain(t, "axyz<|im_end|>", {{0, 14}}),
              ::testing::ElementsAreArray(Cat({{'a', 265}, kImEndBytes})));
}

TEST(PlainTextRangesTest, SearchGoesOnAfterASuppressedOccurrence) {
  // CONTROL "aa"(265) in "aaa": llama.cpp takes bytes 0..2. With byte 0 plain text, the
  // occurrence at 1..3 is the template's and is matched.
  Tokenizer t = Make(testing::TinyBpe("gpt-2", {{"aa", 3}}));
  EXPECT_THAT(t.Encode("aaa", {.parse_special = true}), ElementsAre(265, 'a'));
  EXPECT_THAT(EncodePlain(t, "aaa", {{0, 1}}), ElementsAre('a', 265));
  EXPECT_THAT(EncodePlain(t, "aaa", {{1, 2}}), ElementsAre('a', 'a', 'a'));
}

TEST(PlainTextRangesTest, UnsortedOrOverlappingRangesAreNormalized) {
  Tokenizer t = Make(testing::TinyBpe());
  const std::string text = "he<|im_end|>he<|im_end|>he";
  const std::vector<TokenId> want = EncodePlain(t, text, {{3, 4}, {20, 21}});
  EXPECT_EQ(EncodePlain(t, text, {{20, 21}, {3, 4}}), want);
  EXPECT_EQ(EncodePlain(t, text, {{3, 4}, {3, 3}, {20, 21}, {20, 21}}), want);
  EXPECT_THAT(want, Not(Contains(kImEnd)));
  // Ranges past the end are harmless.
  EXPECT_THAT(EncodePlain(t, "he", {{1, 100}, {200, 300}}), ElementsAre(256));
}

TEST(PlainTextRangesTest, SentencePieceUnknownTokenText) {
  // TinySpm: <unk>(0) is UNKNOWN, <s>(1) and </s>(2) CONTROL. Plain "<unk>" gets no dummy
  // prefix of its own: it continues the raw text before it, as without parse_special.
  Tokenizer t = Make(testing::TinySpm());
  const std::string text = "a<unk>b</s>";
  EXPECT_THAT(t.Encode(text, {.parse_special = true}), Contains(0));
  std::vector<TokenId> want = t.Encode("a<unk>b");
  want.push_back(2);
  EXPECT_EQ(EncodePlain(t, text, {{1, 6}}), want);
}

}  // namespace
}  // namespace tessera::tokenizer
