// What distinguishes the architectures the executor runs. Each architecture is one small
// file (llama.cc, qwen2.cc, ...) returning its config; the forward pass is shared.
#pragma once

#include <string>

#include "kernels/cpu/nn_ops.h"

namespace tessera::executor {

struct ArchConfig {
  cpu::RopeLayout rope = cpu::RopeLayout::kNorm;
  bool mla = false;              // multi-head latent attention (spec 10.3)
  bool dsa = false;              // DeepSeek sparse attention indexer (spec 12.4)
  bool moe_always_norm = false;  // qwen3moe renormalises the top-k weights unconditionally
  // Scale of the MLA attention reads yarn_log_multiplier (deepseek2) or not (glm-dsa).
  bool mla_yarn_log_multiplier = false;
};

ArchConfig LlamaConfig();
ArchConfig Qwen2Config();
ArchConfig Qwen3Config();
ArchConfig Qwen3MoeConfig();
ArchConfig Deepseek2Config();
ArchConfig Glm4MoeConfig();
ArchConfig GlmDsaConfig();

}  // namespace tessera::executor
