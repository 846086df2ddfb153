// Tokenization throughput on ~1 MB of mixed English, code and CJK text, for the 100k-token
// deepseek-llm BPE vocabulary and the 32k llama SentencePiece vocabulary from the shared
// conformance data. The pre-tokenizer split alone is the baseline the full encode is
// compared against.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/tokenizer/pre_tokenizer.h"
#include "common/tokenizer/streaming_detokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "tests/support/shared_data.h"

namespace tessera::tokenizer {
namespace {

// Common words, drawn with a Zipf-like skew so that, as in real prose, a few repeat a lot.
constexpr const char* kWords[] = {
    "the",          "of",        "and",        "to",          "in",          "a",
    "is",           "that",      "for",        "it",          "as",          "was",
    "with",         "be",        "by",         "on",          "not",         "he",
    "this",         "are",       "or",         "his",         "from",        "at",
    "which",        "but",       "have",       "an",          "had",         "they",
    "you",          "were",      "their",      "one",         "all",         "we",
    "can",          "her",       "has",        "there",       "been",        "if",
    "more",         "when",      "will",       "would",       "who",         "so",
    "no",           "model",     "system",     "memory",      "request",     "tokenizer",
    "quickly",      "between",   "government", "history",     "performance", "although",
    "different",    "important", "experience", "information", "development", "understanding",
    "particularly", "Wednesday", "Paris",      "don't",       "it's",        "they'll",
    "we've",        "naïve",     "café",       "résumé",      "Zürich",      "São",
    "Москва",       "данные",
};
constexpr const char* kSyllables[] = {"ka", "to",  "ri", "ne",  "mo",  "sa",  "lu",  "vi",
                                      "pe", "dor", "x",  "buf", "len", "idx", "str", "map"};
// Frequent CJK characters (Chinese, kana, hangul); runs of them have no spaces, so a
// SentencePiece "word" is a whole clause and rarely repeats.
constexpr const char* kCjkChars[] = {
    "的", "一", "是", "不", "了", "人", "我", "在", "有", "他", "这", "中", "大", "来", "上",
    "国", "个", "到", "说", "们", "为", "子", "和", "你", "地", "出", "道", "也", "时", "年",
    "得", "就", "那", "要", "下", "以", "生", "会", "自", "着", "去", "之", "过", "家", "学",
    "对", "可", "她", "里", "后", "小", "么", "心", "多", "天", "而", "能", "好", "都", "然",
    "没", "日", "于", "起", "还", "发", "成", "事", "只", "作", "当", "想", "看", "文", "无",
    "の", "に", "は", "を", "た", "が", "で", "て", "と", "し", "れ", "さ", "ア", "イ", "ス",
    "한", "국", "어", "는", "이", "다", "을", "의", "에", "가", "서", "고", "하", "지", "기",
};

// About `bytes` of text: English sentences, code lines and CJK clauses in proportions
// 2:1:1, chosen by a fixed LCG.
std::string MixedText(size_t bytes) {
  std::string text;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&](size_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>(state >> 33) % n;
  };
  auto zipf = [&](size_t n) { return next(n) * next(n) / n; };
  auto identifier = [&] {
    std::string id = kSyllables[next(std::size(kSyllables))];
    const size_t parts = 1 + next(3);
    for (size_t i = 0; i < parts; ++i) {
      id += (next(3) == 0 ? "_" : "");
      id += kSyllables[next(std::size(kSyllables))];
    }
    return id;
  };
  while (text.size() < bytes) {
    switch (next(4)) {
      case 0:
      case 1: {
        const size_t n = 6 + next(12);
        for (size_t i = 0; i < n; ++i) {
          text += kWords[zipf(std::size(kWords))];
          text += i + 1 == n ? ". " : (next(9) == 0 ? ", " : " ");
        }
        if (next(5) == 0) text += std::to_string(next(100000)) + " " + "items.\n";
        break;
      }
      case 2: {
        const std::string a = identifier(), b = identifier();
        switch (next(3)) {
          case 0:
            text += "for (int " + a + " = 0; " + a + " < " + std::to_string(next(4096)) + "; ++" +
                    a + ") {\n  " + b + "[" + a + "] += " + identifier() + ";\n}\n";
            break;
          case 1:
            text += "def " + a + "(" + b + "):\n    return " + b + " * " +
                    std::to_string(next(100)) + "\n";
            break;
          default:
            text += "    if (!" + a + ".ok()) return " + b + "(\"" + identifier() + "\");\n";
        }
        break;
      }
      default: {
        const size_t n = 8 + next(24);
        for (size_t i = 0; i < n; ++i) text += kCjkChars[next(std::size(kCjkChars))];
        text += next(2) ? "。" : "，";
      }
    }
  }
  return text;
}

const std::string& Text() {
  static const std::string* text = new std::string(MixedText(1 << 20));
  return *text;
}

const Tokenizer* Load(const char* vocab) {
  auto path = testing::ConformancePath(std::string("tokenizer/ggml-vocab-") + vocab + ".gguf");
  if (!path) return nullptr;
  auto tok = Tokenizer::Open(path->string());
  if (!tok.ok()) return nullptr;
  return new Tokenizer(std::move(*tok));
}

void BM_Encode(benchmark::State& state, const char* vocab) {
  static const Tokenizer* deepseek = Load("deepseek-llm");
  static const Tokenizer* spm = Load("llama-spm");
  const Tokenizer* tok = std::string(vocab) == "deepseek-llm" ? deepseek : spm;
  if (tok == nullptr) {
    state.SkipWithError("shared conformance vocabulary not found (set TESSERA_SHARED_DIR)");
    return;
  }
  size_t n_tokens = 0;
  for (auto _ : state) {
    std::vector<TokenId> ids = tok->Encode(Text());
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Text().size()));
  state.counters["vocab"] = tok->vocab().size();
  state.counters["tokens"] = static_cast<double>(n_tokens);
}
BENCHMARK_CAPTURE(BM_Encode, bpe_deepseek_llm_100k, "deepseek-llm")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, spm_llama_32k, "llama-spm")->Unit(benchmark::kMillisecond);

// Baseline: the deepseek-llm pre-tokenizer's six PCRE2 passes alone.
void BM_PreTokenizeDeepseekLlm(benchmark::State& state) {
  auto pre = PreTokenizer::Create(*FindPreTokenizerSpec("deepseek-llm"));
  std::vector<std::string_view> pieces;
  for (auto _ : state) {
    pre->Split(Text(), &pieces);
    benchmark::DoNotOptimize(pieces.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Text().size()));
  state.counters["pieces"] = static_cast<double>(pieces.size());
}
BENCHMARK(BM_PreTokenizeDeepseekLlm)->Unit(benchmark::kMillisecond);

void BM_StreamDecode(benchmark::State& state) {
  static const Tokenizer* tok = Load("deepseek-llm");
  if (tok == nullptr) {
    state.SkipWithError("shared conformance vocabulary not found (set TESSERA_SHARED_DIR)");
    return;
  }
  const std::vector<TokenId> ids = tok->Encode(Text());
  for (auto _ : state) {
    StreamingDetokenizer stream(tok);
    std::string out;
    for (TokenId id : ids) (void)stream.Feed(id, &out);
    stream.Finish(&out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Text().size()));
}
BENCHMARK(BM_StreamDecode)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera::tokenizer

BENCHMARK_MAIN();
