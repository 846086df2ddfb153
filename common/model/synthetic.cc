#include "common/model/synthetic.h"

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/arch.h"
#include "common/quant/quantize.h"
#include "common/util/half.h"
#include "common/util/strings.h"
#include "common/util/utf8.h"

namespace tessera::model {
namespace {

using gguf::GgmlType;
using gguf::Value;

// ---- vocabulary --------------------------------------------------------------------------

// A few paragraphs to learn merges from; any English text works.
constexpr char kCorpus[] =
    "Tessera serves language models. The quick brown fox jumps over the lazy dog. "
    "Once upon a time there was a little model that wanted to talk. It read the books of the "
    "world and learned the words, one token at a time. The operators who ran it were happy, "
    "because it loaded in seconds and answered every question with care. Hello world! "
    "What is the capital of France? The capital of France is Paris. How are you today? "
    "I am fine, thank you. The weather is nice and the sun is warm. She said that they "
    "would come to the house in the evening, and then they went to the market together. "
    "def main(): return 0  # code, too. for i in range(10): print(i)\n";

// GPT-2's byte -> code point map (spec 14.2), as UTF-8 strings.
std::vector<std::string> ByteLevelChars() {
  std::vector<std::string> out(256);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    AppendUtf8CodePoint(static_cast<uint32_t>(printable ? b : next++), &out[b]);
  }
  return out;
}

// Learns up to `n` BPE merges over the corpus split into words (a leading space stays with
// the word, as GPT-2-style pre-tokenizers do).
std::vector<std::pair<std::string, std::string>> LearnMerges(int n) {
  std::vector<std::string> chars = ByteLevelChars();
  std::map<std::vector<std::string>, int> words;
  std::string text = kCorpus;
  for (size_t i = 0; i < text.size();) {
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
    auto best = counts.begin();
    for (auto it = counts.begin(); it != counts.end(); ++it) {
      if (it->second > best->second) best = it;
    }
    if (best == counts.end() || best->second < 2) break;
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

struct Family {
  const char* pre;
  std::vector<const char*> specials;  // CONTROL tokens, appended after the merges
  int bos, eos, eot;                  // indexes into `specials` (-1: none)
  bool add_bos;
  const char* chat_template;
};

const Family& FamilyOf(const std::string& arch) {
  static const Family kLlama{
      "llama-bpe",
      {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
       "<|eot_id|>"},
      0,
      4,
      4,
      true,
      "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
      "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
      "{% endif %}"};
  static const Family kQwen{
      "qwen2",
      {"<|endoftext|>", "<|im_start|>", "<|im_end|>"},
      -1,
      2,
      2,
      false,
      "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + "
      "message['content'] + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|im_start|>assistant\n' }}{% endif %}"};
  static const Family kDeepseek{
      "deepseek-v3",
      {"<\xef\xbd\x9c"
       "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
       "<\xef\xbd\x9c"
       "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
       "<\xef\xbd\x9cUser\xef\xbd\x9c>",
       "<\xef\xbd\x9c"
       "Assistant\xef\xbd\x9c>"},
      0,
      1,
      1,
      true,
      "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
      "{{ '<\xef\xbd\x9cUser\xef\xbd\x9c>' + message['content'] }}{% elif message['role'] == "
      "'assistant' %}{{ '<\xef\xbd\x9c"
      "Assistant\xef\xbd\x9c>' + message['content'] + eos_token }}"
      "{% else %}{{ message['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<\xef\xbd\x9c"
      "Assistant\xef\xbd\x9c>' }}{% endif %}"};
  static const Family kGlm{
      "glm4",
      {"<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>",
       "<|observation|>"},
      1,
      0,
      4,
      false,
      "[gMASK]<sop>{% for message in messages %}{{ '<|' + message['role'] + '|>\n' + "
      "message['content'] }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}"
      "{% endif %}"};
  if (arch == "llama") return kLlama;
  if (absl::StartsWith(arch, "qwen")) return kQwen;
  if (arch == "deepseek2") return kDeepseek;
  return kGlm;
}

// Writes the tokenizer keys; returns the vocabulary size.
uint32_t AddVocabulary(const std::string& arch, uint32_t pad_to, gguf::Metadata& md) {
  const Family& f = FamilyOf(arch);
  std::vector<std::string> tokens = ByteLevelChars();
  std::vector<int32_t> types(256, 1);  // NORMAL
  std::vector<std::string> merges;
  for (const auto& [a, b] : LearnMerges(200)) {
    merges.push_back(a + " " + b);
    tokens.push_back(a + b);
    types.push_back(1);
  }
  uint32_t first_special = static_cast<uint32_t>(tokens.size());
  for (const char* s : f.specials) {
    tokens.push_back(s);
    types.push_back(3);  // CONTROL
  }
  for (uint32_t i = static_cast<uint32_t>(tokens.size()); i < pad_to; ++i) {
    tokens.push_back(absl::StrCat("[PAD", i, "]"));
    types.push_back(5);  // UNUSED
  }
  md.Set("tokenizer.ggml.model", Value::String("gpt2"));
  md.Set("tokenizer.ggml.pre", Value::String(f.pre));
  md.Set("tokenizer.ggml.tokens", Value::StringArray(tokens));
  md.Set("tokenizer.ggml.token_type", Value::I32Array(types));
  md.Set("tokenizer.ggml.merges", Value::StringArray(merges));
  if (f.bos >= 0) md.Set("tokenizer.ggml.bos_token_id", Value::U32(first_special + f.bos));
  md.Set("tokenizer.ggml.eos_token_id", Value::U32(first_special + f.eos));
  md.Set("tokenizer.ggml.eot_token_id", Value::U32(first_special + f.eot));
  md.Set("tokenizer.ggml.add_bos_token", Value::Bool(f.add_bos));
  md.Set("tokenizer.chat_template", Value::String(f.chat_template));
  return static_cast<uint32_t>(tokens.size());
}

// ---- presets -----------------------------------------------------------------------------

bool IsMoeArch(const std::string& a) {
  return a == "qwen3moe" || a == "deepseek2" || a == "glm4moe" || a == "glm-dsa";
}
bool IsMlaArch(const std::string& a) { return a == "deepseek2" || a == "glm-dsa"; }

void SetPerLayer(HyperParams& hp, uint32_t ff, uint32_t heads, uint32_t kv_heads) {
  hp.n_ff.assign(hp.n_layer_all, ff);
  hp.n_head.assign(hp.n_layer_all, heads);
  hp.n_head_kv.assign(hp.n_layer_all, kv_heads);
}

// ---- tensor types ------------------------------------------------------------------------

// llama.cpp's use_more_bits (the Q4_K_M recipe's "more bits" layers, spec 13.2).
bool MoreBits(uint32_t layer, uint32_t n) {
  return layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2;
}

// The 32-block fallback llama-quantize uses when a row is not a multiple of 256 (spec 13.3).
GgmlType Fallback(GgmlType t) {
  switch (t) {
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
      return GgmlType::kQ4_0;
    case GgmlType::kQ4_K:
      return GgmlType::kQ5_0;
    case GgmlType::kQ5_K:
      return GgmlType::kQ5_1;
    case GgmlType::kQ6_K:
      return GgmlType::kQ8_0;
    case GgmlType::kIQ4_XS:
      return GgmlType::kIQ4_NL;
    default:
      return GgmlType::kF16;
  }
}

struct Mix {
  GgmlType base;
  bool q4_k_m = false;
  bool ud = false;  // UD-Q4_K_XL-like: router and indexer.proj quantized, k_b/v_b Q8_0
};

absl::StatusOr<Mix> ParseQuant(const std::string& q) {
  if (q == "Q4_K_M") return Mix{GgmlType::kQ4_K, true, false};
  if (q == "UD-Q4_K_XL") return Mix{GgmlType::kQ4_K, true, true};
  auto t = gguf::GgmlTypeFromName(q);
  if (!t || (*t != GgmlType::kF32 && *t != GgmlType::kF16 && *t != GgmlType::kBF16 &&
             !quant::CanQuantize(*t))) {
    return absl::InvalidArgumentError(
        absl::StrCat("quant '", q, "' is not one of ", absl::StrJoin(SyntheticQuants(), ", ")));
  }
  return Mix{*t};
}

GgmlType ChooseType(const std::string& name, const Dims& dims, const Mix& mix, uint32_t layer,
                    uint32_t n_layer) {
  // Spec 13.1/13.2: 1-D tensors, norms and non-weights stay F32; the router and the
  // indexer's proj are F32 as the converter writes them (UD files quantize them anyway).
  if (dims.size() == 1 || absl::EndsWith(name, "_norm.weight") ||
      !absl::EndsWith(name, ".weight")) {
    return GgmlType::kF32;
  }
  bool router = absl::StrContains(name, "ffn_gate_inp") || absl::StrContains(name, "indexer.proj");
  if (router && !mix.ud) return GgmlType::kF32;
  GgmlType t = mix.base;
  if (mix.q4_k_m) {
    if (name == "output.weight") t = GgmlType::kQ6_K;
    bool more = absl::StrContains(name, "attn_v.") || absl::StrContains(name, "ffn_down");
    if (more && MoreBits(layer, n_layer)) t = GgmlType::kQ6_K;
  }
  if (mix.ud && (absl::StrContains(name, "attn_k_b") || absl::StrContains(name, "attn_v_b"))) {
    t = GgmlType::kQ8_0;
  }
  const gguf::GgmlTypeInfo* info = gguf::LookupGgmlType(t);
  if (dims[0] % info->block_elems != 0) {
    t = Fallback(t);
    if (dims[0] % gguf::LookupGgmlType(t)->block_elems != 0) t = GgmlType::kF16;
  }
  return t;
}

// ---- weights -----------------------------------------------------------------------------

absl::StatusOr<std::vector<uint8_t>> Encode(const std::vector<float>& v, GgmlType type) {
  std::vector<uint8_t> out;
  if (type == GgmlType::kF32) {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  if (type == GgmlType::kF16 || type == GgmlType::kBF16) {
    out.resize(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t h = type == GgmlType::kF16 ? FloatToFp16(v[i]) : FloatToBf16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
    return out;
  }
  auto bytes = gguf::GgmlTypeBytes(*gguf::LookupGgmlType(type), v.size());
  out.resize(*bytes);
  absl::Status s = quant::QuantizeFromFloat(type, v, absl::MakeSpan(out));
  if (!s.ok()) return s;
  return out;
}

// Values for a tensor: norms near 1, biases and routing biases small, matrices scaled by
// 1/sqrt(fan_in) (the LM head by 3/sqrt(d), so logits spread with a std of about 3).
std::vector<float> RandomValues(const std::string& name, const Dims& dims, std::mt19937_64& rng) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  float scale = 1.0f, offset = 0.0f;
  if (absl::EndsWith(name, "norm.weight") || absl::StrContains(name, "nextn.enorm") ||
      absl::StrContains(name, "nextn.hnorm")) {
    scale = 0.1f;
    offset = 1.0f;
  } else if (absl::EndsWith(name, ".bias")) {
    scale = 0.05f;
  } else if (name == "token_embd.weight") {
    scale = 1.0f;
  } else if (name == "output.weight") {
    scale = 3.0f / std::sqrt(static_cast<float>(dims[0]));
  } else {
    scale = 1.0f / std::sqrt(static_cast<float>(dims[0]));
  }
  for (float& x : v) x = offset + scale * normal(rng);
  return v;
}

// Optional tensors a real checkpoint of each family carries.
bool IncludeOptional(const std::string& arch, const std::string& suffix) {
  if (suffix == "output.weight") return true;
  if (suffix == "exp_probs_b.bias") return arch == "deepseek2" || arch == "glm-dsa";
  if (absl::StartsWith(suffix, "attn_q.bias") || absl::StartsWith(suffix, "attn_k.bias") ||
      absl::StartsWith(suffix, "attn_v.bias")) {
    return arch == "qwen2" || arch == "glm4moe";
  }
  if (suffix == "attn_q_norm.weight" || suffix == "attn_k_norm.weight") return arch == "glm4moe";
  if (absl::StartsWith(suffix, "indexer.")) return true;
  return false;
}

uint32_t FileType(const std::string& quant) {
  static const std::map<std::string, uint32_t> kFtypes = {
      {"F32", 0},     {"F16", 1},   {"Q4_0", 2},  {"Q4_1", 3},  {"Q8_0", 7},
      {"Q5_0", 8},    {"Q5_1", 9},  {"Q2_K", 10}, {"Q3_K", 12}, {"Q4_K", 14},
      {"Q4_K_M", 15}, {"Q5_K", 16}, {"Q6_K", 18}, {"BF16", 32}, {"UD-Q4_K_XL", 15}};
  auto it = kFtypes.find(quant);
  return it == kFtypes.end() ? 0 : it->second;
}

// Writes `{arch}.*` keys from the table: every required or optional key, and quiet keys
// whose value differs from the default.
void WriteKeys(const ArchSpec& arch, const HyperParams& hp, gguf::Metadata& md) {
  for (const KeySpec& k : arch.keys) {
    std::string key = absl::StrCat(arch.name, ".", k.suffix);
    std::visit(
        [&](auto member) {
          const auto& v = hp.*member;
          using T = std::remove_cvref_t<decltype(v)>;
          bool quiet = k.need == KeyNeed::kQuiet;
          if constexpr (std::is_same_v<T, uint32_t>) {
            if (!quiet || v != 0) md.Set(key, Value::U32(v));
          } else if constexpr (std::is_same_v<T, float>) {
            if (!quiet || v != static_cast<float>(k.default_value)) md.Set(key, Value::F32(v));
          } else if constexpr (std::is_same_v<T, bool>) {
            if (!quiet || v) md.Set(key, Value::Bool(v));
          } else if constexpr (std::is_same_v<T, std::string>) {
            if (!v.empty() && v != "none") md.Set(key, Value::String(v));
          } else {
            if (!v.empty() && (!quiet || v[0] != 0)) md.Set(key, Value::U32(v[0]));
          }
        },
        k.field);
  }
}

}  // namespace

std::vector<std::string> SyntheticPresets() {
  return {"tiny",
          "small",
          "uneven",
          "ep-1408",
          "124m",
          "moe-1g",
          "glm5-shape",
          "deepseek-v3-shape",
          "qwen3-235b-shape",
          "qwen3-30b-shape",
          "glm45-air-shape"};
}

std::vector<std::string> SyntheticQuants() {
  return {"F32",  "F16",  "BF16", "Q8_0", "Q4_0", "Q4_1",   "Q5_0",      "Q5_1",
          "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M", "UD-Q4_K_XL"};
}

absl::StatusOr<HyperParams> SyntheticHyperParams(const SyntheticOptions& o) {
  const ArchSpec* arch = FindArch(o.arch);
  if (arch == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown architecture '", o.arch,
                     "'; supported: ", absl::StrJoin(SupportedArchNames(), ", ")));
  }
  HyperParams hp;
  hp.arch = o.arch;
  const bool moe = IsMoeArch(o.arch), mla = IsMlaArch(o.arch);
  uint32_t d, layers, heads, kv_heads, head_dim, ff;
  if (o.preset == "tiny" || o.preset == "small") {
    bool small = o.preset == "small";
    d = small ? 512 : 256;
    layers = small ? 4 : 2;
    heads = small ? 8 : 4;
    kv_heads = small ? 4 : 2;
    head_dim = 64;
    ff = 2 * d;
    hp.n_ctx_train = 4096;
    hp.rope_freq_base =
        o.arch == "llama" ? 500000.0f : (absl::StartsWith(o.arch, "qwen") ? 1e6f : 10000.0f);
    hp.rms_eps = mla ? 1e-6f : 1e-5f;
    if (moe) {
      hp.n_expert = small ? 8 : 4;
      hp.n_expert_used = 2;
      hp.n_ff_exp = 256;
      hp.n_expert_shared = o.arch == "qwen3moe" ? 0 : 1;
      hp.n_leading_dense = o.arch == "qwen3moe" ? 0 : 1;
      hp.expert_weights_scale = o.arch == "qwen3moe" ? 0.0f : 2.5f;
      hp.expert_weights_norm = true;
      hp.gating_func = o.arch == "qwen3moe" ? 0 : 2;
      if (o.arch == "deepseek2" && small) {
        hp.n_expert_groups = 4;
        hp.n_group_used = 2;
      }
    }
    if (mla) {
      hp.q_lora_rank = d;
      hp.kv_lora_rank = 256;
      hp.n_rot = 32;
      hp.key_length_mla = 96;  // qk_nope 64 + rope 32
      hp.value_length_mla = 64;
    }
    if (o.arch == "deepseek2") {  // YaRN as DeepSeek V3 writes it (spec 10.1)
      hp.rope_scaling_type = "yarn";
      hp.rope_scaling_factor = 4.0f;
      hp.rope_orig_ctx = 1024;
      hp.yarn_log_multiplier = 0.1f;
    }
    if (o.arch == "glm-dsa") {
      hp.indexer_heads = 4;
      hp.indexer_head_dim = 64;
      hp.indexer_top_k = 16;
    }
    if (o.arch == "glm-dsa" || o.arch == "glm4moe") hp.n_nextn = 1;
  } else if (o.preset == "uneven" || o.preset == "ep-1408") {
    // Shapes that tensor parallelism cannot divide evenly (every architecture): 8 heads of 32
    // (attn_output's 256 columns are one K-quant block) over 2 KV heads (fewer than 3 or 4
    // ranks, whose query heads then cut a group), a dense FFN of 768 (three K-quant blocks);
    // MoE: 6 experts of 192 columns (less than one K-quant block: expert parallelism), or
    // with ep-1408 of 1,408 columns (GLM-4.5-Air's: 5.5 K-quant blocks).
    if (o.preset == "ep-1408" && !moe) {
      return absl::InvalidArgumentError("preset ep-1408 is for MoE architectures");
    }
    d = 256;
    layers = 3;
    heads = 8;
    kv_heads = 2;
    head_dim = 32;
    ff = 768;
    hp.n_ctx_train = 4096;
    hp.rope_freq_base = 10000.0f;
    hp.rms_eps = mla ? 1e-6f : 1e-5f;
    if (moe) {
      hp.n_expert = 6;
      hp.n_expert_used = 2;
      hp.n_ff_exp = o.preset == "ep-1408" ? 1408 : 192;
      hp.n_expert_shared = o.arch == "qwen3moe" ? 0 : 1;
      hp.n_leading_dense = o.arch == "qwen3moe" ? 0 : 1;
      hp.expert_weights_scale = o.arch == "qwen3moe" ? 0.0f : 2.5f;
      hp.expert_weights_norm = true;
      hp.gating_func = o.arch == "qwen3moe" ? 0 : 2;
    }
    if (mla) {
      hp.q_lora_rank = d;
      hp.kv_lora_rank = 256;
      hp.n_rot = 32;
      hp.key_length_mla = 96;
      hp.value_length_mla = 64;
    }
    if (o.arch == "glm-dsa") {
      hp.indexer_heads = 4;
      hp.indexer_head_dim = 64;
      hp.indexer_top_k = 16;
    }
  } else if (o.preset == "124m") {
    // A llama-shaped ~124M-parameter model for benchmarks: hidden 768, 12 layers, 12 heads /
    // 4 KV heads, FFN 2048, vocabulary 32000.
    if (o.arch != "llama") return absl::InvalidArgumentError("preset 124m is for --arch llama");
    d = 768;
    layers = 12;
    heads = 12;
    kv_heads = 4;
    head_dim = 64;
    ff = 2048;
    hp.n_ctx_train = 4096;
    hp.rope_freq_base = 500000.0f;
    hp.rms_eps = 1e-5f;
    hp.n_vocab = 32000;
  } else if (o.preset == "moe-1g" || o.preset == "moe-1g-ep") {
    // A deepseek2-shaped model of about 1 GB at Q8_0 for benchmarks: 64 experts, top-8,
    // 8 blocks (1 dense), MLA with q LoRA, vocabulary 32000. moe-1g-ep: experts of 480
    // columns (15 blocks of 32, under one 256-block pair: no even split over 2 or 4 ranks,
    // so tensor parallelism deals the experts out whole).
    if (o.arch != "deepseek2") {
      return absl::InvalidArgumentError(
          absl::StrCat("preset ", o.preset, " is for --arch deepseek2"));
    }
    d = 1024;
    layers = 8;
    heads = 8;
    kv_heads = 1;
    head_dim = 0;
    ff = 2816;
    hp.n_ctx_train = 4096;
    hp.rms_eps = 1e-6f;
    hp.n_expert = 64;
    hp.n_expert_used = 8;
    hp.n_ff_exp = o.preset == "moe-1g-ep" ? 480 : 512;
    hp.n_expert_shared = 1;
    hp.n_leading_dense = 1;
    hp.n_expert_groups = 8;
    hp.n_group_used = 4;
    hp.expert_weights_scale = 2.5f;
    hp.expert_weights_norm = true;
    hp.gating_func = 2;
    hp.q_lora_rank = 512;
    hp.kv_lora_rank = 256;
    hp.n_rot = 32;
    hp.key_length_mla = 96;
    hp.value_length_mla = 64;
    hp.n_vocab = 32000;
  } else if (o.preset == "deepseek-v3-shape") {
    // DeepSeek-V3 / R1 (HF config.json): MLA with q LoRA, 256 experts top-8 in 8 groups.
    if (o.arch != "deepseek2") {
      return absl::InvalidArgumentError("preset deepseek-v3-shape is for --arch deepseek2");
    }
    d = 7168;
    layers = 61;
    heads = 128;
    kv_heads = 1;
    head_dim = 0;
    ff = 18432;
    hp.n_ctx_train = 163840;
    hp.rms_eps = 1e-6f;
    hp.n_expert = 256;
    hp.n_expert_used = 8;
    hp.n_ff_exp = 2048;
    hp.n_expert_shared = 1;
    hp.n_leading_dense = 3;
    hp.n_expert_groups = 8;
    hp.n_group_used = 4;
    hp.expert_weights_scale = 2.5f;
    hp.expert_weights_norm = true;
    hp.gating_func = 2;
    hp.q_lora_rank = 1536;
    hp.kv_lora_rank = 512;
    hp.n_rot = 64;
    hp.key_length_mla = 192;
    hp.value_length_mla = 128;
    hp.rope_scaling_type = "yarn";
    hp.rope_scaling_factor = 40.0f;
    hp.rope_orig_ctx = 4096;
    hp.yarn_log_multiplier = 0.1f;
    hp.n_vocab = 129280;
    hp.n_nextn = 1;
  } else if (o.preset == "qwen3-235b-shape" || o.preset == "qwen3-30b-shape") {
    // Qwen3-235B-A22B and Qwen3-30B-A3B (HF config.json): 128 experts top-8 of 1,536 and
    // 768 columns, 4 KV heads of 128.
    if (o.arch != "qwen3moe") {
      return absl::InvalidArgumentError(
          absl::StrCat("preset ", o.preset, " is for --arch qwen3moe"));
    }
    const bool big = o.preset == "qwen3-235b-shape";
    d = big ? 4096 : 2048;
    layers = big ? 94 : 48;
    heads = big ? 64 : 32;
    kv_heads = 4;
    head_dim = 128;
    ff = big ? 12288 : 6144;
    hp.n_ctx_train = 40960;
    hp.rope_freq_base = 1e6f;
    hp.rms_eps = 1e-6f;
    hp.n_expert = 128;
    hp.n_expert_used = 8;
    hp.n_ff_exp = big ? 1536 : 768;
    hp.expert_weights_norm = true;
    hp.n_vocab = 151936;
  } else if (o.preset == "glm45-air-shape") {
    // GLM-4.5-Air (HF config.json): 128 experts top-8 of 1,408 columns plus a shared one,
    // one leading dense block, 96 heads over 8 KV heads, partial rotary, an MTP block.
    if (o.arch != "glm4moe") {
      return absl::InvalidArgumentError("preset glm45-air-shape is for --arch glm4moe");
    }
    d = 4096;
    layers = 46;
    heads = 96;
    kv_heads = 8;
    head_dim = 128;
    ff = 10944;
    hp.n_ctx_train = 131072;
    hp.rope_freq_base = 1e6f;
    hp.rms_eps = 1e-5f;
    hp.n_expert = 128;
    hp.n_expert_used = 8;
    hp.n_ff_exp = 1408;
    hp.n_expert_shared = 1;
    hp.n_leading_dense = 1;
    hp.expert_weights_scale = 1.0f;
    hp.expert_weights_norm = true;
    hp.gating_func = 2;
    hp.n_vocab = 151552;
    hp.n_nextn = 1;
  } else if (o.preset == "glm5-shape") {
    if (o.arch != "glm-dsa") {
      return absl::InvalidArgumentError("preset glm5-shape is GLM-5's shape: use --arch glm-dsa");
    }
    hp.n_vocab = 154880;
    // ../shared/spec/glm5-scenario.md
    d = 6144;
    layers = 78;
    heads = 64;
    kv_heads = 1;
    head_dim = 0;
    ff = 12288;
    hp.n_ctx_train = 202752;
    hp.rms_eps = 1e-5f;
    hp.n_expert = 256;
    hp.n_expert_used = 8;
    hp.n_ff_exp = 2048;
    hp.n_expert_shared = 1;
    hp.n_leading_dense = 3;
    hp.n_expert_groups = 1;
    hp.n_group_used = 1;
    hp.expert_weights_scale = 2.5f;
    hp.expert_weights_norm = true;
    hp.gating_func = 2;
    hp.q_lora_rank = 2048;
    hp.kv_lora_rank = 512;
    hp.n_rot = 64;
    hp.key_length_mla = 256;  // qk_nope 192 + rope 64
    hp.value_length_mla = 256;
    hp.indexer_heads = 32;
    hp.indexer_head_dim = 128;
    hp.indexer_top_k = 2048;
    hp.n_nextn = 1;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("preset '", o.preset, "' is not one of ",
                                                   absl::StrJoin(SyntheticPresets(), ", ")));
  }
  if (o.layers > 0) layers = static_cast<uint32_t>(o.layers);
  if (o.nextn >= 0) hp.n_nextn = static_cast<uint32_t>(o.nextn);
  if (moe && hp.n_leading_dense >= layers) hp.n_leading_dense = layers > 1 ? 1 : 0;
  hp.n_embd = d;
  hp.n_layer = layers;
  hp.n_layer_all = layers + hp.n_nextn;
  if (mla) {
    // The converter's MQA view of MLA (spec 10.1): one KV head of c + r, value c.
    SetPerLayer(hp, ff, heads, 1);
    hp.head_dim_k = hp.kv_lora_rank + hp.n_rot;
    hp.head_dim_v = hp.kv_lora_rank;
    hp.mla_split_kv_b = true;
  } else {
    SetPerLayer(hp, ff, heads, kv_heads);
    hp.head_dim_k = hp.head_dim_v = head_dim;
    // glm4moe: partial rotary (half the head), spec 11.1.
    hp.n_rot = o.arch == "glm4moe" ? head_dim / 2 : head_dim;
  }
  hp.rope_type = arch->rope_type;
  if (hp.rope_orig_ctx == 0 && hp.rope_scaling_type != "none") hp.rope_orig_ctx = hp.n_ctx_train;
  for (uint32_t l = 0; l < hp.n_layer; ++l) hp.indexer_full.push_back(hp.indexer_heads > 0);
  return hp;
}

