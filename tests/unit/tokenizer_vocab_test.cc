// Vocabulary loading from GGUF metadata: special ids, defaults, the end-of-generation set,
// and clear errors for malformed vocabularies.
#include <unistd.h>

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/vocabulary.h"
#include "tests/unit/tokenizer_test_vocab.h"

namespace tessera::tokenizer {
namespace {

using gguf::Value;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TinyBpe;
using testing::TinySpm;

// The error message of loading `md`, or "" when it loads.
std::string LoadError(const gguf::Metadata& md) {
  auto v = Vocabulary::FromMetadata(md);
  return v.ok() ? "" : std::string(v.status().message());
}

TEST(VocabularyTest, ReadsTokensTypesMergesAndSpecialIds) {
  auto w = TinyBpe();
  auto v = Vocabulary::FromMetadata(w.metadata());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->kind(), VocabKind::kBytePairEncoding);
  EXPECT_EQ(v->size(), 265);
  EXPECT_EQ(v->Find("hell"), 260);
  EXPECT_EQ(v->Find("nope"), kNoToken);
  EXPECT_EQ(v->type(262), TokenType::kControl);
  EXPECT_EQ(v->merge_count(), 6u);
  ASSERT_NE(v->FindMerge('h', 'e'), nullptr);
  EXPECT_EQ(v->FindMerge('h', 'e')->rank, 0);
  EXPECT_EQ(v->FindMerge('h', 'e')->result, 256);
  EXPECT_EQ(v->FindMerge('e', 'h'), nullptr);
  EXPECT_EQ(v->special().bos, 262);
  EXPECT_EQ(v->special().eos, 262);
  EXPECT_FALSE(v->add_bos());  // gpt-2 default
  EXPECT_EQ(std::string(v->pre_tokenizer()->name), "gpt-2");
}

TEST(VocabularyTest, Llama3FamilyAddsBosByDefaultAndFileOverrides) {
  auto w = TinyBpe("llama3");
  auto v = Vocabulary::FromMetadata(w.metadata());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->add_bos());
  EXPECT_TRUE(v->pre_tokenizer()->ignore_merges);
  w.metadata().Set("tokenizer.ggml.add_bos_token", Value::Bool(false));
  v = Vocabulary::FromMetadata(w.metadata());
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->add_bos());
}

TEST(VocabularyTest, SentencePieceDefaults) {
  auto w = TinySpm();
  w.metadata().Erase("tokenizer.ggml.bos_token_id");
  auto v = Vocabulary::FromMetadata(w.metadata());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->kind(), VocabKind::kSentencePiece);
  EXPECT_EQ(v->special().bos, 1);
  EXPECT_EQ(v->special().unk, 0);
  EXPECT_TRUE(v->add_bos());
  EXPECT_TRUE(v->add_space_prefix());
  EXPECT_EQ(v->ByteToken(0x41), 3 + 0x41);
  EXPECT_FLOAT_EQ(v->score(264), -1.5f);
}

TEST(VocabularyTest, EndOfGenerationSetHasEosAndEndOfTurnTextsForcedToControl) {
  auto w = TinyBpe();
  // Make <|im_end|> a plain USER_DEFINED token: its text alone makes it EOG and CONTROL.
  std::vector<int32_t> types(265, 1);
  types[262] = 3;
  types[263] = 4;
  w.metadata().Set("tokenizer.ggml.token_type", Value::I32Array(types));
  w.metadata().Set("tokenizer.ggml.eos_token_id", Value::U32(261));
  auto v = Vocabulary::FromMetadata(w.metadata());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(v->end_of_generation(), ElementsAre(261, 262, 263));
  EXPECT_TRUE(v->IsEndOfGeneration(263));
  EXPECT_FALSE(v->IsEndOfGeneration(260));
  EXPECT_EQ(v->type(263), TokenType::kControl);
  // No eot key: the first end-of-turn text becomes eot.
  EXPECT_EQ(v->special().eot, 262);
}

TEST(VocabularyTest, NoneIdMeansAbsent) {
  auto w = TinySpm();
  w.metadata().Set("tokenizer.ggml.seperator_token_id", Value::U32(0xFFFFFFFFu));
  w.metadata().Set("tokenizer.ggml.padding_token_id", Value::U32(0xFFFFFFFFu));
  auto v = Vocabulary::FromMetadata(w.metadata());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->special().sep, kNoToken);
  EXPECT_EQ(v->special().pad, kNoToken);
}

