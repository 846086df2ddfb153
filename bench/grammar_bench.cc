// Grammar engine speed: compiling a grammar against a vocabulary (CompiledGrammar::Create)
// and computing one token mask (Matcher::FillMask), for JSON mode, a 20-way choice and two
// JSON Schemas compiled by JsonSchemaToGbnf (a 10-property object in OpenAI strict-mode
// style, and a recursive tree through $ref; the conversion's own time is printed too), on
// the largest conformance vocabulary (deepseek-llm, ~100k byte-level BPE tokens) and on a
// synthetic 154,880-token vocabulary (those tokens plus concatenations of two of them).
// The mask time is measured at every state of seeded random walks through the grammar
// (median and 90th percentile over the states); the baseline printed beside it is one
// AcceptToken of a random allowed token, the cost of advancing the state. Rows named "/x"
// are the same grammar with its bounded repetitions expanded into nested rules
// (GbnfOptions::expand_repetitions: every copy a context of its own, classified on its own),
// the baseline of counted repetitions.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/grammar/compiled_grammar.h"
#include "common/grammar/gbnf_parser.h"
#include "common/grammar/json_grammar.h"
#include "common/grammar/json_schema.h"
#include "common/grammar/matcher.h"
#include "common/grammar/sampler.h"
#include "common/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/support/shared_data.h"

namespace tessera::grammar {
namespace {

struct Vocab {
  std::string name;
  std::vector<std::string> pieces;
  std::vector<bool> special;
};

const Vocab* LoadDeepseek() {
  auto path = testing::ConformancePath("tokenizer/ggml-vocab-deepseek-llm.gguf");
  if (!path) return nullptr;
  auto tok = tokenizer::Tokenizer::Open(path->string());
  if (!tok.ok()) return nullptr;
  auto* v = new Vocab{"deepseek-llm", {}, {}};
  for (tokenizer::TokenId id = 0; id < tok->vocab().size(); ++id) {
    const tokenizer::TokenType type = tok->vocab().type(id);
    v->pieces.emplace_back(tok->Piece(id, /*render_special=*/false));
    v->special.push_back(type == tokenizer::TokenType::kControl ||
                         type == tokenizer::TokenType::kUnknown ||
                         type == tokenizer::TokenType::kUnused);
  }
  return v;
}

// The real tokens plus distinct concatenations of two random real tokens, up to 154,880.
const Vocab* Synthetic(const Vocab& base) {
  constexpr size_t kSize = 154880;
  auto* v = new Vocab{"synthetic-154880", base.pieces, base.special};
  absl::flat_hash_set<std::string> seen(v->pieces.begin(), v->pieces.end());
  std::mt19937 rng(42);
  while (v->pieces.size() < kSize) {
    const std::string& a = base.pieces[rng() % base.pieces.size()];
    const std::string& b = base.pieces[rng() % base.pieces.size()];
    if (a.empty() || b.empty()) continue;
    std::string joined(a);
    joined.append(b);
    if (!seen.insert(joined).second) continue;
    v->pieces.push_back(std::move(joined));
    v->special.push_back(false);
  }
  return v;
}

std::string ChoiceGrammar() {
  std::string g = "root ::= ";
  const char* words[] = {"alpha", "bravo", "charlie", "delta", "echo",   "foxtrot", "golf",
                         "hotel", "india", "juliett", "kilo",  "lima",   "mike",    "november",
                         "oscar", "papa",  "quebec",  "romeo", "sierra", "tango"};
  for (size_t i = 0; i < 20; ++i) {
    if (i > 0) g += " | ";
    g.append("\"").append(words[i]).append("\"");
  }
  return g;
}

// Ten properties of the usual kinds, all required, no others (OpenAI strict mode's shape).
constexpr char kObjectSchema[] = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 40},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "format": "email"},
    "active": {"type": "boolean"},
    "score": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    "role": {"enum": ["admin", "user", "guest"]},
    "created": {"type": "string", "format": "date-time"},
    "address": {"type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                "required": ["street", "city"], "additionalProperties": false},
    "notes": {"type": ["string", "null"]}
  },
  "required": ["name", "age", "email", "active", "score", "tags", "role", "created", "address",
               "notes"],
  "additionalProperties": false
})";

// A tree: recursion through $ref.
constexpr char kRecursiveSchema[] = R"({
  "$defs": {"node": {"type": "object",
    "properties": {"label": {"type": "string"},
                   "weight": {"type": "integer", "minimum": -1000, "maximum": 1000},
                   "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["label", "children"], "additionalProperties": false}},
  "$ref": "#/$defs/node"
})";

// JsonSchemaToGbnf's text and its conversion time (median of 20 runs).
std::string SchemaGbnf(const char* name, const char* schema_text) {
  const auto schema = nlohmann::ordered_json::parse(schema_text);
  std::vector<double> us;
  std::string gbnf;
  for (int i = 0; i < 20; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<std::string> converted = JsonSchemaToGbnf(schema);
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (!converted.ok()) {
      std::printf("%s: %s\n", name, std::string(converted.status().message()).c_str());
      return "";
    }
    gbnf = *converted;
  }
  std::sort(us.begin(), us.end());
  std::printf("%-10s JsonSchemaToGbnf %6.1f us (median of 20), %zu bytes of GBNF\n", name,
              us[us.size() / 2], gbnf.size());
  return gbnf;
}

double Median(std::vector<double> xs) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}
double Percentile90(std::vector<double> xs) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() * 9 / 10];
}

