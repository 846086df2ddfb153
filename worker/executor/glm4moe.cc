// glm4moe (spec 11): GQA with partial RoPE NEOX (n_rot = d_h/2), optional Q/K norms and
// biases, post_attention_norm as the pre-FFN norm, sigmoid MoE with a shared expert.
#include "worker/executor/arch_config.h"

namespace tessera::executor {

ArchConfig Glm4MoeConfig() { return {.rope = cpu::RopeLayout::kNeox}; }

}  // namespace tessera::executor
