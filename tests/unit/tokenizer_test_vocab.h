// Small hand-made vocabularies for the tokenizer tests, written the way converters write
// them (GGUF metadata through GgufWriter), with ids chosen so expectations can be derived by
// hand.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/gguf/value.h"
#include "common/gguf/writer.h"

namespace tessera::tokenizer::testing {

// GPT-2's byte alphabet as the spec (section 14.2) defines it, written out independently of
// common/tokenizer/byte_level.cc: printable Latin-1 keeps its code point, the other 68
// bytes take U+0100.. in byte order.
inline std::vector<std::string> GptAlphabet() {
  std::vector<std::string> chars(256);
  uint32_t next = 0x100;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const uint32_t cp = keep ? b : next++;
    std::string& s = chars[b];
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return chars;
}

// Byte-level BPE: ids 0..255 are the bytes (id == byte value), then these merges in rank
// order: "h e"(256 "he"), "Ġ t"(257), "Ġt he"(258 "Ġthe"), "l l"(259), "he ll"(260 "hell"),
// "l o"(261), then CONTROL "<|endoftext|>"(262) and "<|im_end|>"(263), and "hello"(264), a
// token no merge path reaches (only ignore_merges pre-tokenizers emit it).
// `extra` tokens (text, type) are appended from id 265 on.
inline gguf::GgufWriter TinyBpe(const std::string& pre = "gpt-2",
                                const std::vector<std::pair<std::string, int32_t>>& extra = {}) {
  std::vector<std::string> tokens = GptAlphabet();
  for (const char* t : {"he", "\xC4\xA0t", "\xC4\xA0the", "ll", "hell", "lo", "<|endoftext|>",
                        "<|im_end|>", "hello"}) {
    tokens.push_back(t);
  }
  std::vector<int32_t> types(tokens.size(), 1);
  types[262] = types[263] = 3;
  for (const auto& [text, type] : extra) {
    tokens.push_back(text);
    types.push_back(type);
  }
  gguf::GgufWriter w;
  auto& md = w.metadata();
  md.Set("general.architecture", gguf::Value::String("llama"));
  md.Set("tokenizer.ggml.model", gguf::Value::String("gpt2"));
  md.Set("tokenizer.ggml.pre", gguf::Value::String(pre));
  md.Set("tokenizer.ggml.tokens", gguf::Value::StringArray(tokens));
  md.Set("tokenizer.ggml.token_type", gguf::Value::I32Array(types));
  md.Set("tokenizer.ggml.merges",
         gguf::Value::StringArray({"h e", "\xC4\xA0 t", "\xC4\xA0t he", "l l", "he ll", "l o"}));
  md.Set("tokenizer.ggml.bos_token_id", gguf::Value::U32(262));
  md.Set("tokenizer.ggml.eos_token_id", gguf::Value::U32(262));
  return w;
}

// SentencePiece: <unk>(0) <s>(1) </s>(2), <0x00>..<0xFF> (3..258, id = 3 + byte), then
// scored pieces "▁"(259, -1) "a"(260, -2) "b"(261, -2) "c"(262, -2) "ab"(263, -3)
// "bc"(264, -1.5) "▁a"(265, -2.5).
inline gguf::GgufWriter TinySpm() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  std::vector<float> scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    tokens.push_back(hex);
    types.push_back(6);
    scores.push_back(0);
  }
  const std::pair<const char*, float> pieces[] = {{"\xE2\x96\x81", -1},
                                                  {"a", -2},
                                                  {"b", -2},
                                                  {"c", -2},
                                                  {"ab", -3},
                                                  {"bc", -1.5},
                                                  {"\xE2\x96\x81"
                                                   "a",
                                                   -2.5}};
  for (const auto& [text, score] : pieces) {
    tokens.push_back(text);
    types.push_back(1);
    scores.push_back(score);
  }
  gguf::GgufWriter w;
  auto& md = w.metadata();
  md.Set("general.architecture", gguf::Value::String("llama"));
  md.Set("tokenizer.ggml.model", gguf::Value::String("llama"));
  md.Set("tokenizer.ggml.tokens", gguf::Value::StringArray(tokens));
  md.Set("tokenizer.ggml.token_type", gguf::Value::I32Array(types));
  md.Set("tokenizer.ggml.scores", gguf::Value::F32Array(scores));
  md.Set("tokenizer.ggml.bos_token_id", gguf::Value::U32(1));
  md.Set("tokenizer.ggml.eos_token_id", gguf::Value::U32(2));
  md.Set("tokenizer.ggml.unknown_token_id", gguf::Value::U32(0));
  return w;
}

}  // namespace tessera::tokenizer::testing
