// tessera gen-model: writes a small synthetic GGUF (random weights, a real byte-level BPE
// vocabulary learned from a built-in text) for tests, demos and the default model.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/gguf/writer.h"
#include "common/util/half.h"
#include "tools/commands.h"

namespace tessera::cli {
namespace {

using gguf::GgmlType;
using gguf::GgufWriter;
using gguf::Value;

constexpr char kUsage[] =
    "usage: tessera gen-model --out PATH [options]\n"
    "\n"
    "Writes a small synthetic model of architecture llama: random weights (seeded), a\n"
    "byte-level BPE vocabulary with merges learned from a built-in English text, Llama-3\n"
    "special tokens and chat template.\n"
    "\n"
    "  --out PATH          output file (with --split-tensors: the prefix of the parts)\n"
    "  --seed N            random seed (default 1)\n"
    "  --type T            weight type: f32 (default), f16, bf16\n"
    "  --layers N          decoder blocks (default 2)\n"
    "  --embd N            hidden size (default 64)\n"
    "  --heads N           attention heads (default 4)\n"
    "  --kv-heads N        key/value heads (default 2)\n"
    "  --ff N              feed-forward width (default 128)\n"
    "  --ctx N             context length (default 2048)\n"
    "  --merges N          BPE merges to learn (default 200)\n"
    "  --split-tensors N   write a split set with at most N tensors per part\n";

// A few paragraphs to learn merges from; any English text works.
constexpr char kCorpus[] =
    "Tessera serves language models. The quick brown fox jumps over the lazy dog. "
    "Once upon a time there was a little model that wanted to talk. It read the books of the "
    "world and learned the words, one token at a time. The operators who ran it were happy, "
    "because it loaded in seconds and answered every question with care. Hello world! "
    "What is the capital of France? The capital of France is Paris. How are you today? "
    "I am fine, thank you. def main(): return 0  # code, too.\n";

constexpr const char* kSpecialTokens[] = {"<|begin_of_text|>", "<|end_of_text|>",
                                          "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};

constexpr char kChatTemplate[] =
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + "
    "message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}";

// GPT-2's byte -> code point map (spec 14.2), as UTF-8 strings.
std::vector<std::string> ByteLevelChars() {
  std::vector<std::string> out(256);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    int cp = printable ? b : next++;
    std::string s;
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
    out[b] = s;
  }
  return out;
}

// Learns `n` BPE merges over the corpus split into words (a leading space stays with the
// word, as GPT-2's pre-tokenizer does).
std::vector<std::pair<std::string, std::string>> LearnMerges(int n) {
  std::vector<std::string> chars = ByteLevelChars();
  std::map<std::vector<std::string>, int> words;
  std::string text = kCorpus;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i + 1;
    while (j < text.size() && text[j] != ' ' && text[j] != '\n') ++j;
    std::vector<std::string> w;
    for (size_t k = i; k < j; ++k) w.push_back(chars[static_cast<uint8_t>(text[k])]);
    ++words[w];
    i = j;
  }
  std::vector<std::pair<std::string, std::string>> merges;
  for (int m = 0; m < n; ++m) {
    std::map<std::pair<std::string, std::string>, int> counts;
    for (const auto& [w, c] : words) {
      for (size_t k = 0; k + 1 < w.size(); ++k) counts[{w[k], w[k + 1]}] += c;
    }
    if (counts.empty()) break;
    auto best = counts.begin();
    for (auto it = counts.begin(); it != counts.end(); ++it) {
      if (it->second > best->second) best = it;
    }
    if (best->second < 2) break;
    merges.push_back(best->first);
    std::map<std::vector<std::string>, int> next;
    for (const auto& [w, c] : words) {
      std::vector<std::string> nw;
      for (size_t k = 0; k < w.size(); ++k) {
        if (k + 1 < w.size() && w[k] == best->first.first && w[k + 1] == best->first.second) {
          nw.push_back(w[k] + w[k + 1]);
          ++k;
        } else {
          nw.push_back(w[k]);
        }
      }
      next[nw] += c;
    }
    words = std::move(next);
  }
  return merges;
}

struct Options {
  std::string out;
  uint64_t seed = 1;
  GgmlType type = GgmlType::kF32;
  int layers = 2, embd = 64, heads = 4, kv_heads = 2, ff = 128, ctx = 2048, merges = 200;
  int split_tensors = 0;
};

std::vector<uint8_t> Encode(const std::vector<float>& v, GgmlType type) {
  std::vector<uint8_t> out;
  if (type == GgmlType::kF32) {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  out.resize(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h = type == GgmlType::kF16 ? FloatToFp16(v[i]) : FloatToBf16(v[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

absl::Status Generate(const Options& o) {
  GgufWriter w;
  auto& md = w.metadata();
  const std::string arch = "llama";
  md.Set("general.architecture", Value::String(arch));
  md.Set("general.name", Value::String("tessera-synthetic-llama"));
  md.Set("general.file_type", Value::U32(o.type == GgmlType::kF32   ? 0
                                         : o.type == GgmlType::kF16 ? 1
                                                                    : 32));
  md.Set("general.quantization_version", Value::U32(2));

  // Vocabulary: 256 byte-level tokens, learned merges, then the special tokens.
  std::vector<std::string> tokens = ByteLevelChars();
  std::vector<int32_t> types(256, 1);
  std::vector<std::string> merge_strings;
  for (const auto& [a, b] : LearnMerges(o.merges)) {
    merge_strings.push_back(a + " " + b);
    tokens.push_back(a + b);
    types.push_back(1);
  }
  int first_special = static_cast<int>(tokens.size());
  for (const char* s : kSpecialTokens) {
    tokens.push_back(s);
    types.push_back(3);  // CONTROL
  }
  const int vocab = static_cast<int>(tokens.size());

  md.Set(arch + ".context_length", Value::U32(o.ctx));
  md.Set(arch + ".embedding_length", Value::U32(o.embd));
  md.Set(arch + ".block_count", Value::U32(o.layers));
  md.Set(arch + ".feed_forward_length", Value::U32(o.ff));
  md.Set(arch + ".attention.head_count", Value::U32(o.heads));
  md.Set(arch + ".attention.head_count_kv", Value::U32(o.kv_heads));
  md.Set(arch + ".rope.dimension_count", Value::U32(o.embd / o.heads));
  md.Set(arch + ".rope.freq_base", Value::F32(500000.0f));
  md.Set(arch + ".attention.layer_norm_rms_epsilon", Value::F32(1e-5f));
  md.Set(arch + ".vocab_size", Value::U32(vocab));
  md.Set("tokenizer.ggml.model", Value::String("gpt2"));
  md.Set("tokenizer.ggml.pre", Value::String("llama-bpe"));
  md.Set("tokenizer.ggml.tokens", Value::StringArray(tokens));
  md.Set("tokenizer.ggml.token_type", Value::I32Array(types));
  md.Set("tokenizer.ggml.merges", Value::StringArray(merge_strings));
  md.Set("tokenizer.ggml.bos_token_id", Value::U32(first_special));
  md.Set("tokenizer.ggml.eos_token_id", Value::U32(first_special + 4));  // <|eot_id|>
  md.Set("tokenizer.ggml.eot_token_id", Value::U32(first_special + 4));
  md.Set("tokenizer.ggml.add_bos_token", Value::Bool(true));
  md.Set("tokenizer.chat_template", Value::String(kChatTemplate));

  std::mt19937_64 rng(o.seed);
  auto tensor = [&](const std::string& name, std::vector<int64_t> dims, float scale,
                    bool norm) -> absl::Status {
    size_t n = 1;
    for (int64_t d : dims) n *= static_cast<size_t>(d);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = norm ? 1.0f + 0.1f * dist(rng) / scale : dist(rng);
    // Norm weights stay F32, as converters keep 1-D tensors in float (spec 13.1).
    GgmlType t = dims.size() == 1 ? GgmlType::kF32 : o.type;
    return w.AddTensor(name, std::move(dims), t, Encode(v, t));
  };
  const int head_dim = o.embd / o.heads;
  const float in_scale = 1.0f / std::sqrt(static_cast<float>(o.embd));
  absl::Status s = tensor("token_embd.weight", {o.embd, vocab}, 1.0f, false);
  for (int l = 0; s.ok() && l < o.layers; ++l) {
    std::string b = absl::StrCat("blk.", l, ".");
    for (auto st : {tensor(b + "attn_norm.weight", {o.embd}, 1.0f, true),
                    tensor(b + "attn_q.weight", {o.embd, o.heads * head_dim}, in_scale, false),
                    tensor(b + "attn_k.weight", {o.embd, o.kv_heads * head_dim}, in_scale, false),
                    tensor(b + "attn_v.weight", {o.embd, o.kv_heads * head_dim}, in_scale, false),
                    tensor(b + "attn_output.weight", {o.heads * head_dim, o.embd}, in_scale, false),
                    tensor(b + "ffn_norm.weight", {o.embd}, 1.0f, true),
                    tensor(b + "ffn_gate.weight", {o.embd, o.ff}, in_scale, false),
                    tensor(b + "ffn_up.weight", {o.embd, o.ff}, in_scale, false),
                    tensor(b + "ffn_down.weight", {o.ff, o.embd},
                           1.0f / std::sqrt(static_cast<float>(o.ff)), false)}) {
      if (!st.ok()) s = st;
    }
  }
  if (s.ok()) s = tensor("output_norm.weight", {o.embd}, 1.0f, true);
  if (s.ok()) s = tensor("output.weight", {o.embd, vocab}, 2.0f * in_scale, false);
  if (!s.ok()) return s;
  if (o.split_tensors > 0) {
    auto parts = w.WriteSplit(o.out, static_cast<size_t>(o.split_tensors));
    if (!parts.ok()) return parts.status();
    for (const std::string& p : *parts) std::fprintf(stderr, "wrote %s\n", p.c_str());
    return absl::OkStatus();
  }
  s = w.WriteFile(o.out);
  if (s.ok()) {
    std::fprintf(stderr, "wrote %s: llama, %d layers, d=%d, vocab %d, %zu tensors\n", o.out.c_str(),
                 o.layers, o.embd, vocab, w.tensor_count());
  }
  return s;
}

}  // namespace

int RunGenModel(const Args& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= args.size()) {
      std::fprintf(stderr, "tessera gen-model: '%s' needs a value or is unknown\n\n%s", a.c_str(),
                   kUsage);
      return 2;
    }
    const std::string& v = args[++i];
    std::map<std::string, int*> ints = {
        {"--layers", &o.layers}, {"--embd", &o.embd},
        {"--heads", &o.heads},   {"--kv-heads", &o.kv_heads},
        {"--ff", &o.ff},         {"--ctx", &o.ctx},
        {"--merges", &o.merges}, {"--split-tensors", &o.split_tensors}};
    if (a == "--out") {
      o.out = v;
    } else if (a == "--seed") {
      if (!absl::SimpleAtoi(v, &o.seed)) {
        std::fprintf(stderr, "tessera gen-model: --seed: '%s' is not a number\n", v.c_str());
        return 2;
      }
    } else if (a == "--type") {
      if (v == "f32")
        o.type = GgmlType::kF32;
      else if (v == "f16")
        o.type = GgmlType::kF16;
      else if (v == "bf16")
        o.type = GgmlType::kBF16;
      else {
        std::fprintf(stderr, "tessera gen-model: --type: '%s' is not one of f32, f16, bf16\n",
                     v.c_str());
        return 2;
      }
    } else if (auto it = ints.find(a); it != ints.end()) {
      if (!absl::SimpleAtoi(v, it->second) || *it->second < 0) {
        std::fprintf(stderr, "tessera gen-model: %s: '%s' is not a non-negative number\n",
                     a.c_str(), v.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "tessera gen-model: unknown option '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (o.out.empty()) {
    std::fprintf(stderr, "tessera gen-model: --out PATH is required\n\n%s", kUsage);
    return 2;
  }
  if (o.layers < 1 || o.heads < 1 || o.kv_heads < 1 || o.embd % o.heads != 0 ||
      o.heads % o.kv_heads != 0 || o.embd < 1 || o.ff < 1) {
    std::fprintf(stderr,
                 "tessera gen-model: need layers, heads, kv-heads, ff >= 1, embd a "
                 "multiple of heads and heads a multiple of kv-heads\n");
    return 2;
  }
  absl::Status s = Generate(o);
  if (!s.ok()) {
    std::fprintf(stderr, "tessera gen-model: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace tessera::cli
