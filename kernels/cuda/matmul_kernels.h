// Dequantization and matrix products on the GPU for every weight type of
// launch_config.h's CudaQuantGeometry. Pointers are device pointers; work is queued on
// `stream` and the functions return once it is queued (errors are shape errors, found before
// any launch, or CUDA launch errors).
#pragma once

#include <cublas_v2.h>

#include "kernels/cuda/cuda_types.h"

namespace tessera::cuda {

// dst[i] = element i of the `n` elements of `type` at `src`, converted to `out`.
absl::Status Dequantize(gguf::GgmlType type, const void* src, int64_t n, DType out, void* dst,
                        cudaStream_t stream);

// Decode GEMV: y[b·w.rows + r] = Σ_k W[r][k] · x[b·w.cols + k] for b < batch, with W read
// quantized and decoded in registers (one warp per row), activations and output in `act`,
// accumulation in float32. Any batch works; it is processed kGemvMaxBatch (64) tokens per
// pass, each weight byte read once per pass. Batch invariant: a token's result is
// bit-identical whatever the batch (its arithmetic is the same in every pass and instance).
absl::Status Gemv(const DeviceMatrix& w, const void* x, DType act, int64_t batch, void* y,
                  cudaStream_t stream);

// Grouped decode GEMV: one matrix of a stack per (token, choice). Member m of the stack
// (rows × cols as `w` describes) starts at w.data + m·member_bytes. For token t and choice j
// with m = ids[t·used + j]:
//   y[(t·used + j)·y_stride + r] = W_m[r] · x_{t,j},
//   x_{t,j} = x + (x_per_choice ? t·used + j : t)·x_stride.
// An id outside [0, members) yields zeros. Strides of 0 mean cols (x) and rows (y).
// Uses: MoE experts (members = experts, ids = the routing; gate/up share the token's x, down
// takes one x per choice), and MLA's absorbed k_b / v_b (members = heads, ids = 0..H−1 per
// token, x the heads' q_nope or attention outputs at their stride in the head layout).
struct GroupedGemvArgs {
  DeviceMatrix w;
  size_t member_bytes = 0;
  int members = 0;
  // ids count from this member: id i uses member i − member0; ids outside the stack
  // (another rank's experts under expert parallelism) give zero rows.
  int member0 = 0;
  const int32_t* ids = nullptr;
  int64_t tokens = 0;
  int used = 0;
  const void* x = nullptr;
  bool x_per_choice = false;
  int64_t x_stride = 0;
  void* y = nullptr;
  int64_t y_stride = 0;
  // Optional, both or neither: the choices grouped by member, as SortByMember writes them
  // for these ids. Then each member's rows are decoded once per kGroupedPass (32) of its
  // choices instead of once per choice (MoE prefill and large decode batches: the "tokens
  // sorted by expert" grouped product). Same results, bit for bit.
  const int32_t* order = nullptr;
  const int32_t* offsets = nullptr;
};
absl::Status GroupedGemv(const GroupedGemvArgs& args, DType act, cudaStream_t stream);

// Groups n choices by member: member m = ids[i] − member0 for m in [0, members), bucket
// `members` for the others. offsets[b] .. offsets[b + 1] (b ≤ members; offsets has
// members + 2 entries) index `order` (n entries), which lists bucket b's choice indices i
// (their order inside a bucket is unspecified). One block; members ≤ kSortMaxMembers.
absl::Status SortByMember(const int32_t* ids, int64_t n, int members, int member0, int32_t* order,
                          int32_t* offsets, cudaStream_t stream);

// out[t·n + i] = Σ_j weights[t·used + j] · y[(t·used + j)·n + i]: the routed experts' outputs
// combined with their routing weights, float32 accumulation.
absl::Status MoeCombine(const void* y, const float* weights, int64_t tokens, int used, int64_t n,
                        DType act, void* out, cudaStream_t stream);

// Prefill GEMM, same result layout as Gemv: W is dequantized to `act` into `scratch`
// (`scratch_bytes`, as many rows at a time as fit, see GemmScratchRows) and multiplied with
// cublasGemmEx, float32 accumulation. `cublas` must be bound to `stream` by the caller.
absl::Status GemmDequantized(cublasHandle_t cublas, const DeviceMatrix& w, const void* x, DType act,
                             int64_t batch, void* y, void* scratch, size_t scratch_bytes,
                             cudaStream_t stream);

// Prefill GEMM on tensor cores, same result layout as Gemv and GemmDequantized: weight tiles
// are decoded into shared memory as `act` and multiplied with WMMA fragments, float32
// accumulation, no scratch buffer and no cuBLAS (geometry: GemmTilesLaunch). `act` must be
// float16 or bfloat16 (InvalidArgument for float32: callers keep GemmDequantized there).
absl::Status GemmTiles(const DeviceMatrix& w, const void* x, DType act, int64_t batch, void* y,
                       cudaStream_t stream);

// The grouped product of GroupedGemv on tensor cores, for MoE prefill: each member's choices
// (the sorted form is required: order and offsets from SortByMember) go through GemmTiles'
// tile in tiles of kGemmTileTokens, so each expert weight tile is decoded once per 128 of its
// choices instead of once per kGroupedPass (32). Same layout and zero rows for choices outside
// the stack as GroupedGemv; `act` float16 or bfloat16, and the weights are rounded to `act`
// (as GemmTiles does), so results differ from GroupedGemv's by that rounding.
absl::Status GroupedGemmTiles(const GroupedGemvArgs& args, DType act, cudaStream_t stream);

}  // namespace tessera::cuda
