// glm-dsa (spec 12): deepseek2's MLA and MoE plus the DSA lightning indexer, whose top-k
// keys mask the attention; yarn_log_multiplier is not read (spec 12.1, 17.12).
#include "worker/executor/arch_config.h"

namespace tessera::executor {

ArchConfig GlmDsaConfig() { return {.rope = cpu::RopeLayout::kNorm, .mla = true, .dsa = true}; }

}  // namespace tessera::executor
