// The grammar engine (common/grammar/) against independent truth: parser errors written out
// by hand, UTF-8 classes against arithmetic on code points, matching against std::regex and
// nlohmann::json, and token masks against brute force (copy the matcher, try the token).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "common/grammar/compiled_grammar.h"
#include "common/grammar/gbnf_parser.h"
#include "common/grammar/json_grammar.h"
#include "common/grammar/matcher.h"
#include "common/grammar/utf8_ranges.h"
#include "common/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/support/grammar_masks.h"
#include "tests/support/shared_data.h"

namespace tessera::grammar {
namespace {

std::shared_ptr<const CompiledGrammar> CompileOrDie(std::string_view gbnf,
                                                    const std::vector<std::string>& tokens = {},
                                                    const std::vector<bool>& special = {}) {
  absl::StatusOr<Grammar> g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return nullptr;
  return CompiledGrammar::Create(std::move(*g), TokenTrie::Build(tokens, special));
}

// Whether the whole of `text` is a sentence of the grammar.
bool Matches(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  Matcher m(g);
  return m.AcceptBytes(text) && m.CanEnd();
}

// Index of the first byte the matcher refuses, or -1 when all are accepted.
int FirstRejectedByte(Matcher m, std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (!m.AcceptBytes(text.substr(i, 1))) return static_cast<int>(i);
  }
  return -1;
}

using testing::BruteForceIds;
using testing::MaskIds;

// --- Parser errors -------------------------------------------------------------------------

struct ErrorCase {
  std::string text;
  std::string message;  // expected substring
};

TEST(GbnfParserTest, ErrorsNameTheProblemAndPlace) {
  const std::vector<ErrorCase> cases = {
      {"", "grammar is empty"},
      {"  # only a comment\n\n", "grammar is empty"},
      {"root ::= value\nvalue ::= \"a\"\nx ::= \"(\" valeu \")\"",
       "grammar line 3, column 11: undefined rule 'valeu'"},
      {"value ::= \"a\"", "no 'root' rule"},
      {"root ::= ( \"a\" | \"b\"",
       "grammar line 1, column 21: expected ')' to close the '(' at "
       "line 1, column 10"},
      {"root ::= \"a\" )", "grammar line 1, column 14: unexpected ')'"},
      {"root ::= \"a\\q\"", "grammar line 1, column 12: bad escape '\\q'"},
      {"root ::= \"\\x4\"", "bad escape: '\\x' needs 2 hex digits"},
      {"root ::= \"\\uD800\"", "is not a Unicode scalar value"},
      {"root ::= \"\\U00110000\"", "is not a Unicode scalar value"},
      {"root ::= \"abc", "grammar line 1, column 10: unterminated string literal"},
      {"root ::= [a-", "unterminated character class"},
      {"root ::= [z-a]", "reversed"},
      {"root ::= [\xff]", "invalid UTF-8 in character class"},
      {"root ::= [\xc0\x80]", "invalid UTF-8 in character class"},
      {"root ::= [\xed\xa0\x80]", "invalid UTF-8 in character class"},
      {"root ::= [\x80]", "invalid UTF-8 in character class"},
      {"root ::= root \"a\" | \"b\"", "left recursion: rule 'root'"},
      {"root ::= a\na ::= \"x\"? b\nb ::= a \"y\"", "left recursion: rule 'a'"},
      {"root ::= ( \"a\"? )* \"b\"", "left recursion"},
      {"root ::= \"a\"{3,1}", "has its maximum below its minimum"},
      {"root ::= \"a\"{1000000}{1000000}", "elements (after expanding repetitions)"},
      {"root ::= \"a\"{1234567890}", "repetition count is too large"},
      {"root ::= \"a\"{2", "expected '}'"},
      {"root ::= * \"a\"", "'*' must follow an element"},
      {"root = \"a\"", "expected '::=' after rule name 'root'"},
      {"root ::= \"a\"\nroot ::= \"b\"", "grammar line 2, column 1: rule 'root' is defined twice"},
      {"root ::= \"a\" @", "unexpected character '@'"},
      {"::= \"a\"", "expected a rule name"},
      {"root ::= " + std::string(500, '(') + "\"a\"" + std::string(500, ')'), "nested deeper"},
  };
  for (const ErrorCase& c : cases) {
    absl::StatusOr<Grammar> g = ParseGbnf(c.text);
    ASSERT_FALSE(g.ok()) << c.text;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(g.status().message().find(c.message), std::string::npos)
        << "grammar: " << c.text << "\nerror: " << g.status().message()
        << "\nexpected to contain: " << c.message;
  }
}

TEST(GbnfParserTest, RandomBytesNeverCrashOrHang) {
  std::mt19937 rng(7);
  const std::string alphabet = "root::= ab|()[]^-*+?{},.\"\\#\nxu0123456789";
  const char* pieces[] = {" \"a\"", " [a-c]", " [^a]", " .",       " (",          " )",
                          " |",     "*",      "+",     "?",        "{2}",         "{1,3}",
                          "{0,}",   " x",     " root", "\nx ::= ", "\nroot ::= ", " \"\""};
  auto g = CompileOrDie("root ::= \"x\"");
  int parsed_ok = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string text = round % 2 == 0 ? "root ::= " : "";
    const size_t len = round % 3 == 2 ? rng() % 8 : rng() % 40;
    for (size_t i = 0; i < len; ++i) {
      if (round % 3 == 0) {
        text += static_cast<char>(rng() & 0xFF);
      } else if (round % 3 == 1) {
        text += alphabet[rng() % alphabet.size()];
      } else {
        // Whole grammar pieces, so that many inputs parse and reach the matcher.
        text += pieces[rng() % std::size(pieces)];
      }
    }
    absl::StatusOr<Grammar> parsed = ParseGbnf(text);
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    // A grammar that parses must also match without trouble.
    ++parsed_ok;
    auto compiled = CompiledGrammar::Create(std::move(*parsed), TokenTrie::Build({"a", "b"}, {}));
    Matcher m(compiled);
    for (int i = 0; i < 8; ++i) m.AcceptBytes(std::string(1, "ab(x"[rng() % 4]));
    MaskIds(m);
  }
  EXPECT_GT(parsed_ok, 200) << "too few random grammars parse to exercise the matcher";
}

