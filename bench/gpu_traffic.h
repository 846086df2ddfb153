// A traffic model of the GPU executor's kernels: the bytes of weights, KV cache and logits
// each kernel family moves per step at decode batch B (context L per sequence) and for one
// prompt of T tokens, against the ideal (each weight byte once per step, each KV byte once
// per KV head per query tile, only sampled ids back to the host). It is arithmetic over the
// model's shapes and the kernels' access patterns (kernels/cuda), in two versions:
//
// Kernels::kBefore, as issue 27 found them:
//   - products (attention projections, dense FFN, shared experts, router, LM head): GEMV of
//     up to 8 tokens per weight pass; a prompt of more than 64 tokens dequantizes the matrix
//     to 16-bit (written, then read by cuBLAS);
//   - MLA's per-head matrices (k_b, v_b) and routed experts: one warp per (row, token ·
//     choice): every choice reads its member's rows, so B tokens read B · used expert
//     matrices (and every head's matrix B times) where the ideal reads each distinct chosen
//     expert once (expected n_expert · (1 − (1 − used / n_expert)^B) of them when the
//     choices are spread evenly);
//   - attention: one block per (query, query head) reads every visible key (K and V rows;
//     MLA's latent once, as key and value) or, with DSA, its selected ones; the ideal reads
//     them once per KV head (the latent: once) per query tile of 64 queries;
//   - logits: every row's vocabulary to the host for sampling (4 bytes a logit), where on-
//     device sampling returns an id and a log-probability.
// Kernels::kNow, what the executor runs today: GEMV passes of up to 64 tokens (a decode step
// of up to 64 sequences reads each weight once); grouped products sorted by member when they
// have at least two choices per member on average (each member read once per 32 of its
// choices, the choices spread evenly); the routed experts of prompts of more than 64 tokens
// on tensor cores (GroupedGemmTiles: each member read once per 128 of its choices, 16-bit
// activations as the dense GEMM assumes); prompts of more than 64 tokens attend in tiles of 16
// queries per query head (each tile reads the keys its last query sees; DSA only within the
// top-k, where every visible key is selected) or, with head dims of 16·n (GQA; MLA's latent
// on an H100's opt-in shared memory), on tensor cores in tiles of 32 (query, head) rows of one
// KV head (each tile reads the keys its last row's query sees, once for all those heads);
// decode and shorter prompts attend by KV head
// (each query reads its keys once per block of up to 16 heads sharing a KV head); tokens
// sampled on the device (only the id and its log-probability come back, for sequences without
// penalties, grammar or alternatives).
//
// Runnable anywhere (gpu_executor_bench --traffic needs no GPU), so a change to a kernel
// family's traffic is visible before a GPU measures it.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tessera::bench {

struct TrafficShape {
  // Weight bytes read by one step (the trunk: no token embedding, no MTP block).
  double dense_bytes = 0;         // every matrix but the routed experts and the LM head
  double dense_elements = 0;      // their elements but k_b / v_b's (a prefill's 16-bit copy)
  double expert_bytes = 0;        // routed experts of all layers
  double head_bytes = 0;          // the LM head (output.weight, or the tied embedding)
  double head_product_bytes = 0;  // MLA's per-head k_b / v_b (kv_b), in dense_bytes too
  int64_t n_expert = 0, n_expert_used = 0;
  // Attention (per trunk layer alike).
  int64_t layers = 0, heads = 0, kv_heads = 0;
  int64_t kv_row_bytes = 0;  // bytes of one position's K and V of one KV head (MLA: latent)
  int64_t dsa_top_k = 0;     // > 0: each query attends at most this many selected keys
  // Prompts attend on tensor cores, rows of (query, head) of one KV head in tiles of 32
  // (PagedAttentionMma: head dims of 16·n whose tile fits an H100's opt-in shared memory, GQA
  // and MLA's latent; 16-bit activations assumed).
  bool mma_attention = false;
  int64_t vocab = 0;
};

// The shape of the model in `gguf_path` (weights as stored; KV cache 16-bit, as the GPU's
// auto dtype). Errors: the file cannot be read or its architecture is unknown.
absl::StatusOr<TrafficShape> TrafficShapeOf(const std::string& gguf_path);

struct Traffic {
  double current = 0, ideal = 0;  // bytes
};
struct StepTraffic {
  Traffic dense, experts, attention, head, logits;
};

enum class Kernels { kBefore, kNow };
const char* KernelsName(Kernels k);

// B sequences decoding one token each at context L.
StepTraffic DecodeTraffic(const TrafficShape& s, int64_t batch, int64_t context,
                          Kernels kernels = Kernels::kNow);
// One prompt of T tokens in one step (the last row's logits).
StepTraffic PrefillTraffic(const TrafficShape& s, int64_t tokens, Kernels kernels = Kernels::kNow);

// The table gpu_executor_bench --traffic prints: per kernel family, MB current / ideal and
// their ratio at decode batch 1, 8, 32 and 64 (context `context`) and prompts of 512 and
// 4,096 tokens.
std::string TrafficTable(const TrafficShape& s, int64_t context, Kernels kernels = Kernels::kNow);

}  // namespace tessera::bench
