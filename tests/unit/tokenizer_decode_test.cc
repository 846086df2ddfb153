// Decoding: the byte-level alphabet, pieces of each token type, and streaming
// detokenization that never splits a UTF-8 character.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/streaming_detokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/utf8.h"
#include "tests/unit/tokenizer_test_vocab.h"

namespace tessera::tokenizer {
namespace {

Tokenizer Make(gguf::GgufWriter w) {
  auto t = Tokenizer::FromMetadata(w.metadata());
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(*t);
}

TEST(ByteLevelTest, SpecExamples) {
  EXPECT_EQ(ByteToChar(0x20), "\xC4\xA0");  // U+0120 Ġ
  EXPECT_EQ(ByteToChar(0x0A), "\xC4\x8A");  // U+010A Ċ
  EXPECT_EQ(ByteToChar(0x00), "\xC4\x80");  // U+0100, the first remapped byte
  EXPECT_EQ(ByteToChar(0x7F), "\xC4\xA1");  // U+0121, after the 33 bytes 0x00-0x20
  EXPECT_EQ(ByteToChar(0xAD), "\xC5\x83");  // U+0143, the last of the 68
  EXPECT_EQ(ByteToChar('!'), "!");
  EXPECT_EQ(ByteToChar(0xE9), "\xC3\xA9");  // é keeps its code point
  EXPECT_EQ(DecodeByteLevel("\xC4\xA0the\xC4\x8A"), " the\n");
}

TEST(ByteLevelTest, RoundTripsEveryByte) {
  const std::vector<std::string> alphabet = testing::GptAlphabet();
  std::string all, encoded;
  for (int b = 0; b < 256; ++b) {
    all.push_back(static_cast<char>(b));
    EXPECT_EQ(ByteToChar(b), alphabet[b]) << b;
  }
  AppendByteLevel(all, &encoded);
  EXPECT_EQ(DecodeByteLevel(encoded), all);
}

TEST(DecodeTest, BpePiecesAndSpecialTokens) {
  Tokenizer t = Make(testing::TinyBpe());
  EXPECT_EQ(*t.Decode({258, ' ', 260, 'o'}), " the hello");
  EXPECT_EQ(*t.Decode({256, 262, 256}), "he<|endoftext|>he");
  EXPECT_EQ(*t.Decode({256, 262, 256}, {.render_special = false}), "hehe");
  EXPECT_EQ(t.Piece(0xC3), "\xC3");  // half of a character
  auto bad = t.Decode({1, 99999});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              ::testing::HasSubstr("token id 99999 (position 1) is outside the vocabulary"));
}

TEST(DecodeTest, SentencePieceSpacesBytesAndDummyPrefix) {
  Tokenizer t = Make(testing::TinySpm());
  EXPECT_EQ(*t.Decode({265, 264}), "abc");  // "▁abc" minus the dummy prefix
  EXPECT_EQ(*t.Decode({265, 264}, {.strip_leading_space = false}), " abc");
  EXPECT_EQ(*t.Decode({259, 3 + 0xC3, 3 + 0xA9}), "\xC3\xA9");
  EXPECT_EQ(*t.Decode({1, 265, 264}), "<s> abc");
  EXPECT_EQ(*t.Decode({0}), "<unk>");
}

TEST(DecodeTest, CleanSpacesOnlyWhenAsked) {
  Tokenizer t = Make(testing::TinyBpe());
  const std::vector<TokenId> ids = {'a', ' ', ',', ' ', '\'', 's'};
  EXPECT_EQ(*t.Decode(ids), "a , 's");
  EXPECT_EQ(*t.Decode(ids, {.clean_spaces = true}), "a,'s");
}

TEST(Utf8Test, CompletePrefixHoldsBackOnlyAValidIncompleteTail) {
  EXPECT_EQ(CompleteUtf8Prefix("abc"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xE4"), 1u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xE4\xBD"), 1u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xE4\xBD\xA0"), 4u);
  EXPECT_EQ(CompleteUtf8Prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("\xF0\x9F\x98\x81"), 4u);
  EXPECT_EQ(CompleteUtf8Prefix("\xFF"), 1u);  // can never start a character
  EXPECT_EQ(CompleteUtf8Prefix("\xE4"
                               "A"),
            2u);                                  // broken: nothing to wait for
  EXPECT_EQ(CompleteUtf8Prefix("\xED\xA0"), 2u);  // a surrogate: invalid already
  EXPECT_EQ(CompleteUtf8Prefix("\x80"), 1u);
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
}

TEST(StreamingDetokenizerTest, HoldsBytesUntilTheCharacterIsComplete) {
  Tokenizer t = Make(testing::TinySpm());
  // "▁你" as byte-fallback tokens: ▁ then E4 BD A0.
  StreamingDetokenizer s(&t);
  std::string out;
  ASSERT_TRUE(s.Feed(259, &out).ok());
  EXPECT_EQ(out, "");  // the dummy prefix is dropped
  ASSERT_TRUE(s.Feed(3 + 0xE4, &out).ok());
  ASSERT_TRUE(s.Feed(3 + 0xBD, &out).ok());
  EXPECT_EQ(out, "");
  EXPECT_EQ(s.pending_bytes(), 2u);
  ASSERT_TRUE(s.Feed(3 + 0xA0, &out).ok());
  EXPECT_EQ(out, "\xE4\xBD\xA0");
  ASSERT_TRUE(s.Feed(265, &out).ok());  // ▁a keeps its space mid-stream
  EXPECT_EQ(out, "\xE4\xBD\xA0 a");
  EXPECT_FALSE(s.Feed(4000, &out).ok());
}

TEST(StreamingDetokenizerTest, FinishFlushesAnIncompleteTailAsRawBytes) {
  Tokenizer t = Make(testing::TinyBpe());
  StreamingDetokenizer s(&t);
  std::string out;
  ASSERT_TRUE(s.Feed('h', &out).ok());
  ASSERT_TRUE(s.Feed(0xE4, &out).ok());
  EXPECT_EQ(out, "h");
  s.Finish(&out);
  EXPECT_EQ(out, "h\xE4");
}

// Every token prefix of a mixed byte-token sequence: streamed == one-shot, and the streamed
// text before Finish never ends inside a character.
TEST(StreamingDetokenizerTest, EveryPrefixEqualsOneShot) {
  Tokenizer t = Make(testing::TinySpm());
  const std::string text = "ab \xE4\xBD\xA0\xE5\xA5\xBD c\xF0\x9F\x98\x81\xC3\xA9";
  const std::vector<TokenId> ids = t.Encode(text);
  ASSERT_EQ(*t.Decode(ids), text);
  for (size_t k = 0; k <= ids.size(); ++k) {
    const std::vector<TokenId> prefix(ids.begin(), ids.begin() + k);
    StreamingDetokenizer s(&t);
    std::string out;
    for (TokenId id : prefix) {
      ASSERT_TRUE(s.Feed(id, &out).ok());
      EXPECT_EQ(CompleteUtf8Prefix(out), out.size()) << "k=" << k;
    }
    s.Finish(&out);
    EXPECT_EQ(out, *t.Decode(prefix)) << "k=" << k;
  }
}

// Arbitrary bytes (invalid UTF-8 included) survive encode -> decode: every byte has a token
// in both vocabularies (byte-level alphabet, <0xNN> fallback).
TEST(RoundTripTest, RandomBytes) {
  Tokenizer bpe = Make(testing::TinyBpe("llama-bpe"));
  Tokenizer spm = Make(testing::TinySpm());
  uint64_t state = 12345;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const std::string alphabet = "ab hel\n\t<|>'s1\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x81\xFF\x80";
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text;
    const size_t n = next() % 40;
    for (size_t i = 0; i < n; ++i) {
      text.push_back(iter % 2 ? static_cast<char>(next()) : alphabet[next() % alphabet.size()]);
    }
    EXPECT_EQ(*bpe.Decode(bpe.Encode(text)), text);
    EXPECT_EQ(*bpe.Decode(bpe.Encode(text, {.parse_special = true})), text);
    if (text.find("\xE2\x96\x81") == std::string::npos) {  // a literal "▁" decodes as a space
      EXPECT_EQ(*spm.Decode(spm.Encode(text)), text);
    }
  }
}

}  // namespace
}  // namespace tessera::tokenizer