// --- Matching ------------------------------------------------------------------------------

TEST(GrammarMatchTest, RepetitionCounts) {
  auto g = CompileOrDie("root ::= \"ab\"{2,3} \"c\"{2} d{1,} e{,2}\nd ::= \"d\"\ne ::= [e]");
  EXPECT_TRUE(Matches(g, "ababccd"));
  EXPECT_TRUE(Matches(g, "abababccddddee"));
  EXPECT_FALSE(Matches(g, "abccd"));
  EXPECT_FALSE(Matches(g, "abababababccd"));
  EXPECT_FALSE(Matches(g, "ababcd"));
  EXPECT_FALSE(Matches(g, "ababcc"));
  EXPECT_FALSE(Matches(g, "ababccdeee"));
}

TEST(GrammarMatchTest, AgreesWithStdRegexOnRandomStrings) {
  struct Pair {
    const char* gbnf;
    const char* regex;
    const char* alphabet;
  };
  const Pair pairs[] = {
      {"root ::= ( \"ab\" | [c-e]+ \"x\"? ){2,4} \"z\"", "(ab|[c-e]+x?){2,4}z", "abcdexz"},
      {"root ::= [a-c]* \"b\" [a-c]{0,2} ( \"-\" num )?\nnum ::= [0-9]+ ( \".\" [0-9]+ )?",
       "[a-c]*b[a-c]{0,2}(-[0-9]+(\\.[0-9]+)?)?", "abc-.09"},
      {"root ::= ( [^a] | \"a\" [^b] )* \"ab\"?", "([^a]|a[^b])*(ab)?", "abc"},
  };
  std::mt19937 rng(11);
  for (const Pair& p : pairs) {
    auto g = CompileOrDie(p.gbnf);
    const std::regex re(p.regex);
    const std::string alphabet = p.alphabet;
    int matched = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string s;
      const size_t len = rng() % 12;
      for (size_t k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
      const bool expected = std::regex_match(s, re);
      matched += expected;
      EXPECT_EQ(Matches(g, s), expected) << p.gbnf << " on '" << s << "'";
    }
    EXPECT_GT(matched, 10) << p.gbnf << ": too few positive samples to mean anything";
  }
}

