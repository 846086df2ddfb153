// What distinguishes the architectures the executor runs, taken from the architecture table
// (common/model/architectures.cc, `ArchSpec::rope_type` and `ArchSpec::forward`): the
// forward pass itself is shared, and `validate` reads the same row.
#pragma once

#include "common/model/arch.h"
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

inline ArchConfig ConfigOf(const model::ArchSpec& arch) {
  return {.rope = arch.rope_type == model::RopeType::kNeox ? cpu::RopeLayout::kNeox
                                                           : cpu::RopeLayout::kNorm,
          .mla = arch.forward.mla,
          .dsa = arch.forward.dsa,
          .moe_always_norm = arch.forward.moe_always_norm,
          .mla_yarn_log_multiplier = arch.forward.mla_yarn_log_multiplier};
}

}  // namespace tessera::executor
