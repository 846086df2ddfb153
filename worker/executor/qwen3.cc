// qwen3 (spec 8): GQA, per-head RMSNorm of Q and K before RoPE NEOX, no biases; the head
// dimension comes from attention.key_length and may differ from n_embd / n_head.
// qwen3moe (spec 9): the same attention, then softmax MoE whose top-k weights are always
// renormalised (llama.cpp hard-codes it), no shared experts, no bias, no groups.
#include "worker/executor/arch_config.h"

namespace tessera::executor {

ArchConfig Qwen3Config() { return {.rope = cpu::RopeLayout::kNeox}; }
ArchConfig Qwen3MoeConfig() { return {.rope = cpu::RopeLayout::kNeox, .moe_always_norm = true}; }

}  // namespace tessera::executor