TEST(GrammarMatchTest, Utf8SequencesCoverExactlyTheClass) {
  std::mt19937 rng(3);
  const std::vector<std::vector<CodePointRange>> sets = {
      {{0, kMaxCodePoint}},
      {{0x41, 0x5A}, {0xE9, 0xE9}, {0x7FF, 0x801}, {0xD7FF, 0xE000}, {0xFFFF, 0x10000}},
      {{0x80, 0x10FFFF}},
  };
  for (const auto& raw : sets) {
    for (bool negate : {false, true}) {
      std::vector<CodePointRange> ranges = NormalizeRanges(raw);
      if (negate) ranges = ComplementRanges(ranges);
      const std::vector<ByteRangeSequence> seqs = Utf8Sequences(ranges);
      auto in_set = [&](uint32_t cp) {
        if (cp >= 0xD800 && cp <= 0xDFFF) return false;
        bool in = false;
        for (const CodePointRange& r : raw) in |= cp >= r.lo && cp <= r.hi;
        return in != negate;
      };
      for (uint32_t cp = 0; cp <= kMaxCodePoint; cp += 1 + rng() % 61) {
        std::vector<uint8_t> enc;
        AppendUtf8(cp, enc);
        int hits = 0;
        for (const ByteRangeSequence& seq : seqs) {
          if (seq.size() != enc.size()) continue;
          bool all = true;
          for (size_t i = 0; i < enc.size(); ++i) {
            all &= enc[i] >= seq[i].first && enc[i] <= seq[i].second;
          }
          hits += all;
        }
        ASSERT_EQ(hits, in_set(cp) ? 1 : 0) << "code point " << cp;
      }
    }
  }
}

TEST(GrammarMatchTest, ClassesMatchWholeUtf8Characters) {
  auto g = CompileOrDie("root ::= [^\"\\\\]+");
  EXPECT_TRUE(Matches(g, "abc"));
  EXPECT_TRUE(Matches(g, "é中😀"));
  EXPECT_FALSE(Matches(g, "a\"b"));
  EXPECT_FALSE(Matches(g, "\xC3"));  // a character cut short cannot end
  Matcher m(g);
  EXPECT_EQ(FirstRejectedByte(m, "a\xC3\x28"), 2);         // continuation byte expected
  EXPECT_EQ(FirstRejectedByte(m, "\xC0\x80"), 0);          // overlong encoding
  EXPECT_EQ(FirstRejectedByte(m, "\xED\xA0\x80"), 1);      // surrogate U+D800
  EXPECT_EQ(FirstRejectedByte(m, "\xF4\x90\x80\x80"), 1);  // above U+10FFFF
  EXPECT_EQ(FirstRejectedByte(m, "\xE0\x9F\xBF"), 1);      // overlong 3-byte
  auto range = CompileOrDie("root ::= [\\u00e9-\\u4e2d] | \"\\xE9x\"");
  EXPECT_TRUE(Matches(range, "é"));
  EXPECT_TRUE(Matches(range, "中"));
  EXPECT_TRUE(Matches(range, "éx"));  // \xE9 is the code point U+00E9, as in llama.cpp
  EXPECT_FALSE(Matches(range, "e"));
  EXPECT_FALSE(Matches(range, "丮"));  // U+4E2E
  auto any = CompileOrDie("root ::= . . \"!\"");
  EXPECT_TRUE(Matches(any, "\n😀!"));
  EXPECT_FALSE(Matches(any, "ab"));
}

// --- JSON ----------------------------------------------------------------------------------

TEST(JsonGrammarTest, AcceptsDocumentsAndRejectsAtTheFirstWrongByte) {
  auto g = CompileOrDie(kJsonObjectGbnf);
  for (const char* doc :
       {"{}", "{ }", "{\"a\":1}", "{\"a\" : [1, -2.5e+3, true, null, {\"b\": \"\\u00e9\\n\"}]}",
        "{\"k\":\"é中😀\"}\n", "{\"a\":0,\"b\":-0.0E-1,\"c\":[]}"}) {
    EXPECT_TRUE(Matches(g, doc)) << doc;
    EXPECT_TRUE(nlohmann::json::accept(doc)) << doc;  // the fixtures are valid JSON
  }
  // Offsets counted by hand.
  const std::pair<const char*, int> invalid[] = {
      {"{\"a\":1,}", 7},       {"{\"a\" 1}", 5},  {"{\"a\":tru}", 8}, {"1", 0},
      {"{\"a\":\"\\q\"}", 7},  {"{\"a\":01}", 6}, {"{\"a\":1.}", 7},  {"{'a':1}", 1},
      {"{\"a\":\"\x01\"}", 6}, {"{\"a\":-}", 6},  {"{\"a\":1}x", 7},  {"{\"\\u12g4\":1}", 6},
  };
  Matcher m(g);
  for (const auto& [doc, offset] : invalid) {
    EXPECT_EQ(FirstRejectedByte(m, doc), offset) << doc;
    EXPECT_FALSE(nlohmann::json::accept(doc) && nlohmann::json::parse(doc).is_object()) << doc;
  }
  EXPECT_FALSE(Matches(g, "{\"a\":1"));
  EXPECT_FALSE(Matches(g, std::string("{}") + std::string(21, ' ')));  // whitespace is bounded
  EXPECT_TRUE(Matches(g, std::string("{}") + std::string(20, ' ')));
}

