// qwen2 (spec 7): GQA with Q/K/V biases, RoPE NEOX over the whole head, no Q/K norm.
#include "worker/executor/dense_config.h"

namespace tessera::executor {

DenseConfig Qwen2Config() { return {cpu::RopeLayout::kNeox, false}; }

}  // namespace tessera::executor
