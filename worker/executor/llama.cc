// llama (spec 6): GQA, RoPE NORM over the whole head (the converter permuted Q/K rows so
// interleaved pairs match HF's rotate-half), optional rope_freqs factors, SwiGLU.
#include "worker/executor/dense_config.h"

namespace tessera::executor {

DenseConfig LlamaConfig() { return {cpu::RopeLayout::kNorm, false}; }

}  // namespace tessera::executor