TEST(VocabularyErrorsTest, MissingArraysAreNamed) {
  auto w = TinyBpe();
  w.metadata().Erase("tokenizer.ggml.tokens");
  EXPECT_THAT(LoadError(w.metadata()), HasSubstr("tokenizer.ggml.tokens is required"));

  w = TinyBpe();
  w.metadata().Erase("tokenizer.ggml.merges");
  EXPECT_THAT(LoadError(w.metadata()), HasSubstr("needs tokenizer.ggml.merges"));

  auto s = TinySpm();
  s.metadata().Erase("tokenizer.ggml.scores");
  EXPECT_THAT(LoadError(s.metadata()), HasSubstr("needs tokenizer.ggml.scores"));

  w = TinyBpe();
  w.metadata().Erase("tokenizer.ggml.model");
  EXPECT_THAT(LoadError(w.metadata()), HasSubstr("tokenizer.ggml.model is required"));
}

TEST(VocabularyErrorsTest, MergesNamingUnknownTokens) {
  auto w = TinyBpe();
  w.metadata().Set("tokenizer.ggml.merges", Value::StringArray({"h e", "x yz"}));
  EXPECT_THAT(LoadError(w.metadata()),
              HasSubstr("tokenizer.ggml.merges[1] 'x yz' names 'yz', which is not a token"));
  // Both parts exist but their concatenation does not.
  w.metadata().Set("tokenizer.ggml.merges", Value::StringArray({"e h"}));
  EXPECT_THAT(LoadError(w.metadata()), HasSubstr("names 'eh', which is not a token"));
  w.metadata().Set("tokenizer.ggml.merges", Value::StringArray({"he"}));
  EXPECT_THAT(LoadError(w.metadata()), HasSubstr("merges[0] 'he' is not \"left right\""));
}

TEST(VocabularyErrorsTest, IdsAndLengthsOutOfRange) {
  auto w = TinyBpe();
  w.metadata().Set("tokenizer.ggml.eos_token_id", Value::U32(265));
  EXPECT_THAT(LoadError(w.metadata()),
              HasSubstr("tokenizer.ggml.eos_token_id = 265 is outside the vocabulary of 265"));

  w = TinyBpe();
  w.metadata().Set("tokenizer.ggml.token_type", Value::I32Array({1, 1, 1}));
  EXPECT_THAT(LoadError(w.metadata()),
              HasSubstr("tokenizer.ggml.token_type has 3 entries, expected 265"));

  w = TinyBpe();
  std::vector<int32_t> types(265, 1);
  types[7] = 9;
  w.metadata().Set("tokenizer.ggml.token_type", Value::I32Array(types));
  EXPECT_THAT(LoadError(w.metadata()), HasSubstr("token_type[7] = 9, expected 0..6"));

  auto s = TinySpm();
  s.metadata().Set("tokenizer.ggml.scores", Value::F32Array({0.5f}));
  EXPECT_THAT(LoadError(s.metadata()), HasSubstr("tokenizer.ggml.scores has 1 entries"));
}

TEST(VocabularyErrorsTest, UnknownModelOrPreTokenizer) {
  auto w = TinyBpe("no-such-pre");
  EXPECT_THAT(LoadError(w.metadata()), HasSubstr("tokenizer.ggml.pre 'no-such-pre' is not a "
                                                 "known pre-tokenizer"));
  w = TinyBpe();
  w.metadata().Set("tokenizer.ggml.model", Value::String("bert"));
  EXPECT_THAT(LoadError(w.metadata()), HasSubstr("tokenizer.ggml.model is 'bert'"));
  w = TinyBpe();
  w.metadata().Set("tokenizer.ggml.tokens", Value::U32(3));
  EXPECT_THAT(LoadError(w.metadata()), HasSubstr("tokenizer.ggml.tokens"));
}

TEST(VocabularyErrorsTest, OpenNamesTheFile) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("tessera_vocab_test_" + std::to_string(::getpid()) + ".gguf");
  auto w = TinyBpe();
  w.metadata().Set("tokenizer.ggml.merges", Value::StringArray({"q zz"}));
  ASSERT_TRUE(w.WriteFile(path.string()).ok());
  auto t = Tokenizer::Open(path.string());
  std::filesystem::remove(path);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr(path.string()));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("'zz', which is not a token"));
}

TEST(PreTokenizerSpecTest, EveryKnownIdCompiles) {
  for (std::string_view id : KnownPreTokenizers()) {
    const PreTokenizerSpec* spec = FindPreTokenizerSpec(id);
    ASSERT_NE(spec, nullptr) << id;
    auto pre = PreTokenizer::Create(*spec);
    EXPECT_TRUE(pre.ok()) << id << ": " << pre.status();
  }
}

}  // namespace
}  // namespace tessera::tokenizer
