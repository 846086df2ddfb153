// Synthetic GGUF models for every supported architecture: deterministic random weights laid
// out exactly as the reference converter writes them (names, shapes, F32 router and norms,
// split attn_k_b/attn_v_b, the nextn block, the indexer, YaRN keys), a small byte-level BPE
// vocabulary with the family's special tokens and a chat template. Used by `tessera
// gen-model`, tests and the embedded default model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/writer.h"
#include "common/model/hparams.h"

namespace tessera::model {

struct SyntheticOptions {
  std::string arch = "llama";
  std::string preset = "tiny";  // SyntheticPresets()
  std::string quant = "F32";    // F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K..Q6_K, Q4_K_M,
                                // UD-Q4_K_XL (the glm5-shape default)
  uint64_t seed = 1;
  int layers = -1;  // trunk blocks; -1 keeps the preset's
  // NextN/MTP blocks after the trunk (<arch>.nextn_predict_layers); -1 keeps the preset's
  // (one for glm-dsa, glm4moe and the DeepSeek-V3 / GLM shapes, none elsewhere).
  int nextn = -1;
};

// The presets' names, and the quant names accepted.
std::vector<std::string> SyntheticPresets();
std::vector<std::string> SyntheticQuants();

// The hyper-parameters a preset gives `arch` (with `layers` applied).
absl::StatusOr<HyperParams> SyntheticHyperParams(const SyntheticOptions& o);

// Builds the whole model in a writer (metadata and tensors). glm5-shape tensors are zero
// tensors, written as holes: the header is real, the data takes no disk space.
absl::StatusOr<gguf::GgufWriter> BuildSyntheticModel(const SyntheticOptions& o);

}  // namespace tessera::model
