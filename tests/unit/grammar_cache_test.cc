// The worker's grammar cache (worker/engine/grammar_cache.h): one compilation per text,
// least recently used first out by count and by estimated memory, grammars in use kept
// alive by their matchers, invalid texts and a missing vocabulary as errors; and the
// vocabulary trie built from a real tokenizer (special tokens never eligible).
#include "worker/engine/grammar_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/gguf/split.h"
#include "common/grammar/matcher.h"
#include "common/tokenizer/tokenizer.h"
#include "tests/support/shared_data.h"

namespace tessera::worker {
namespace {

std::shared_ptr<const grammar::TokenTrie> SmallVocab() {
  return grammar::TokenTrie::Build({"a", "b", "ab", "c", "\"", "{", "}"}, {});
}

std::string Choice(int i) { return absl::StrCat("root ::= \"a\" | \"c", i, "\""); }

TEST(GrammarCache, CompilesATextOnceAndEvictsTheLeastRecentlyUsed) {
  int vocab_builds = 0;
  GrammarCache cache(
      [&]() -> absl::StatusOr<std::shared_ptr<const grammar::TokenTrie>> {
        ++vocab_builds;
        return SmallVocab();
      },
      /*max_entries=*/3);
  auto first = cache.Get(Choice(0));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*cache.Get(Choice(0)), *first);  // the same compiled object
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ(cache.hits(), 1u);
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(cache.Get(Choice(i)).ok());
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(vocab_builds, 1);
  // Choice(0) was the least recently used: compiled again, a new object; Choice(3) stays.
  auto again = cache.Get(Choice(0));
  ASSERT_TRUE(again.ok());
  EXPECT_NE(*again, *first);
  EXPECT_EQ(cache.misses(), 5u);
  ASSERT_TRUE(cache.Get(Choice(3)).ok());
  EXPECT_EQ(cache.misses(), 5u);
  // A matcher keeps its evicted grammar alive and working.
  grammar::Matcher m(*first);
  EXPECT_TRUE(m.AcceptBytes("c0"));
  EXPECT_TRUE(m.CanEnd());
}

TEST(GrammarCache, MemoryBoundEvictsAllButTheNewest) {
  GrammarCache cache(
      [] { return absl::StatusOr<std::shared_ptr<const grammar::TokenTrie>>(SmallVocab()); },
      /*max_entries=*/100, /*max_bytes=*/64);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(cache.Get(Choice(i)).ok());
  // Each text is about 20 bytes, counted twice: only the newest fits (and it always stays).
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_LE(cache.EstimatedBytes(), 64u);
}

TEST(GrammarCache, ErrorsNameTheProblem) {
  GrammarCache cache(
      [] { return absl::StatusOr<std::shared_ptr<const grammar::TokenTrie>>(SmallVocab()); });
  auto bad = cache.Get("root ::= missing");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("missing"), std::string::npos) << bad.status();
  EXPECT_EQ(cache.size(), 0u);

  int attempts = 0;
  GrammarCache no_vocab([&]() -> absl::StatusOr<std::shared_ptr<const grammar::TokenTrie>> {
    ++attempts;
    return absl::FailedPreconditionError("the model has no tokenizer");
  });
  EXPECT_EQ(no_vocab.Get(Choice(0)).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(no_vocab.Get(Choice(0)).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(attempts, 2);  // asked again until it succeeds
}

// The trie of a real vocabulary: each token's bytes as the tokenizer decodes them, and no
// control token eligible (a grammar can never let one through).
TEST(VocabularyTrie, RealVocabularyBytesAndSpecialTokens) {
  TESSERA_REQUIRE_CONFORMANCE(path, "tokenizer/ggml-vocab-deepseek-llm.gguf");
  auto file = gguf::GgufModel::Open(path.string());
  ASSERT_TRUE(file.ok()) << file.status();
  auto trie = VocabularyTrie(file->metadata());
  ASSERT_TRUE(trie.ok()) << trie.status();
  auto tok = tokenizer::Tokenizer::FromMetadata(file->metadata());
  ASSERT_TRUE(tok.ok());
  ASSERT_EQ((*trie)->vocab_size(), static_cast<uint32_t>(tok->vocab().size()));
  int specials = 0;
  for (tokenizer::TokenId id = 0; id < tok->vocab().size(); ++id) {
    const tokenizer::TokenType type = tok->vocab().type(id);
    if (type == tokenizer::TokenType::kNormal || type == tokenizer::TokenType::kByte) {
      EXPECT_EQ((*trie)->token(id), tok->Piece(id)) << "token " << id;
    } else {
      ++specials;
      EXPECT_FALSE((*trie)->eligible(id)) << "special token " << id << " is eligible";
    }
  }
  EXPECT_GT(specials, 0);
  // "Hello" through the matcher of a literal grammar, token by token as the tokenizer splits it.
  GrammarCache cache([&] { return trie; });
  auto g = cache.Get("root ::= \"Hello, world\"");
  ASSERT_TRUE(g.ok());
  grammar::Matcher m(*g);
  for (tokenizer::TokenId id : tok->Encode("Hello, world")) {
    EXPECT_TRUE(m.AcceptToken(static_cast<uint32_t>(id))) << "token " << id;
  }
  EXPECT_TRUE(m.MustEnd());
}

}  // namespace
}  // namespace tessera::worker