// `short_tokens`: the walk picks among allowed tokens of at most two bytes when there are
// any, so that it spends its steps in the grammar's structure rather than inside strings.
// `expand`: lower bounded repetitions to nested rules (the baseline of counted ones).
void Report(const Vocab& vocab, const char* grammar_name, std::string_view gbnf,
            bool short_tokens = false, bool expand = false) {
  using Clock = std::chrono::steady_clock;
  auto us = [](Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  auto trie_start = Clock::now();
  auto trie = TokenTrie::Build(vocab.pieces, vocab.special);
  auto trie_end = Clock::now();
  auto compile_start = Clock::now();
  GbnfOptions gbnf_options;
  gbnf_options.expand_repetitions = expand;
  absl::StatusOr<Grammar> g = ParseGbnf(gbnf, gbnf_options);
  if (!g.ok()) {
    std::printf("%s: %s\n", grammar_name, std::string(g.status().message()).c_str());
    return;
  }
  auto compiled = CompiledGrammar::Create(std::move(*g), trie);
  auto compile_end = Clock::now();

  // Two passes over the same seeded walks: the first meets every stack context for the first
  // time (classification included), the second finds them cached.
  struct Pass {
    std::vector<double> mask_us, accept_us;
    size_t allowed_total = 0;
  };
  auto run_pass = [&]() {
    Pass pass;
    std::vector<uint64_t> words(trie->mask_words());
    std::mt19937 rng(9);
    for (int walk = 0; walk < 20; ++walk) {
      Matcher m(compiled);
      for (int step = 0; step < 60; ++step) {
        auto t0 = Clock::now();
        m.FillMask(absl::MakeSpan(words));
        pass.mask_us.push_back(us(Clock::now() - t0));
        std::vector<uint32_t> allowed;
        for (uint32_t id = 0; id < trie->vocab_size(); ++id) {
          if ((words[id >> 6] >> (id & 63)) & 1) allowed.push_back(id);
        }
        pass.allowed_total += allowed.size();
        if (allowed.empty() || (m.CanEnd() && rng() % 10 == 0)) break;
        uint32_t next = allowed[rng() % allowed.size()];
        if (short_tokens) {
          std::vector<uint32_t> short_ones;
          for (uint32_t id : allowed) {
            if (trie->token(id).size() <= 2) short_ones.push_back(id);
          }
          if (!short_ones.empty()) next = short_ones[rng() % short_ones.size()];
        }
        auto t2 = Clock::now();
        m.AcceptToken(next);
        pass.accept_us.push_back(us(Clock::now() - t2));
      }
    }
    return pass;
  };
  const Pass cold = run_pass();
  const Pass warm = run_pass();
  double cold_total = 0;
  for (double t : cold.mask_us) cold_total += t;
  std::printf(
      "%-17s %-10s vocab %6u: trie %6.1f ms, parse+create %5.2f ms, first pass %7.1f ms for %zu "
      "contexts (%zu vocabulary walks) | warm mask median %7.1f us, p90 %7.1f us, max %8.1f us "
      "over %zu states (avg %zu allowed) | AcceptToken median %5.2f us\n",
      vocab.name.c_str(), grammar_name, trie->vocab_size(), us(trie_end - trie_start) / 1000,
      us(compile_end - compile_start) / 1000, cold_total / 1000, compiled->cached_contexts(),
      compiled->vocabulary_walks(), Median(warm.mask_us), Percentile90(warm.mask_us),
      *std::max_element(warm.mask_us.begin(), warm.mask_us.end()), warm.mask_us.size(),
      warm.allowed_total / std::max<size_t>(1, warm.mask_us.size()), Median(warm.accept_us));
}

// The first use of a grammar by whole documents: `documents` random sentences of the grammar
// (GrammarSampler), each fed to one fresh compiled grammar token by token, at each step the
// longest vocabulary token that continues the document and that the matcher accepts, with a
// FillMask before every token. Unlike Report's walks, every property of a schema is met.
void ReportDocuments(const Vocab& vocab, const char* grammar_name, std::string_view gbnf,
                     int documents) {
  using Clock = std::chrono::steady_clock;
  auto trie = TokenTrie::Build(vocab.pieces, vocab.special);
  absl::flat_hash_map<std::string_view, uint32_t> ids;
  size_t longest = 0;
  for (uint32_t id = 0; id < trie->vocab_size(); ++id) {
    if (!trie->eligible(id)) continue;
    ids.try_emplace(trie->token(id), id);
    longest = std::max(longest, trie->token(id).size());
  }
  absl::StatusOr<Grammar> for_sampler = ParseGbnf(gbnf);
  absl::StatusOr<Grammar> g = ParseGbnf(gbnf);
  if (!for_sampler.ok() || !g.ok()) return;
  GrammarSampler sampler(*std::move(for_sampler));
  auto compiled = CompiledGrammar::Create(*std::move(g), trie);
  std::mt19937_64 rng(5);
  std::vector<uint64_t> words(trie->mask_words());
  std::vector<double> per_document_ms;
  size_t tokens = 0, bytes = 0;
  for (int d = 0; d < documents; ++d) {
    absl::StatusOr<std::string> doc = sampler.Sample(rng, {.soft_max_bytes = 400});
    if (!doc.ok()) return;
    Matcher m(compiled);
    double ms = 0;
    for (size_t at = 0; at < doc->size();) {
      auto t0 = Clock::now();
      m.FillMask(absl::MakeSpan(words));
      ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      size_t length = std::min(longest, doc->size() - at);
      for (; length > 0; --length) {
        auto it = ids.find(std::string_view(*doc).substr(at, length));
        if (it != ids.end() && m.AcceptToken(it->second)) break;
      }
      if (length == 0) {
        std::printf("%s: no token continues the document at byte %zu\n", grammar_name, at);
        return;
      }
      at += length;
      ++tokens;
    }
    bytes += doc->size();
    per_document_ms.push_back(ms);
  }
  double total = 0;
  for (double ms : per_document_ms) total += ms;
  std::printf(
      "%-17s %-10s vocab %6u: %d whole documents (%zu bytes, %zu tokens): first use %7.1f ms "
      "(first document %6.1f ms) for %zu contexts (%zu vocabulary walks)\n",
      vocab.name.c_str(), grammar_name, trie->vocab_size(), documents, bytes, tokens, total,
      per_document_ms.front(), compiled->cached_contexts(), compiled->vocabulary_walks());
}

// Steady-state mask time inside a JSON string on the synthetic vocabulary, for
// --benchmark_* tooling.
void BM_JsonMaskInString(benchmark::State& state) {
  static const Vocab* base = LoadDeepseek();
  if (base == nullptr) {
    state.SkipWithError("shared conformance vocabulary not found (set TESSERA_SHARED_DIR)");
    return;
  }
  static const Vocab* synthetic = Synthetic(*base);
  static auto compiled = CompiledGrammar::Create(
      *ParseGbnf(kJsonObjectGbnf), TokenTrie::Build(synthetic->pieces, synthetic->special));
  Matcher m(compiled);
  m.AcceptBytes("{\"key\": \"some text");
  std::vector<uint64_t> words(compiled->vocab().mask_words());
  for (auto _ : state) {
    m.FillMask(absl::MakeSpan(words));
    benchmark::DoNotOptimize(words.data());
  }
}
BENCHMARK(BM_JsonMaskInString)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera::grammar

int main(int argc, char** argv) {
  using namespace tessera::grammar;
  // --rows=TEXT: only the rows whose "vocabulary grammar" name contains TEXT (is TEXT when it
  // ends in '$').
  std::string rows;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).starts_with("--rows=")) rows = argv[i] + 7;
  }
  const Vocab* deepseek = LoadDeepseek();
  if (deepseek == nullptr) {
    std::printf("shared conformance vocabulary not found (set TESSERA_SHARED_DIR)\n");
  } else {
    const Vocab* synthetic = Synthetic(*deepseek);
    const std::string choice = ChoiceGrammar();
    const std::string object = SchemaGbnf("schema-10", kObjectSchema);
    const std::string tree = SchemaGbnf("schema-rec", kRecursiveSchema);
    for (const Vocab* v : {deepseek, synthetic}) {
      auto report = [&](const char* name, std::string_view gbnf, bool short_tokens, bool expand) {
        const std::string row = v->name + " " + name + "$";
        if (row.find(rows) == std::string::npos) return;
        Report(*v, name, gbnf, short_tokens, expand);
      };
      report("json", kJsonObjectGbnf, false, false);
      report("json-short", kJsonObjectGbnf, /*short_tokens=*/true, false);
      report("choice", choice, false, false);
      report("schema-10", object, /*short_tokens=*/true, false);
      report("schema-10/x", object, /*short_tokens=*/true, /*expand=*/true);
      report("schema-rec", tree, /*short_tokens=*/true, false);
      report("schema-rec/x", tree, /*short_tokens=*/true, /*expand=*/true);
      for (const auto& [name, gbnf] :
           {std::pair<const char*, std::string_view>{"json", kJsonObjectGbnf},
            {"schema-10", object},
            {"schema-rec", tree}}) {
        const std::string row = v->name + " " + name + " documents$";
        if (row.find(rows) != std::string::npos) ReportDocuments(*v, name, gbnf, 5);
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
