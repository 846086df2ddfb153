// Counted repetitions (x{m,n} as one element whose frame counts copies, classified for every
// count at once: repetition_tokens.h) against independent truth: the same grammar with its
// repetitions expanded into nested rules (GbnfOptions::expand_repetitions, the lowering
// without counts), where the allowed tokens are found by brute force (copy the matcher, try
// every token). No mask of the expanded grammar is used, so neither the classification cache
// nor counted frames are on the reference side.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/grammar/compiled_grammar.h"
#include "common/grammar/gbnf_parser.h"
#include "common/grammar/matcher.h"
#include "common/grammar/sampler.h"
#include "common/tokenizer/tokenizer.h"
#include "tests/support/grammar_masks.h"
#include "tests/support/shared_data.h"

namespace tessera::grammar {
namespace {

std::shared_ptr<const CompiledGrammar> Compile(std::string_view gbnf, bool expand,
                                               std::shared_ptr<const TokenTrie> trie) {
  GbnfOptions options;
  options.expand_repetitions = expand;
  absl::StatusOr<Grammar> g = ParseGbnf(gbnf, options);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return nullptr;
  return CompiledGrammar::Create(std::move(*g), std::move(trie));
}

using testing::BruteForceIds;
using testing::MaskIds;

// Repetitions of every shape the engine has to get right: single bytes, multi-byte UTF-8
// classes (tokens end inside a character), sequences and alternatives as the body, nested
// repetitions (the inner one's frame above the outer one's in a context), minimums above
// zero and exact counts (a token must leave at exactly the right copy), bodies that can be
// empty, a repetition ending the grammar (whole-stack contexts), a repetition deep below
// other frames (its frame at the bottom of the context, popping below it), a repetition
// followed by what its body can also start with (tokens may leave at several copies), and
// JSON-Schema-like strings with escapes.
const char* const kGrammars[] = {
    "root ::= \"\\\"\" [a-c]{0,40} \"\\\"\"",
    "root ::= \"\\\"\" [a-cé中]{0,12} \"\\\"\"",
    "root ::= \"\\\"\" char{0,40} \"\\\"\" [.]\nchar ::= [^\"\\\\] | \"\\\\\" [\"\\\\n]",
    "root ::= (\"ab\" | [x-z]){2,30} \".\"",
    "root ::= (\"[\" [ab]{0,20} \"]\"){1,25} \"!\"",
    "root ::= \"a\" [ab]{3,45}",
    "root ::= [ab]{30} \"!\"?",
    "root ::= [ab]{4} [ab]{2,3} [b]*",
    "root ::= (\"a\"?){0,30} \"b\"",
    "root ::= (\"a\"? \"b\"?){2,6} \"c\"",
    "root ::= ([a-c]{1,19} \".\"){0,3} [a-c]{25,60} \"@\"",
    "root ::= x \"!\"\nx ::= y \"?\"\ny ::= z \".\"?\nz ::= \"(\" [abc]{1,9} \")\"",
    "root ::= [a-c]{2,5} [a-z]{0,3} \"!\"",
    "root ::= \"[\" v (\",\" v){0,4} \"]\"\nv ::= \"\\\"\" [a-c\\\\]{0,7} \"\\\"\" | [0-9]{1,3}",
    "root ::= \"{\" ( \"\\\"k\\\":\" v ){0,3} \"}\"\nv ::= [0-9]{1,2} | \"{\" v{0,2} \"}\"",
    "root ::= \"x\" ( [é] [a-c]{0,2} ){2,8}",
};

// Short and long tokens over the grammars' bytes (split UTF-8 included), long ones crossing
// many copies and the end of a repetition.
std::vector<std::string> Vocabulary() {
  std::vector<std::string> tokens = {
      "<|end|>",  "\"",   "\\",   "\\n",   "é",   "\xC3",   "\xA9",    "é\"",     "中", "\xE4",
      "\xB8\xAD", "\xB8", "\xAD", "aé",    "éa",  "\"k\":", "{\"k\":", "\"k\":{", "},", "0",
      "12",       "123",  "1234", "\",\"", "\"]", "!",      "?",       "(",       ")",  "a)",
      ")?",       "\"!",  "x",    "xé",    "é中", "ab.",    "]!",      "}}"};
  const std::string alphabet = "abcxyz[].!@\",";
  for (char c : alphabet) tokens.emplace_back(1, c);
  for (size_t n = 2; n <= 50; ++n) {
    tokens.push_back(std::string(n, 'a'));
    tokens.push_back(std::string(n, 'b') + "\"");
    tokens.push_back(std::string(n - 1, 'c') + ".");
  }
  // Tokens that end a repetition and climb out through Wrapped's rules.
  for (const char* head : {"", "a", "ab", "aaa", "b\"", "1", "é"}) {
    for (const char* end : {"\"", "]", ".", "!", "@", ")", "}", "c"}) {
      for (const char* tail : {",", "!,", ",!,", "@,!,", ",!", "!,!", "@,"}) {
        tokens.push_back(std::string(head) + end + tail);
      }
    }
  }
  std::mt19937 rng(77);
  for (int i = 0; i < 500; ++i) {
    std::string t;
    const size_t length = 1 + rng() % (i % 2 == 0 ? 6 : 40);
    for (size_t k = 0; k < length; ++k) t += alphabet[rng() % (i % 3 == 0 ? 3 : alphabet.size())];
    if (i % 7 == 0) t += "é";
    tokens.push_back(t);
  }
  return tokens;
}

// Random walks through `gbnf`: at every step the counted grammar's mask equals the expanded
// grammar's brute-force set, and both agree on whether the output may end.
void ExpectSameMasks(std::string_view gbnf, const std::shared_ptr<const TokenTrie>& trie, int walks,
                     int steps, int check_every, uint32_t seed) {
  auto counted = Compile(gbnf, /*expand=*/false, trie);
  auto expanded = Compile(gbnf, /*expand=*/true, trie);
  ASSERT_NE(counted, nullptr);
  ASSERT_NE(expanded, nullptr);
  std::mt19937 rng(seed);
  for (int walk = 0; walk < walks; ++walk) {
    Matcher m(counted), reference(expanded);
    std::string text;
    for (int step = 0; step < steps; ++step) {
      std::vector<uint32_t> mask = MaskIds(m);
      if (step % check_every == 0) {
        ASSERT_EQ(mask, BruteForceIds(reference)) << "walk " << walk << " after: " << text;
      }
      ASSERT_EQ(m.CanEnd(), reference.CanEnd()) << "after: " << text;
      if (mask.empty() || (m.CanEnd() && rng() % 12 == 0)) break;
      // Mostly short tokens, so that walks reach every copy; sometimes a long one.
      uint32_t next = mask[rng() % mask.size()];
      for (int tries = 0; tries < 4 && trie->token(next).size() > 2; ++tries) {
        next = mask[rng() % mask.size()];
      }
      ASSERT_TRUE(m.AcceptToken(next));
      ASSERT_TRUE(reference.AcceptToken(next)) << "after: " << text;
      text += trie->token(next);
    }
  }
}

// `gbnf` called five rules deep, each call followed by a byte, so that its repetitions'
// contexts are not whole stacks: tokens that leave a repetition and pop below a context's
// frames are decided per request (uncertain), for the counts where they may leave.
std::string Wrapped(std::string_view gbnf) {
  std::string inner(gbnf);
  inner.replace(inner.find("root ::="), 8, "inner ::=");
  return "root ::= w1 \"!\"\nw1 ::= w2 \",\"\nw2 ::= w3 \"!\"?\nw3 ::= w4 \",\"?\n"
         "w4 ::= inner \"@\"?\n" +
         inner;
}

TEST(CountedRepetitionTest, MasksMatchTheExpandedGrammarOnSyntheticVocabulary) {
  const std::vector<std::string> vocab = Vocabulary();
  std::vector<bool> special(vocab.size(), false);
  special[0] = true;
  auto trie = TokenTrie::Build(vocab, special);
  for (const char* gbnf : kGrammars) {
    SCOPED_TRACE(gbnf);
    ExpectSameMasks(gbnf, trie, /*walks=*/25, /*steps=*/80, /*check_every=*/1, /*seed=*/11);
    ExpectSameMasks(Wrapped(gbnf), trie, /*walks=*/25, /*steps=*/80, /*check_every=*/1,
                    /*seed=*/12);
  }
}

TEST(CountedRepetitionTest, EveryCopyOfARepetitionSharesOneVocabularyWalk) {
  auto trie = TokenTrie::Build(Vocabulary(), {});
  auto g = Compile("root ::= \"\\\"\" [a-c]{0,40} \"\\\"\"", /*expand=*/false, trie);
  ASSERT_NE(g, nullptr);
  Matcher m(g);
  std::vector<uint64_t> words(trie->mask_words());
  for (int i = 0; i < 41; ++i) {
    m.FillMask(absl::MakeSpan(words));
    ASSERT_TRUE(m.AcceptBytes(i == 0 ? "\"" : "a"));
  }
  m.FillMask(absl::MakeSpan(words));
  // 42 contexts (the opening quote, each of the 40 copies, the closing quote) from three
  // vocabulary walks (the quotes' and one for every copy).
  EXPECT_EQ(g->cached_contexts(), 42u);
  EXPECT_EQ(g->vocabulary_walks(), 3u);
}

TEST(CountedRepetitionTest, CountsBeyondTheBoundsAreRefused) {
  auto trie = TokenTrie::Build({"a"}, {});
  for (const char* gbnf : {"root ::= [a]{2,3}", "root ::= (\"a\"){0,1}", "root ::= [a]{3}"}) {
    auto counted = Compile(gbnf, false, trie);
    auto expanded = Compile(gbnf, true, trie);
    for (size_t n = 0; n <= 5; ++n) {
      Matcher a(counted), b(expanded);
      const std::string text(n, 'a');
      EXPECT_EQ(a.AcceptBytes(text) && a.CanEnd(), b.AcceptBytes(text) && b.CanEnd())
          << gbnf << " on " << n << " bytes";
    }
  }
}

TEST(CountedRepetitionTest, SamplerCompletesInsideRepetitions) {
  // ShortestEnding owes exactly the copies still mandatory after the one under way.
  absl::StatusOr<Grammar> g = ParseGbnf("root ::= [a-c]{3,5} \"!\" (\"xy\"){2,4}");
  ASSERT_TRUE(g.ok()) << g.status();
  GrammarSampler sampler(*std::move(g));
  EXPECT_EQ(*sampler.ShortestEnding("", 100), "aaa!xyxy");
  EXPECT_EQ(*sampler.ShortestEnding("b", 100), "aa!xyxy");
  EXPECT_EQ(*sampler.ShortestEnding("bcc", 100), "!xyxy");
  EXPECT_EQ(*sampler.ShortestEnding("bccab!x", 100), "yxy");
  EXPECT_EQ(*sampler.ShortestEnding("bccab!xyxyx", 100), "y");
  EXPECT_EQ(*sampler.ShortestEnding("bccab!xyxyxy", 100), "");
}

// JsonSchemaToGbnf's shapes on a real byte-level BPE vocabulary: maxLength 40 strings with
// escapes, an email's bounded labels, bounded digits, bounded whitespace.
TEST(CountedRepetitionTest, JsonSchemaShapesMatchTheExpandedGrammarOnRealVocabulary) {
  auto path = testing::ConformancePath("tokenizer/ggml-vocab-gpt-2.gguf");
  if (!path) GTEST_SKIP() << "shared conformance data not found: set TESSERA_SHARED_DIR";
  absl::StatusOr<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::Open(path->string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::vector<std::string> pieces;
  std::vector<bool> special;
  for (tokenizer::TokenId id = 0; id < tok->vocab().size(); ++id) {
    const tokenizer::TokenType type = tok->vocab().type(id);
    pieces.emplace_back(tok->Piece(id, /*render_special=*/false));
    special.push_back(type == tokenizer::TokenType::kControl ||
                      type == tokenizer::TokenType::kUnknown ||
                      type == tokenizer::TokenType::kUnused);
  }
  auto trie = TokenTrie::Build(pieces, special);
  // Nested as JsonSchemaToGbnf nests properties, so that contexts inside the strings are not
  // whole stacks and tokens such as `",` pop below them.
  ExpectSameMasks(
      "root ::= doc \"\\n\"?\n"
      "doc ::= \"{\" ws first ws \"}\"\n"
      "first ::= name-kv rest\n"
      "rest ::= \",\" ws email-kv rest-2\n"
      "rest-2 ::= \",\" ws \"\\\"n\\\":\" ws [1-9] [0-9]{0,14}\n"
      "name-kv ::= \"\\\"name\\\":\" ws name\n"
      "name ::= \"\\\"\" char{0,40} \"\\\"\"\n"
      "email-kv ::= \"\\\"email\\\":\" ws \"\\\"\" email \"\\\"\"\n"
      "email ::= [A-Za-z0-9.+\\-]{1,32} \"@\" [a-z] ([a-z0-9\\-]{0,30} [a-z])?\n"
      "ws ::= [ \\t\\n]{0,4}\n"
      "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})",
      trie, /*walks=*/8, /*steps=*/120, /*check_every=*/3, /*seed=*/3);
}

}  // namespace
}  // namespace tessera::grammar
