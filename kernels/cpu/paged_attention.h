// Decode attention that reads the paged KV cache in place: the keys and values of a sequence
// are visited block by block through its block table and converted from the cache's element
// type in registers, instead of being gathered into float32 copies first.
//
// For every query row r (nq rows sharing one KV head, or all heads over the MLA latent):
//   out[r] = softmax(scale · q[r] · K[j] for j < n_keys) · V
// Scores are computed in float32 (one product per key), the softmax is nn_ops.h's, and the
// weighted sum of values accumulates keys in position order. Its error against the float64
// product is float32 accumulation only (tests/unit/paged_attention_test.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/paged_attention_args.h"

namespace tessera::cpu {

// `scratch` is reused between calls (nq × n_keys scores). Every argument must be valid:
// the callers (the executor) have checked the table against the cache already.
// `isa` caps the kernel (the portable loop below AVX-512).
void PagedAttention(const PagedAttentionArgs& a, std::vector<float>* scratch, Isa isa = BestIsa());

}  // namespace tessera::cpu
