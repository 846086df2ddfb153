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
#include "common/tokenizer/tokenizer.h"
#include "tests/support/shared_data.h"

namespace tessera::tokenizer {
namespace {

constexpr const char* kEnglish[] = {
    "The quick brown fox jumps over the lazy dog while the committee debates its budget. ",
    "In 2024, researchers measured 3.7 million samples across 128 sites; results varied. ",
    "She didn't think they'd arrive before noon, but the train was early for once. ",
    "Tokenizers split text into pieces that a language model has learned to predict. ",
    "Prices rose by 12.5% in March, then fell again as supply chains recovered. ",
};
constexpr const char* kCode[] = {
    "for (size_t i = 0; i < n; ++i) {\n  sum += values[i] * weights[i];\n}\n",
    "def tokenize(text: str) -> list[int]:\n    return [vocab[w] for w in text.split()]\n",
    "if (!status.ok()) return absl::InvalidArgumentError(\"bad input\");\n",
    "    const auto& [key, value] = *it;  // structured binding\n",
    "SELECT id, name FROM users WHERE created_at > '2024-01-01' ORDER BY id;\n",
};
constexpr const char* kCjk[] = {
    "我想在苹果公司工作，因为那里的工程师非常优秀。",
    "今天天气很好，我们去公园散步吧！",
    "東京は日本の首都であり、多くの人々が住んでいます。",
    "인공지능은 우리의 삶을 크게 바꾸고 있습니다. ",
    "机器学习模型需要大量的数据来进行训练和评估。",
};

// About `bytes` of text: paragraphs mixing the three kinds, chosen by a fixed LCG.
std::string MixedText(size_t bytes) {
  std::string text;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>(state >> 33);
  };
  while (text.size() < bytes) {
    switch (next() % 3) {
      case 0:
        text += kEnglish[next() % 5];
        break;
      case 1:
        text += kCode[next() % 5];
        break;
      default:
        text += kCjk[next() % 5];
        break;
    }
    if (next() % 7 == 0) text += std::to_string(next() % 100000) + "\n\n";
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