// A hand-made vocabulary with JSON pieces, split UTF-8 and a special token.
std::vector<std::string> SmallVocab() {
  return {"<|end|>", "{",    "}",  "\"", "a",   "\"a\":", "1",   ",",        " ",        "\xE4",
          "\xB8",    "\xAD", "中", "tr", "ue",  "true",   "\"}", "\xF0\x9F", "\x98\x80", "",
          "\\",      "u",    "00", "e9", "[",   "]",      "-",   "0.",       "5",        "null}",
          "\"\"",    ":",    "\n", "x",  "é\"", "}}",     "{\"", "\":\""};
}

TEST(JsonGrammarTest, MaskMatchesBruteForceOnSmallVocabulary) {
  std::vector<bool> special(SmallVocab().size(), false);
  special[0] = true;
  auto g = CompileOrDie(kJsonObjectGbnf, SmallVocab(), special);
  std::mt19937 rng(5);
  for (int walk = 0; walk < 40; ++walk) {
    Matcher m(g);
    for (int step = 0; step < 30; ++step) {
      std::vector<uint32_t> mask = MaskIds(m);
      ASSERT_EQ(mask, BruteForceIds(m)) << "walk " << walk << " step " << step;
      for (uint32_t id : mask) EXPECT_NE(id, 0u) << "special token allowed";
      if (m.MustEnd()) {
        EXPECT_TRUE(mask.empty());
      }
      if (mask.empty()) break;
      ASSERT_TRUE(m.AcceptToken(mask[rng() % mask.size()]));
    }
  }
}

TEST(JsonGrammarTest, Utf8SplitAcrossTokens) {
  const std::vector<std::string> vocab = SmallVocab();
  auto g = CompileOrDie(kJsonObjectGbnf, vocab);
  auto id_of = [&](std::string_view piece) {
    return static_cast<uint32_t>(std::find(vocab.begin(), vocab.end(), piece) - vocab.begin());
  };
  Matcher m(g);
  ASSERT_TRUE(m.AcceptToken(id_of("{\"")));
  ASSERT_TRUE(m.AcceptToken(id_of("\xE4")));
  // After E4 (lead byte of a 3-byte character) only one or two continuation bytes fit.
  const std::vector<uint32_t> one_or_two = {id_of("\xB8"), id_of("\xAD"), id_of("\x98\x80")};
  EXPECT_EQ(MaskIds(m), one_or_two);
  EXPECT_FALSE(m.AcceptToken(id_of("\"")));
  EXPECT_FALSE(m.AcceptToken(id_of("中")));
  ASSERT_TRUE(m.AcceptToken(id_of("\xB8")));
  // E4 B8: exactly one continuation byte; 98 80 would leave 80 as a lead byte.
  const std::vector<uint32_t> one = {id_of("\xB8"), id_of("\xAD")};
  EXPECT_EQ(MaskIds(m), one);
  EXPECT_FALSE(m.AcceptToken(id_of("\x98\x80")));
  ASSERT_TRUE(m.AcceptToken(id_of("\xAD")));
  ASSERT_TRUE(m.AcceptToken(id_of("\xF0\x9F")));
  EXPECT_EQ(MaskIds(m), one_or_two);  // F0 9F needs two more continuation bytes
  ASSERT_TRUE(m.AcceptToken(id_of("\x98\x80")));
  ASSERT_TRUE(m.AcceptToken(id_of("\":\"")));
  ASSERT_TRUE(m.AcceptToken(id_of("é\"")));
  ASSERT_TRUE(m.AcceptToken(id_of("}")));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.AcceptToken(id_of("")));  // empty tokens are never allowed
}

