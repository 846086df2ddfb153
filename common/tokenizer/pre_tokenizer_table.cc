// The pre-tokenizer table: `tokenizer.ggml.pre` ids, their regex lists and defaults.
#include <string_view>
#include <vector>

#include "common/tokenizer/pre_tokenizer.h"

namespace tessera::tokenizer {
namespace {

// Regex lists from llama.cpp's llm_tokenizer_bpe (spec section 14.3). Where llama.cpp had to
// rewrite HF's regex for std::regex (case-insensitive groups, \p{Lu}), PCRE2 runs the
// original. Non-ASCII whitespace: llama.cpp's engines see every such code point as U+000B,
// so explicit code point ranges never match it; the deepseek ranges below leave out U+1680,
// U+2000-U+200A, U+2028, U+2029, U+202F, U+205F and U+3000 to agree with that.

constexpr const char* kDefault[] = {
    R"([\p{P}\$\+<=>\^~\|]+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
    R"(\p{N}+)",
    R"([0-9][0-9][0-9])",
};

constexpr const char* kGpt2[] = {
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
};

constexpr const char* kLlama3[] = {
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

constexpr const char* kQwen2[] = {
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+)"
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

constexpr const char* kQwen35[] = {
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+)"
    R"(|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

constexpr const char* kDeepseekV3[] = {
    R"(\p{N}{1,3})",
    R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
    // One regex written on two lines.
    (R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)"
     R"(| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
};

// CJK ideographs, U+0800-U+4E00 without whitespace, Hangul.
constexpr char kDeepseekCjk[] =
    R"([\x{4E00}-\x{9FA5}\x{0800}-\x{167F}\x{1681}-\x{1FFF}\x{200B}-\x{2027})"
    R"(\x{202A}-\x{202E}\x{2030}-\x{205E}\x{2060}-\x{2FFF}\x{3001}-\x{4E00})"
    R"(\x{AC00}-\x{D7FF}]+)";

constexpr const char* kDeepseekLlm[] = {
    R"([\r\n])",
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF})"
    R"(\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D})"
    R"(\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5})"
    R"(\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5})"
    R"(\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15})"
    R"(\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59})"
    R"(\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE})"
    R"(\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB})"
    R"(\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128})"
    R"(\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149})"
    R"(\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE})"
    R"(\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06})"
    R"(\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})"
    R"(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)",
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3001}-\x{3002}]+)",
    R"(\s+$)",
    kDeepseekCjk,
    R"(\p{N}+)",
};

constexpr const char* kDeepseekCoder[] = {
    R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})",
};

constexpr const char* kFalcon[] = {
    R"([\p{P}\$\+<=>\^~\|`]+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
    R"([0-9][0-9][0-9])",
};

constexpr const char* kStarcoder[] = {
    R"(\p{N})",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
};

// GPT-4o / o200k (HF's regex as published; PCRE2 handles \p{Lu} and (?i:) natively).
constexpr const char* kGpt4o[] = {
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

// Mistral's tekken (HF's regex as published).
constexpr const char* kTekken[] = {
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

constexpr const char* kBloom[] = {
    R"( ?[^(\s|.,!?…。，、।۔،)]+)",
};

constexpr const char* kViking[] = {
    R"( ?[^(\s|.,!?…。，、।۔،)]+)",
    R"(\p{N})",
};

struct NamedSpec {
  std::vector<std::string_view> ids;  // the first is the canonical name
  PreTokenizerSpec spec;
};

// llama.cpp's llama_vocab::impl::load: `tokenizer.ggml.pre` -> regexes and defaults.
const std::vector<NamedSpec>& Table() {
  static const auto* table = new std::vector<NamedSpec>{
      {{"default"}, {"default", kDefault}},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es",
        "jina-v2-de", "jina-v2-code", "roberta-bpe", "a.x-4.0", "mellum", "mpt", "olmo", "jais",
        "trillion"},
       {"gpt-2", kGpt2}},
      {{"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {"llama-bpe", kLlama3, /*ignore_merges=*/true, /*add_bos=*/true}},
      {{"glm4", "chatglm-bpe", "dbrx", "smaug-bpe"}, {"glm4", kLlama3}},
      {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan"},
       {"qwen2", kQwen2, false, false, /*clean_spaces=*/false}},
      {{"qwen35"}, {"qwen35", kQwen35, false, false, false}},
      {{"deepseek-v3"}, {"deepseek-v3", kDeepseekV3, false, false, false}},
      {{"deepseek-llm"}, {"deepseek-llm", kDeepseekLlm, false, false, false}},
      {{"deepseek-coder"}, {"deepseek-coder", kDeepseekCoder, false, false, false}},
      {{"falcon"}, {"falcon", kFalcon}},
      {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b"}, {"starcoder", kStarcoder}},
      {{"command-r", "smollm"}, {"command-r", kStarcoder, false, false, false}},
      {{"gpt-4o", "llama4"}, {"gpt-4o", kGpt4o, false, false, false}},
      {{"tekken"}, {"tekken", kTekken, true, true, false}},
      {{"bloom", "gpt3-finnish"}, {"bloom", kBloom}},
      {{"poro-chat"}, {"poro-chat", kBloom, false, false, false}},
      {{"viking"}, {"viking", kViking, false, false, false}},
  };
  return *table;
}

}  // namespace

const PreTokenizerSpec* FindPreTokenizerSpec(std::string_view pre) {
  for (const NamedSpec& entry : Table()) {
    for (std::string_view id : entry.ids) {
      if (id == pre) return &entry.spec;
    }
  }
  return nullptr;
}

std::vector<std::string_view> KnownPreTokenizers() {
  std::vector<std::string_view> ids;
  for (const NamedSpec& entry : Table()) ids.insert(ids.end(), entry.ids.begin(), entry.ids.end());
  return ids;
}

}  // namespace tessera::tokenizer
