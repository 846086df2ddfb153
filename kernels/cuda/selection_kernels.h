// Selection on the GPU: top-k over score rows (the DSA indexer's key selection, spec 12.4),
// MoE routing (spec 5.6) and token sampling. Device pointers; queued on `stream`.
#pragma once

#include "kernels/cuda/cuda_types.h"

namespace tessera::cuda {

// For each of `rows` rows of `n` float32 scores: the indices of the min(k, len) largest among
// the first len = lengths[row] (n when lengths is null), ascending, ties at the cut going to
// the lower index; the rest of the row's k output slots are −1. out is [rows, k] int32.
absl::Status TopK(const float* scores, int64_t rows, int64_t n, int64_t k, const int32_t* lengths,
                  int32_t* out, cudaStream_t stream);

enum class MoeGating { kSoftmax = 1, kSigmoid = 2 };  // expert_gating_func codes

struct MoeRoutingArgs {
  int64_t tokens = 0;
  int experts = 0;      // E
  int used = 0;         // k = expert_used_count
  int groups = 1;       // n_group (1: no group limit)
  int topk_groups = 1;  // groups kept when groups > 1
  MoeGating gating = MoeGating::kSoftmax;
  bool norm_weights = false;
  float weights_scale = 1.0f;     // routed_scaling_factor; 0 or 1: none
  const float* logits = nullptr;  // [tokens, E], router output W_r x
  const float* bias = nullptr;    // [E] selection bias (exp_probs_b), or null
  int32_t* ids = nullptr;         // [tokens, k] chosen experts, best selection score first
  float* weights = nullptr;       // [tokens, k] their weights
};
// Spec 5.6 steps 2-8: probabilities, biased selection scores, group-limited selection (group
// score = sum of the two best scores), top-k (ties: lower expert id), unbiased weights,
// normalization (floor 6.103515625e−5) and scaling.
absl::Status MoeRoute(const MoeRoutingArgs& args, cudaStream_t stream);

// Per-sequence sampling parameters, in device memory.
struct GpuSamplingParams {
  float temperature = 1.0f;  // < 1e-5: greedy
  int32_t top_k = 0;         // ≤ 0: off
  float top_p = 1.0f;        // ≥ 1: off
  float min_p = 0.0f;        // ≤ 0: off
  double uniform = 0.0;      // the draw's u in [0, 1), from the sequence's seeded generator
};

// One token per sequence from logits [sequences, vocab] (float32), worker/sampling's chain
// without penalties: greedy (argmax, lowest id on ties) when temperature < 1e-5; otherwise
// top-k (ties at the cut: lower ids), top-p over the top-k survivors at temperature 1 (the
// smallest best-first set reaching top_p; ties: lower ids), min-p (exp(l − max) ≥ min_p),
// then weights exp((l − max)/temperature) and the first survivor in token-id order whose
// running weight exceeds uniform·total. NaN logits count as −inf, +inf as the largest float.
// (The CPU sampler walks top-k survivors best first instead of by id: same distribution,
// a given uniform may pick a different token.)
absl::Status Sample(const float* logits, int64_t sequences, int64_t vocab,
                    const GpuSamplingParams* params, int32_t* tokens, cudaStream_t stream);
// logprobs[s] = log-softmax of row s of `logits` at tokens[s]: (l − max) − log Σ exp(l − max),
// the raw distribution (before truncation and temperature) with Sample's reading of the
// logits (NaN as −inf, +inf as the largest float), the sum in float64. NaN for a token
// outside [0, vocab). What the sampler reports as a sampled token's log-probability.
absl::Status ChosenLogprobs(const float* logits, int64_t sequences, int64_t vocab,
                            const int32_t* tokens, float* logprobs, cudaStream_t stream);

}  // namespace tessera::cuda
