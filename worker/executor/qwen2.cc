// qwen2 (spec 7): GQA with Q/K/V biases, RoPE NEOX over the whole head, no Q/K norm.
#include "worker/executor/arch_config.h"

namespace tessera::executor {

ArchConfig Qwen2Config() { return {.rope = cpu::RopeLayout::kNeox}; }

}  // namespace tessera::executor
