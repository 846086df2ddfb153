// Writes a sparse split set shaped like a large MoE model's: N parts holding T tensors in
// all, each a Q4_K {7168, 2048} matrix (8.3 MB), with GLM-5-like metadata. The data is holes,
// so hundreds of GB of logical size take no disk space.
//
//   gguf_make_split_set PREFIX [PARTS=10] [TENSORS=100000]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/gguf/writer.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gguf_make_split_set PREFIX [PARTS=10] [TENSORS=100000]\n");
    return 2;
  }
  std::string prefix = argv[1];
  size_t parts = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 10;
  size_t tensors = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 100000;
  if (parts == 0 || tensors < parts) {
    std::fprintf(stderr, "gguf_make_split_set: need 1 <= PARTS <= TENSORS\n");
    return 2;
  }
  using tessera::gguf::Value;
  tessera::gguf::GgufWriter w;
  auto& md = w.metadata();
  md.Set("general.architecture", Value::String("glm-dsa"));
  md.Set("glm-dsa.block_count", Value::U32(79));
  md.Set("glm-dsa.embedding_length", Value::U32(7168));
  md.Set("glm-dsa.expert_count", Value::U32(256));
  std::vector<std::string> vocab;
  for (int i = 0; i < 154880; ++i) vocab.push_back(absl::StrCat("tok", i));
  md.Set("tokenizer.ggml.model", Value::String("gpt2"));
  md.Set("tokenizer.ggml.tokens", Value::StringArray(vocab));
  for (size_t i = 0; i < tensors; ++i) {
    std::string name = absl::StrCat("blk.", i / 1300, ".ffn_e", i % 1300, ".weight");
    auto s = w.AddZeroTensor(name, {7168, 2048}, tessera::gguf::GgmlType::kQ4_K);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  auto paths = w.WriteSplit(prefix, (tensors + parts - 1) / parts);
  if (!paths.ok()) {
    std::fprintf(stderr, "%s\n", std::string(paths.status().message()).c_str());
    return 1;
  }
  std::printf("%s\n", paths->front().c_str());
  return 0;
}