absl::StatusOr<gguf::GgufWriter> BuildSyntheticModel(const SyntheticOptions& o) {
  auto hp_or = SyntheticHyperParams(o);
  if (!hp_or.ok()) return hp_or.status();
  HyperParams hp = *hp_or;
  // The real models' shapes: headers only (data as holes), in their usual quant mixes.
  const bool sparse = absl::EndsWith(o.preset, "-shape");
  auto mix = ParseQuant(!sparse || o.quant != "F32" ? o.quant
                        : o.preset == "glm5-shape"  ? "UD-Q4_K_XL"
                                                    : "Q4_K_M");
  if (!mix.ok()) return mix.status();
  const ArchSpec& arch = *FindArch(o.arch);

  gguf::GgufWriter w;
  gguf::Metadata& md = w.metadata();
  md.Set("general.architecture", Value::String(o.arch));
  md.Set("general.type", Value::String("model"));
  md.Set("general.name", Value::String(absl::StrCat("tessera-synthetic-", o.arch, "-", o.preset)));
  hp.n_vocab = AddVocabulary(o.arch, hp.n_vocab, md);
  WriteKeys(arch, hp, md);
  md.Set(absl::StrCat(o.arch, ".vocab_size"), Value::U32(hp.n_vocab));
  md.Set("general.file_type", Value::U32(FileType(o.quant)));
  md.Set("general.quantization_version", Value::U32(2));

  std::mt19937_64 rng(o.seed);
  auto add = [&](const std::string& name, const Dims& dims, uint32_t layer) -> absl::Status {
    // Type rules look at the name without the block prefix.
    std::string local = name;
    if (absl::StartsWith(name, "blk.")) local = name.substr(name.find('.', 4) + 1);
    GgmlType type = ChooseType(local, dims, *mix, layer, hp.n_layer);
    if (sparse) return w.AddZeroTensor(name, dims, type);
    auto bytes = Encode(RandomValues(local, dims, rng), type);
    if (!bytes.ok()) return bytes.status();
    return w.AddTensor(name, dims, type, *bytes);
  };
  HasTensorFn none = [](const std::string&) { return false; };
  auto wanted = [&](const TensorSpec& spec, uint32_t l, bool moe_block) {
    if (spec.scope == Scope::kDenseBlock && moe_block) return false;
    if (spec.scope == Scope::kMoeBlock && !moe_block) return false;
    Need need = spec.need(hp, l, none);
    if (need == Need::kRequired) return true;
    return need == Need::kOptional && IncludeOptional(o.arch, spec.name);
  };

  auto* embd = &arch.tensors[0];
  absl::Status s = add(embd->name, embd->shape(hp, 0), 0);
  for (uint32_t l = 0; s.ok() && l < hp.n_layer_all; ++l) {
    // MTP blocks are complete MoE (or dense) blocks plus the nextn tensors (spec 12.6).
    bool mtp = l >= hp.n_layer;
    bool moe_block = hp.is_moe() && (mtp || hp.is_moe_block(l));
    for (const TensorSpec& spec : arch.tensors) {
      if (spec.scope == Scope::kGlobal || !wanted(spec, mtp ? 0 : l, moe_block)) continue;
      s = add(TensorName(spec, l), spec.shape(hp, mtp ? 0 : l), l);
      if (!s.ok()) break;
    }
    if (mtp && s.ok()) {
      const int64_t d = hp.n_embd;
      std::string b = absl::StrCat("blk.", l, ".nextn.");
      for (auto [n, dims] :
           std::vector<std::pair<std::string, Dims>>{{"eh_proj.weight", {2 * d, d}},
                                                     {"enorm.weight", {d}},
                                                     {"hnorm.weight", {d}},
                                                     {"shared_head_norm.weight", {d}}}) {
        if (s.ok()) s = add(b + n, dims, l);
      }
    }
  }
  for (const TensorSpec& spec : arch.tensors) {
    if (!s.ok()) break;
    if (spec.scope != Scope::kGlobal || &spec == embd || !wanted(spec, 0, false)) continue;
    s = add(spec.name, spec.shape(hp, 0), 0);
  }
  if (!s.ok()) return s;
  return w;
}

}  // namespace tessera::model
