// The worker's grammar cache (worker/engine/grammar_cache.h): one compilation per text,
// least recently used first out by count and by estimated memory, grammars in use kept
// alive by their matchers, invalid texts and a missing vocabulary as errors; and the
// vocabulary trie built from a real tokenizer (special tokens never eligible).
#include "worker/engine/grammar_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// The trie of a real vocabulary: each token's bytes as the tokenizer decodes them, special
// tokens spelled by SpecialTokenBytes, so that a grammar allows one only where it names it.
TEST(VocabularyTrie, RealVocabularyBytesAndSpecialTokens) {
  TESSERA_REQUIRE_CONFORMANCE(path, "tokenizer/ggml-vocab-deepseek-llm.gguf");
  auto file = gguf::GgufModel::Open(path.string());
  ASSERT_TRUE(file.ok()) << file.status();
  auto trie = VocabularyTrie(file->metadata());
  ASSERT_TRUE(trie.ok()) << trie.status();
  auto tok = tokenizer::Tokenizer::FromMetadata(file->metadata());
  ASSERT_TRUE(tok.ok());
  ASSERT_EQ((*trie)->vocab_size(), static_cast<uint32_t>(tok->vocab().size()));
  std::vector<uint32_t> specials;
  for (tokenizer::TokenId id = 0; id < tok->vocab().size(); ++id) {
    const tokenizer::TokenType type = tok->vocab().type(id);
    if (type == tokenizer::TokenType::kNormal || type == tokenizer::TokenType::kByte) {
      EXPECT_EQ((*trie)->token(id), tok->Piece(id)) << "token " << id;
    } else {
      specials.push_back(static_cast<uint32_t>(id));
      EXPECT_EQ((*trie)->token(id), grammar::SpecialTokenBytes(id)) << "special token " << id;
    }
  }
  ASSERT_GE(specials.size(), 2u);
  const uint32_t named = specials[0], other = specials[1];

  GrammarCache cache([&] { return trie; });
  auto allowed = [&](grammar::Matcher m) {
    std::vector<uint64_t> words((*trie)->mask_words());
    m.FillMask(absl::MakeSpan(words));
    std::vector<uint32_t> ids;
    for (uint32_t id = 0; id < (*trie)->vocab_size(); ++id) {
      if ((words[id / 64] >> (id % 64)) & 1) ids.push_back(id);
    }
    return ids;
  };
  // A literal, token by token as the tokenizer splits it.
  auto g = cache.Get("root ::= \"Hello, world\"");
  ASSERT_TRUE(g.ok());
  grammar::Matcher m(*g);
  for (tokenizer::TokenId id : tok->Encode("Hello, world")) {
    EXPECT_TRUE(m.AcceptToken(static_cast<uint32_t>(id))) << "token " << id;
  }
  EXPECT_TRUE(m.MustEnd());

  // A special token named by the grammar: allowed there and only there.
  auto marked = cache.Get(absl::StrCat("root ::= \"x\" <[", named, "]> [a-z]+"));
  ASSERT_TRUE(marked.ok()) << marked.status();
  grammar::Matcher s(*marked);
  std::vector<uint32_t> first = allowed(s);
  EXPECT_TRUE(std::find(first.begin(), first.end(), named) == first.end());
  EXPECT_FALSE(s.AcceptToken(named));
  ASSERT_TRUE(s.AcceptBytes("x"));
  EXPECT_EQ(allowed(s), std::vector<uint32_t>{named});  // nothing else spells it
  EXPECT_FALSE(s.AcceptToken(other));
  ASSERT_TRUE(s.AcceptToken(named));
  EXPECT_FALSE(s.CanEnd());
  std::vector<uint32_t> after = allowed(s);
  EXPECT_FALSE(after.empty());
  for (uint32_t id : after)
    EXPECT_FALSE(std::find(specials.begin(), specials.end(), id) != specials.end());

  // JSON mode never allows a special token, anywhere on a walk.
  auto json = cache.Get("root ::= \"{\" [^\\x00-\\x1F]* \"}\"");
  ASSERT_TRUE(json.ok());
  grammar::Matcher j(*json);
  for (const char* step : {"{", "ab", "c\"d"}) {
    ASSERT_TRUE(j.AcceptBytes(step));
    for (uint32_t id : allowed(j)) {
      EXPECT_FALSE(std::find(specials.begin(), specials.end(), id) != specials.end()) << id;
    }
  }
}

TEST(VocabularyTrie, GrammarsCannotSpellTheMarkerBytes) {
  // Raw 0xFE/0xFF in a literal are refused, so only <[id]> reaches a special token.
  GrammarCache cache(
      [] { return absl::StatusOr<std::shared_ptr<const grammar::TokenTrie>>(SmallVocab()); });
  auto raw = cache.Get(
      "root ::= \"\xFF"
      "7\xFE\"");
  ASSERT_FALSE(raw.ok());
  EXPECT_NE(raw.status().message().find("0xFE or 0xFF"), std::string::npos) << raw.status();
  for (const char* bad :
       {"root ::= <7>", "root ::= <[]>", "root ::= <[12", "root ::= <[99999999999]>"}) {
    auto g = cache.Get(bad);
    ASSERT_FALSE(g.ok()) << bad;
    EXPECT_NE(g.status().message().find("<[id]>"), std::string::npos) << g.status();
  }
}

}  // namespace
}  // namespace tessera::worker
