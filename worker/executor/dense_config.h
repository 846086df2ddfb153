// What distinguishes the dense GQA architectures (llama, qwen2, qwen3): each is one small
// file (llama.cc, qwen2.cc, qwen3.cc) returning its config; the forward pass is shared.
#pragma once

#include <string>

#include "kernels/cpu/nn_ops.h"

namespace tessera::executor {

struct DenseConfig {
  cpu::RopeLayout rope = cpu::RopeLayout::kNorm;
  bool qk_norm = false;  // per-head RMSNorm of Q and K before RoPE (qwen3)
};

DenseConfig LlamaConfig();
DenseConfig Qwen2Config();
DenseConfig Qwen3Config();

}  // namespace tessera::executor
