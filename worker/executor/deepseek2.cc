// deepseek2 (spec 10): MLA in the absorbed form with a latent KV cache, RoPE NORM on the
// rope slices, the YaRN mscale in the attention scale (10.6), MoE with shared experts and
// leading dense blocks (10.5).
#include "worker/executor/arch_config.h"

namespace tessera::executor {

ArchConfig Deepseek2Config() {
  return {.rope = cpu::RopeLayout::kNorm, .mla = true, .mla_yarn_log_multiplier = true};
}

}  // namespace tessera::executor