TEST(JsonGrammarTest, RollbackRestoresEarlierStates) {
  const std::vector<std::string> vocab = SmallVocab();
  auto g = CompileOrDie(kJsonObjectGbnf, vocab);
  Matcher m(g);
  std::vector<std::vector<uint32_t>> masks = {MaskIds(m)};
  for (const char* piece : {"{", "\"a\":", "tr", "ue", "}"}) {
    uint32_t id =
        static_cast<uint32_t>(std::find(vocab.begin(), vocab.end(), piece) - vocab.begin());
    ASSERT_TRUE(m.AcceptToken(id)) << piece;
    masks.push_back(MaskIds(m));
  }
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.Rollback(6));
  EXPECT_EQ(m.steps(), 5u);
  for (int back = 1; back <= 5; ++back) {
    ASSERT_TRUE(m.Rollback(1));
    EXPECT_EQ(MaskIds(m), masks[5 - back]) << "after rolling back " << back;
  }
  EXPECT_EQ(m.steps(), 0u);
  EXPECT_FALSE(m.CanEnd());
}

// --- Real vocabularies ---------------------------------------------------------------------

struct LoadedVocab {
  std::vector<std::string> pieces;
  std::vector<bool> special;
};

LoadedVocab Pieces(const tokenizer::Tokenizer& tok) {
  LoadedVocab v;
  for (tokenizer::TokenId id = 0; id < tok.vocab().size(); ++id) {
    const tokenizer::TokenType type = tok.vocab().type(id);
    v.pieces.emplace_back(tok.Piece(id, /*render_special=*/false));
    v.special.push_back(type == tokenizer::TokenType::kControl ||
                        type == tokenizer::TokenType::kUnknown ||
                        type == tokenizer::TokenType::kUnused);
  }
  return v;
}

// Random walks through the masks of a real vocabulary end in JSON documents that
// nlohmann::json accepts; at some steps the mask is compared with brute force.
void WalkJson(const std::string& vocab_file) {
  auto path = testing::ConformancePath("tokenizer/" + vocab_file);
  if (!path) {
    GTEST_SKIP() << "shared conformance data not found (tokenizer/" << vocab_file
                 << "): set TESSERA_SHARED_DIR or place ../shared beside the checkout";
  }
  absl::StatusOr<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::Open(path->string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  LoadedVocab v = Pieces(*tok);
  auto g = CompileOrDie(kJsonObjectGbnf, v.pieces, v.special);
  // Tokens that close a document quickly, tried in order once a walk is long enough.
  std::vector<uint32_t> closers;
  for (const char* piece : {"\"", "}", "]", ":", "0"}) {
    auto it = std::find(v.pieces.begin(), v.pieces.end(), piece);
    ASSERT_NE(it, v.pieces.end()) << piece;
    closers.push_back(static_cast<uint32_t>(it - v.pieces.begin()));
  }
  std::mt19937 rng(1234);
  int brute_force_checks = 0;
  for (int walk = 0; walk < 12; ++walk) {
    Matcher m(g);
    std::string doc;
    for (int step = 0; step < 400; ++step) {
      const bool closing = step >= 40;
      if (m.CanEnd() && (closing || rng() % 8 == 0)) break;
      std::vector<uint32_t> mask = MaskIds(m);
      if (mask.empty() && m.MustEnd()) break;
      if (step % 9 == 4 && brute_force_checks < 8) {
        ++brute_force_checks;
        ASSERT_EQ(mask, BruteForceIds(m)) << vocab_file << " walk " << walk << " at: " << doc;
      }
      ASSERT_FALSE(mask.empty()) << "dead end at: " << doc;
      for (uint32_t id : mask) ASSERT_FALSE(v.special[id]) << "special token " << id;
      uint32_t next = mask[rng() % mask.size()];
      if (closing) {
        for (uint32_t c : closers) {
          if (std::binary_search(mask.begin(), mask.end(), c)) {
            next = c;
            break;
          }
        }
      }
      ASSERT_TRUE(m.AcceptToken(next)) << "masked token refused: " << v.pieces[next];
      doc += v.pieces[next];
    }
    ASSERT_TRUE(m.CanEnd()) << "walk did not finish: " << doc;
    nlohmann::json parsed;
    ASSERT_NO_THROW(parsed = nlohmann::json::parse(doc)) << doc;
    EXPECT_TRUE(parsed.is_object()) << doc;
  }
  EXPECT_GT(brute_force_checks, 0);
}

TEST(JsonGrammarRealVocabTest, ByteLevelBpeGpt2) { WalkJson("ggml-vocab-gpt-2.gguf"); }
TEST(JsonGrammarRealVocabTest, SentencePieceLlama) { WalkJson("ggml-vocab-llama-spm.gguf"); }

// Counted repetitions against their expanded form: grammar_repetition_test.cc.

}  // namespace
}  // namespace tessera::grammar
