// The tensor-parallel shard plan: for N ranks, how every loaded tensor is divided, the exact
// byte ranges of the file(s) each rank reads (so a worker maps only its shard), the bytes it
// holds after fixups, and its KV-cache bytes per token (spec 16).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/model/tensor_map.h"

namespace tessera::model {

// `count` chunks of `length` bytes, the first at `offset` of part `part`, each `stride`
// bytes after the previous (count 1: one contiguous range).
struct ByteRange {
  uint32_t part = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t stride = 0;
  uint64_t count = 1;
  uint64_t bytes() const { return length * count; }
};

struct TensorShard {
  size_t mapping = 0;  // index into TensorMap::tensors
  int dim = -1;        // the ggml dim divided (-1: replicated)
  int64_t begin = 0;   // element range along `dim` (whole dim when replicated; for a fused
  int64_t end = 0;     // tensor, from its first piece's start to its last piece's end)
  int64_t extent = 0;  // elements along `dim` this rank holds (its pieces together)
  std::vector<ByteRange> ranges;
  uint64_t read_bytes = 0;
  uint64_t held_bytes = 0;  // after fixups (dequantized tensors hold float32)
};

// A rank's share of one block's work, in the model's numbering. Heads and experts are
// contiguous ranges; an empty range means the rank computes none of that part of the block
// and adds zeros to the all-reduce.
struct BlockShare {
  int64_t head_begin = 0, head_end = 0;        // query heads (GQA) or heads (MLA)
  int64_t kv_head_begin = 0, kv_head_end = 0;  // GQA KV heads held: those its query heads use
  int64_t expert_begin = 0, expert_end = 0;    // routed experts held whole (all unless EP)
  int64_t heads() const { return head_end - head_begin; }
  int64_t kv_heads() const { return kv_head_end - kv_head_begin; }
};

struct RankPlan {
  int rank = 0;
  std::vector<TensorShard> shards;
  std::vector<BlockShare> blocks;  // per block: the trunk's, then the mapped MTP blocks
  uint64_t read_bytes = 0;
  uint64_t weight_bytes = 0;  // held after fixups
  // Attention KV (or MLA latent) + DSA indexer keys, as the cache holds them: every layer
  // as wide as the rank's widest (its most KV heads).
  uint64_t kv_bytes_per_token = 0;
};

struct KvOptions {
  uint32_t kv_element_bytes = 2;       // f16 KV cache (the attention cache)
  uint32_t indexer_element_bytes = 4;  // DSA indexer keys stay float32 (conformance README)
};

// How the routed experts are divided: kAuto chooses expert parallelism where the experts'
// hidden dim cannot be divided evenly in whole quant blocks, tensor parallelism otherwise.
enum class ExpertParallel { kAuto, kOn, kOff };
std::string_view ExpertParallelName(ExpertParallel e);
// "auto" | "on" | "off" (also "true" / "false"); nullopt for anything else.
std::optional<ExpertParallel> ParseExpertParallel(std::string_view s);

struct PlanOptions {
  KvOptions kv;
  ExpertParallel experts = ExpertParallel::kAuto;
};

struct ShardPlan {
  int tp = 1;
  std::vector<RankPlan> ranks;
  std::vector<std::string> problems;  // each names the tensor and why N does not work
  bool expert_parallel = false;       // routed experts dealt out whole
  // One line per partition (attention heads, KV heads, dense FFN, routed and shared
  // experts, vocabulary): how it is divided and why.
  std::vector<std::string> strategy;
};

// Plans the tensors of `map` that are loaded over `tp` ranks. Every partition of a block
// is cut at whole units (heads, hidden rows) that fall on quant-block boundaries of every
// tensor that follows it, as evenly as that allows (ceil/floor shares, the larger ones
// rotated by block so that no rank holds all of them); a partition that cannot be cut on
// block boundaries goes whole to one rank (rotated by block); GQA ranks keep the KV heads
// their query heads use (replicated where ranks share one); routed experts go whole to the
// ranks under expert parallelism. The plan fails only on tensors whose shapes contradict
// one another.
ShardPlan BuildShardPlan(const TensorMap& map, const HyperParams& hp, int tp,
                         const PlanOptions& options = {});

// The first `max` problems joined with "; ", then "... and N more" (errors stay readable
// when every layer has the same problem; `tessera validate --tp N` lists them all).
std::string SummarizeProblems(const std::vector<std::string>& problems, size_t max = 3);

// The tensor-parallel sizes in 1..max_tp for which BuildShardPlan finds no problem.
std::vector<int> ValidTpSizes(const TensorMap& map, const HyperParams& hp, int max_tp = 64,
                              const PlanOptions& options = {});

}  // namespace tessera::model
