// The tensor-parallel shard plan: for N ranks, how every loaded tensor is divided, the exact
// byte ranges of the file(s) each rank reads (so a worker maps only its shard), the bytes it
// holds after fixups, and its KV-cache bytes per token (spec 16).
#pragma once

#include <cstdint>
#include <string>
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
  int64_t begin = 0;   // element range along the split dim (whole dim when replicated)
  int64_t end = 0;
  std::vector<ByteRange> ranges;
  uint64_t read_bytes = 0;
  uint64_t held_bytes = 0;  // after fixups (dequantized tensors hold float32)
};

struct RankPlan {
  int rank = 0;
  std::vector<TensorShard> shards;
  uint64_t read_bytes = 0;
  uint64_t weight_bytes = 0;        // held after fixups
  uint64_t kv_bytes_per_token = 0;  // attention KV (or MLA latent) + DSA indexer keys
};

struct KvOptions {
  uint32_t kv_element_bytes = 2;       // f16 KV cache (the attention cache)
  uint32_t indexer_element_bytes = 4;  // DSA indexer keys stay float32 (conformance README)
};

struct ShardPlan {
  int tp = 1;
  std::vector<RankPlan> ranks;
  std::vector<std::string> problems;  // each names the tensor and why N does not work
};

// Plans the tensors of `map` that are loaded over `tp` ranks.
ShardPlan BuildShardPlan(const TensorMap& map, const HyperParams& hp, int tp,
                         const KvOptions& kv = {});

// The first `max` problems joined with "; ", then "... and N more" (errors stay readable
// when every layer has the same problem; `tessera validate --tp N` lists them all).
std::string SummarizeProblems(const std::vector<std::string>& problems, size_t max = 3);

// The tensor-parallel sizes in 1..max_tp for which BuildShardPlan finds no problem.
std::vector<int> ValidTpSizes(const TensorMap& map, const HyperParams& hp, int max_tp = 64);

}  // namespace tessera::model
