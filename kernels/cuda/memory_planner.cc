#include "kernels/cuda/memory_planner.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::cuda {

std::string FormatBytes(uint64_t bytes) {
  constexpr double kMiB = 1024.0 * 1024.0, kGiB = kMiB * 1024.0;
  if (bytes >= (uint64_t{1} << 30)) return absl::StrFormat("%.2f GiB", bytes / kGiB);
  if (bytes >= (uint64_t{1} << 20)) return absl::StrFormat("%.1f MiB", bytes / kMiB);
  return absl::StrCat(bytes, " B");
}

absl::StatusOr<GpuMemoryPlan> PlanGpuMemory(const GpuMemoryRequest& r) {
  if (!(r.gpu_memory_utilization > 0.0 && r.gpu_memory_utilization <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--gpu-memory-utilization ", r.gpu_memory_utilization, ": expected a value in (0, 1]"));
  }
  if (r.free_bytes > r.total_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("device reports ", r.free_bytes,
                                                   " bytes free of ", r.total_bytes,
                                                   " total: free cannot exceed total"));
  }
  if (r.block_tokens <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV block of ", r.block_tokens, " tokens: expected a positive size"));
  }
  if (r.kv_bytes_per_token == 0) {
    return absl::InvalidArgumentError("KV bytes per token is 0: the shard plan has no KV cache");
  }
  GpuMemoryPlan p;
  p.budget_bytes = static_cast<uint64_t>(
      std::floor(static_cast<long double>(r.total_bytes) * r.gpu_memory_utilization));
  p.other_bytes = r.total_bytes - r.free_bytes;
  p.block_bytes = r.kv_bytes_per_token * static_cast<uint64_t>(r.block_tokens);
  // The bytes that must fit before a single KV block: others, weights, workspace.
  const uint64_t fixed = p.other_bytes + r.weight_bytes + r.workspace_bytes;
  const uint64_t min_blocks = std::max<uint64_t>(
      1, (static_cast<uint64_t>(std::max<int64_t>(r.min_tokens, 0)) + r.block_tokens - 1) /
             r.block_tokens);
  const uint64_t needed = fixed + min_blocks * p.block_bytes;
  if (needed > p.budget_bytes) {
    const uint64_t missing = needed - p.budget_bytes;
    const double util_needed = static_cast<double>(needed) / static_cast<double>(r.total_bytes);
    std::string advice =
        util_needed <= 1.0
            ? absl::StrFormat("raise --gpu-memory-utilization to at least %.3f", util_needed)
            : std::string("use more GPUs (a larger tensor-parallel size)");
    return absl::ResourceExhaustedError(absl::StrCat(
        "GPU memory: --gpu-memory-utilization ", r.gpu_memory_utilization, " of ",
        FormatBytes(r.total_bytes), " allows ", FormatBytes(p.budget_bytes), "; other processes ",
        FormatBytes(p.other_bytes), " + weights ", FormatBytes(r.weight_bytes), " + workspace ",
        FormatBytes(r.workspace_bytes), " + KV cache for ", min_blocks * r.block_tokens, " tokens ",
        FormatBytes(min_blocks * p.block_bytes), " needs ", FormatBytes(missing),
        " more: ", advice));
  }
  const uint64_t kv_room = p.budget_bytes - fixed;
  p.kv_blocks = static_cast<int64_t>(kv_room / p.block_bytes);
  p.kv_bytes = static_cast<uint64_t>(p.kv_blocks) * p.block_bytes;
  p.kv_tokens = p.kv_blocks * r.block_tokens;
  p.unused_bytes = kv_room - p.kv_bytes;
  return p;
}

}  // namespace tessera::cuda
