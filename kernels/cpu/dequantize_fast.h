// Optimised row dequantizers, chosen by type and instruction set. Every one returns the
// same bits as the reference decoder in common/quant (tests pin this): the formulas are
// short chains of exact float32 products and one separate add/subtract, kept unfused.
#pragma once

#include <cstdint>

#include "common/gguf/ggml_type.h"
#include "kernels/cpu/isa.h"

namespace tessera::cpu {

// Decodes `n` elements (a multiple of the block size) of packed blocks to float32.
using DequantizeRowFn = void (*)(const void* src, float* y, int64_t n);

// The fastest decoder for `type` at `isa` (falling back to lower levels, then to the
// reference), or nullptr when the type is not supported at all.
DequantizeRowFn FastDequantizer(gguf::GgmlType type, Isa isa = BestIsa());
// Which level FastDequantizer(type, isa) actually uses: "avx2", "scalar", ...
const char* FastDequantizerName(gguf::GgmlType type, Isa isa = BestIsa());

}  // namespace tessera::cpu
