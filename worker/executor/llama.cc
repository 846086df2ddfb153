// llama (spec 6): GQA, RoPE NORM over the whole head (the converter permuted Q/K rows so
// interleaved pairs match HF's rotate-half), optional rope_freqs factors, SwiGLU.
#include "worker/executor/arch_config.h"

namespace tessera::executor {

ArchConfig LlamaConfig() { return {.rope = cpu::RopeLayout::kNorm}; }

}  // namespace tessera::executor
