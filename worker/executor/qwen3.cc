// qwen3 (spec 8): GQA, per-head RMSNorm of Q and K before RoPE NEOX, no biases; the head
// dimension comes from attention.key_length and may differ from n_embd / n_head.
#include "worker/executor/dense_config.h"

namespace tessera::executor {

DenseConfig Qwen3Config() { return {cpu::RopeLayout::kNeox, true}; }

}  // namespace tessera::executor
