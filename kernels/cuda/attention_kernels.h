// Attention over a paged KV cache on the GPU: GQA (spec 5.4), the MLA absorbed form over the
// latent cache (spec 10.3: one 576-wide key per token whose first 512 values are the value),
// optionally restricted to the DSA indexer's selection (spec 12.4), and the indexer's
// scores. Device pointers; queued on `stream`.
#pragma once

#include "kernels/cuda/cuda_types.h"

namespace tessera::cuda {

// A paged cache: token p of the sequence using block-table row s lives in block
// block_table[s·max_blocks + p / block_size], slot p % block_size. Element i of KV head g of
// that token is at base + block·block_stride + slot·token_stride + g·head_stride + i.
struct PagedCache {
  const void* base = nullptr;
  int64_t block_stride = 0;
  int64_t token_stride = 0;
  int64_t head_stride = 0;
};

struct PagedAttentionArgs {
  int64_t queries = 0;  // query tokens
  int heads = 0;
  int kv_heads = 0;  // 1 for MLA
  int d_k = 0;       // query/key width (MLA: kv_lora_rank + rope dim = 576)
  int d_v = 0;       // value width (MLA: kv_lora_rank = 512, the key's first values)
  // GQA under tensor parallelism: the model's index of the first query head here and the
  // model's query heads per KV head; query head h then uses KV head
  // (head0 + h) / group − head0 / group (0: h / (heads / kv_heads)).
  int head0 = 0, group = 0;
  int block_size = 0;
  float scale = 0.0f;  // s of spec 5.4 / 10.6
  // Query q of head h: q + q·q_token_stride + h·d_k. Output: out + q·out_token_stride + h·d_v.
  const void* q = nullptr;
  int64_t q_token_stride = 0;
  void* out = nullptr;
  int64_t out_token_stride = 0;
  PagedCache k, v;                       // MLA: v = k (same base and strides), d_v < d_k
  const int32_t* block_table = nullptr;  // [sequences, max_blocks]
  int max_blocks = 0;
  const int32_t* query_seq = nullptr;     // block-table row of each query
  const int32_t* query_kv_len = nullptr;  // keys 0 .. len−1 are visible to each query (causal)
  // Optional DSA selection: per query `selected_per_query` key positions (−1 = unused);
  // only those (that are also visible) are attended.
  const int32_t* selected = nullptr;
  int selected_per_query = 0;
};

// o = Σ_t softmax_t(scale · q·k_t) v_t per query and head over the visible (and selected)
// keys; float32 scores and accumulation; a query with no visible key gets zeros. Query head
// h uses KV head h / (heads / kv_heads). q, the cache and out are `dtype`.
absl::Status PagedAttention(const PagedAttentionArgs& args, DType dtype, cudaStream_t stream);
// Queries [from, from + n) of `a` (q and out of `dtype`) as arguments of their own.
inline PagedAttentionArgs QueryRange(const PagedAttentionArgs& a, int64_t from, int64_t n,
                                     DType dtype) {
  const int64_t esz = static_cast<int64_t>(DTypeBytes(dtype));
  PagedAttentionArgs p = a;
  p.queries = n;
  p.q = static_cast<const uint8_t*>(a.q) + from * a.q_token_stride * esz;
  p.out = static_cast<uint8_t*>(a.out) + from * a.out_token_stride * esz;
  p.query_seq = a.query_seq + from;
  p.query_kv_len = a.query_kv_len + from;
  if (a.selected != nullptr) p.selected = a.selected + from * a.selected_per_query;
  return p;
}
// The same attention for a prompt (FlashAttention-2 style): every query belongs to the
// sequence of query_seq[0]'s block-table row, no selection (DSA: only where every visible
// key is selected, i.e. no query sees more keys than the top-k). A block takes a tile of
// kTiledQueries consecutive queries and one query head and streams the keys visible to its
// last query through shared memory kTiledKeys at a time, so the cache is read once per
// (query tile, head) instead of once per (query, head). Each query walks its keys in order
// with one online softmax, so its result does not depend on its tile-mates; it differs from
// PagedAttention's (four warps' partial softmaxes merged) by float32 reassociation only.
// Errors: PagedAttention's, a selection, or a key tile beyond 48 KiB of shared memory
// (head dims above 384 with separate values).
absl::Status PagedAttentionTiled(const PagedAttentionArgs& args, DType dtype, cudaStream_t stream);
// The same attention for a GQA prompt on tensor cores (16-bit q, cache and out; head dims
// multiples of 16 up to kMmaMaxDim; separate values): PagedAttentionTiled's contract, but a
// block takes kMmaRows (query, query head) rows of one KV head, so each KV head's keys are read
// once per tile of kMmaRows / (heads per KV head) queries for all its heads instead of once
// per (tile, head). Scores and the value product are WMMA products with float accumulation; the
// probabilities are rounded to the 16-bit type before the value product (the sum l adds the
// rounded values), so a result differs from PagedAttention's by at most about that rounding
// (unit roundoff 2⁻⁸ for bf16, 2⁻¹¹ for f16) of the largest |value| plus float32 reassociation. A
// row's result depends on its own query and keys only. Geometry: launch_config.h's
// MmaAttentionLaunch. Errors: PagedAttentionTiled's and MmaAttentionLaunch's.
absl::Status PagedAttentionMma(const PagedAttentionArgs& args, DType dtype, cudaStream_t stream);
// The same attention for decode and short chunks (flash-decoding): one block per (query, up
// to kDecodeHeads query heads of one KV head, split of the query's keys), so each KV head's
// keys are read once per query (MLA's latent once for all heads) and a long context still
// spreads over many blocks; a merge kernel combines the splits. Selections (DSA) as
// PagedAttention. `workspace` (device, `workspace_floats` floats) holds the partials of
// ⌊workspace_floats / (heads · DecodePartialFloats(d_v))⌋ queries: more queries run in
// passes. A query's splits, and so its result, depend on its own keys only; it differs from
// PagedAttention's by float32 reassociation. Errors: PagedAttention's, a workspace smaller
// than one query's partials, a key tile beyond 48 KiB of shared memory.
absl::Status PagedAttentionDecode(const PagedAttentionArgs& args, float* workspace,
                                  int64_t workspace_floats, DType dtype, cudaStream_t stream);

// Stores `tokens` new keys or values in a paged cache (vLLM's reshape_and_cache): token i's
// `kv_heads` rows of `width` values, at src + i·src_token_stride + g·width, go to slot
// slot_mapping[i] (block slot / block_size, position slot % block_size) of `cache`, laid out
// as PagedCache describes. A negative slot skips the token (padding).
struct KvWriteArgs {
  int64_t tokens = 0;
  int kv_heads = 0;
  int width = 0;
  int block_size = 0;
  const void* src = nullptr;
  int64_t src_token_stride = 0;
  void* cache = nullptr;
  int64_t block_stride = 0;
  int64_t token_stride = 0;
  int64_t head_stride = 0;
  const int64_t* slot_mapping = nullptr;  // device, one per token
};
absl::Status WriteKvCache(const KvWriteArgs& args, DType dtype, cudaStream_t stream);

// DSA indexer scores (spec 12.4 step 6), float32 throughout:
// scores[q·n_keys + j] = Σ_h w[q·heads + h] · ReLU(q_I[q, h] · k_I[j]) for j < query_kv_len[q],
// −inf for the other j < n_keys. q_I is [queries, heads, dim]; the index keys are a paged
// cache (kv_heads 1, float32) with the same block table as the attention.
struct IndexerScoreArgs {
  int64_t queries = 0;
  int heads = 0;
  int dim = 0;
  int64_t n_keys = 0;  // row length of `scores` (≥ every query_kv_len)
  int block_size = 0;
  const float* q = nullptr;
  const float* weights = nullptr;
  PagedCache keys;
  const int32_t* block_table = nullptr;
  int max_blocks = 0;
  const int32_t* query_seq = nullptr;
  const int32_t* query_kv_len = nullptr;
  float* scores = nullptr;
};
absl::Status IndexerScores(const IndexerScoreArgs& args, cudaStream_t stream);

}  // namespace tessera::cuda
