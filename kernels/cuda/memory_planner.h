// How much of a GPU the KV cache gets, decided before any device memory is allocated.
//
// vLLM's rule, which operators know: the process may use `gpu_memory_utilization` of the
// device's total memory. Whatever other processes already hold (total − free, as
// cudaMemGetInfo reports before loading) counts against that budget, then the rank's
// weights, then a workspace reserve (activations, dequantization scratch, cuBLAS); the rest
// becomes KV-cache blocks of `block_tokens` tokens.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/constants.h"

namespace tessera::cuda {

struct GpuMemoryRequest {
  uint64_t free_bytes = 0;              // cudaMemGetInfo's free, before the weights are uploaded
  uint64_t total_bytes = 0;             // cudaMemGetInfo's total
  double gpu_memory_utilization = 0.9;  // --gpu-memory-utilization, in (0, 1]
  uint64_t weight_bytes = 0;            // RankPlan::weight_bytes
  uint64_t kv_bytes_per_token = 0;      // RankPlan::kv_bytes_per_token
  uint64_t workspace_bytes = 0;         // activations, scratch, library handles
  int block_tokens = model::kDefaultKvBlockSize;  // tokens per KV-cache block
  int64_t min_tokens = 0;                         // e.g. max_model_len: at least this many must fit
};

struct GpuMemoryPlan {
  uint64_t budget_bytes = 0;  // total × utilization
  uint64_t other_bytes = 0;   // held by others before we start (total − free)
  uint64_t kv_bytes = 0;      // blocks × block_bytes
  uint64_t block_bytes = 0;   // kv_bytes_per_token × block_tokens
  int64_t kv_blocks = 0;
  int64_t kv_tokens = 0;      // kv_blocks × block_tokens
  uint64_t unused_bytes = 0;  // budget left over (less than one block)
};

// The plan, or:
//  - InvalidArgument for a utilization outside (0, 1], free > total, a zero block size or
//    zero KV bytes per token;
//  - ResourceExhausted when the weights and workspace do not fit, or fewer than min_tokens
//    (or no block at all) remain, with a message that names every term and how many bytes
//    are missing ("... needs 3.20 GiB more: raise --gpu-memory-utilization above 0.95 or use
//    more GPUs").
absl::StatusOr<GpuMemoryPlan> PlanGpuMemory(const GpuMemoryRequest& request);

// "12.50 GiB" / "512.0 MiB" / "100 B": sizes in the planner's messages.
std::string FormatBytes(uint64_t bytes);

}  // namespace tessera::cuda
