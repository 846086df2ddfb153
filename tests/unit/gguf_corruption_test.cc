// Every truncation and many byte flips of a small valid file end in a Status, never a crash,
// an out-of-bounds read (ASan in the sanitize build) or a hang.
#include <algorithm>
#include <random>

#include "common/gguf/reader.h"
#include "common/gguf/writer.h"
#include "gtest/gtest.h"

namespace tessera::gguf {
namespace {

std::vector<uint8_t> SmallValidFile() {
  GgufWriter w;
  Metadata& md = w.metadata();
  md.Set("general.architecture", Value::String("llama"));
  md.Set("llama.block_count", Value::U32(2));
  md.Set("llama.rope.freq_base", Value::F32(10000.0f));
  md.Set("tokenizer.ggml.tokens", Value::StringArray({"a", "b", "<s>"}));
  md.Set("tokenizer.ggml.scores", Value::F32Array({0.0f, -1.0f, 0.0f}));
  md.Set("nested", Value::MakeArray(ValueType::kArray, {Value::I32Array({1, 2})}));
  md.Set("flag", Value::Bool(true));
  std::vector<float> v(32, 0.25f);
  EXPECT_TRUE(w.AddF32Tensor("token_embd.weight", {8, 4}, v).ok());
  EXPECT_TRUE(w.AddZeroTensor("blk.0.attn_q.weight", {32, 2}, GgmlType::kQ8_0).ok());
  EXPECT_TRUE(w.AddZeroTensor("blk.0.ffn_down.weight", {256, 1}, GgmlType::kQ4_K).ok());
  return w.WriteToBuffer();
}

// Touches every byte the reader claims belongs to a tensor, so ASan sees any bad span.
uint64_t TouchAll(const GgufFile& f) {
  uint64_t sum = 0;
  for (const TensorInfo& t : f.tensors()) {
    for (uint8_t b : f.TensorData(t)) sum += b;
  }
  return sum;
}

TEST(GgufCorruption, ValidFileParses) {
  std::vector<uint8_t> file = SmallValidFile();
  auto f = GgufFile::Parse(file, "valid.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->tensors().size(), 3u);
  // 32 floats of 0.25 (bytes 00 00 80 3e): each contributes 0x80 + 0x3e.
  EXPECT_EQ(TouchAll(**f), 32u * (0x80 + 0x3e));
}

TEST(GgufCorruption, EveryTruncationIsAnError) {
  std::vector<uint8_t> file = SmallValidFile();
  // The padding after the last tensor's data is not needed: a cut there still parses.
  auto full = GgufFile::Parse(file, "full.gguf");
  ASSERT_TRUE(full.ok());
  uint64_t data_end = 0;
  for (const TensorInfo& t : (*full)->tensors()) {
    data_end = std::max(data_end, t.file_offset + t.n_bytes);
  }
  ASSERT_LT(data_end, file.size());
  for (size_t len = 0; len < data_end; ++len) {
    // A fresh heap copy of exactly `len` bytes so that ASan catches any read past it.
    std::vector<uint8_t> cut(file.begin(), file.begin() + static_cast<ptrdiff_t>(len));
    auto f = GgufFile::Parse(cut, "cut.gguf");
    EXPECT_FALSE(f.ok()) << "truncated at " << len << " bytes parsed";
  }
}

TEST(GgufCorruption, ByteFlipsNeverCrash) {
  std::vector<uint8_t> file = SmallValidFile();
  size_t errors = 0, parsed = 0;
  for (size_t pos = 0; pos < file.size(); ++pos) {
    for (uint8_t mask : {0x01, 0x80, 0xff, 0x7f}) {
      std::vector<uint8_t> bad = file;
      bad[pos] ^= mask;
      auto f = GgufFile::Parse(bad, "flip.gguf");
      if (f.ok()) {
        TouchAll(**f);
        ++parsed;
      } else {
        EXPECT_FALSE(f.status().message().empty());
        ++errors;
      }
    }
  }
  // Flips inside tensor data or string contents legitimately parse; flips in the
  // structure must not. Both kinds exist in this file.
  EXPECT_GT(errors, 0u);
  EXPECT_GT(parsed, 0u);
}

TEST(GgufCorruption, RandomMultiByteDamageNeverCrashes) {
  std::vector<uint8_t> file = SmallValidFile();
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> bad = file;
    int n = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < n; ++k) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) bad.resize(rng() % bad.size());
    auto f = GgufFile::Parse(bad, "random.gguf");
    if (f.ok()) TouchAll(**f);
  }
}

}  // namespace
}  // namespace tessera::gguf
