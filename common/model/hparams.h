// A model's hyper-parameters, read from GGUF metadata through its architecture's key table
// (spec sections 4-12), optionally overridden by a HuggingFace config.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/metadata.h"
#include "nlohmann/json_fwd.hpp"

namespace tessera::model {

enum class RopeType { kNorm, kNeox };  // interleaved pairs (2i, 2i+1) vs halves (i, i+d/2)
enum class GatingFunc { kSoftmax = 1, kSigmoid = 2 };

struct HyperParams {
  std::string arch;  // the architecture whose table was used (may differ from the file's)
  uint32_t n_vocab = 0;
  uint32_t n_ctx_train = 0;
  uint32_t n_embd = 0;
  uint32_t n_layer_all = 0;         // block_count, including NextN/MTP blocks
  uint32_t n_nextn = 0;             // nextn_predict_layers
  uint32_t n_layer = 0;             // trunk blocks: n_layer_all - n_nextn
  std::vector<uint32_t> n_ff;       // per block (dense FFN width)
  std::vector<uint32_t> n_head;     // per block
  std::vector<uint32_t> n_head_kv;  // per block
  uint32_t head_dim_k = 0;          // attention.key_length
  uint32_t head_dim_v = 0;          // attention.value_length
  uint32_t n_rot = 0;
  RopeType rope_type = RopeType::kNorm;
  float rope_freq_base = 10000.0f;
  std::string rope_scaling_type = "none";
  float rope_scaling_factor = 0.0f;
  uint32_t rope_orig_ctx = 0;
  float rope_attn_factor = 1.0f;
  float yarn_log_multiplier = 0.0f;
  float rms_eps = 0.0f;

  // Mixture of experts.
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  uint32_t n_expert_groups = 0;
  uint32_t n_group_used = 0;
  uint32_t n_ff_exp = 0;
  uint32_t n_expert_shared = 0;
  uint32_t n_leading_dense = 0;
  float expert_weights_scale = 0.0f;
  bool expert_weights_norm = false;
  uint32_t gating_func = 0;  // expert_gating_func as stored; 0 when absent (arch default)
  GatingFunc gating = GatingFunc::kSoftmax;  // resolved

  // Multi-head latent attention (deepseek2, glm-dsa).
  uint32_t q_lora_rank = 0;
  uint32_t kv_lora_rank = 0;
  uint32_t key_length_mla = 0;    // qk_nope + qk_rope
  uint32_t value_length_mla = 0;  // v_head_dim
  bool mla_split_kv_b = false;    // both *_mla keys present: attn_k_b / attn_v_b form

  // DeepSeek sparse attention indexer (glm-dsa).
  uint32_t indexer_heads = 0;
  uint32_t indexer_head_dim = 0;
  uint32_t indexer_top_k = 0;
  std::vector<bool> indexer_full;  // per trunk block: true = full indexer

  bool is_moe() const { return n_expert > 0; }
  bool is_mla() const { return kv_lora_rank > 0; }
  bool is_moe_block(uint32_t layer) const { return is_moe() && layer >= n_leading_dense; }
  uint32_t qk_nope() const { return key_length_mla - n_rot; }
};

// A problem found while reading keys: warnings (an optional key absent, default used) and
// errors (a required key absent or of the wrong type), each naming the key.
struct KeyProblem {
  bool error = false;
  std::string key;
  std::string message;
};

}  // namespace tessera::model

namespace tessera::model {

struct ArchSpec;

// Reads the hyper-parameters of `arch` from `md`, whose keys carry the prefix `key_prefix`
// (the file's own general.architecture; it differs from arch.name under --arch-as).
// `hf_config` (a parsed HuggingFace config.json, may be null) supplies or overrides values.
// Every problem is appended to `problems` (all of them, not the first); the result is
// usable for reporting even when there are errors.
HyperParams LoadHyperParams(const ArchSpec& arch, const std::string& key_prefix,
                            const gguf::Metadata& md, const nlohmann::json* hf_config,
                            std::vector<KeyProblem>* problems);

}  // namespace tessera::model
