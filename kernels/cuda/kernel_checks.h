// The argument checks of the CUDA launchers (kernels/cuda/*.cu), as plain C++ on plain values,
// so that the real launchers and the CUDA emulator (emu/emu_kernels.cc) run the same checks
// and report the same messages. Errors are InvalidArgument (FailedPrecondition for a device
// too small) naming the kernel ("cuda <kernel>: ..."), the value and the expectation.
// launcher_checks.h applies them to the launchers' argument structs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/kernel_types.h"
#include "kernels/cuda/launch_config.h"

namespace tessera::cuda {

// ---- Glue kernels (glue_kernels.h) ------------------------------------------------------------
// Counts first (≥ 0, their product within int64); when a count is zero the launch is a no-op
// and nothing else is checked (null pointers are fine). Each returns the kernel's launch
// geometry, or kNothingToLaunch.

// grid_x == 0: the arguments are valid and there is no work (the launcher returns OK).
inline constexpr LaunchConfig kNothingToLaunch{.grid_x = 0};

absl::StatusOr<LaunchConfig> CheckAddBias(const void* y, const float* bias, int64_t rows,
                                          int64_t n);
absl::StatusOr<LaunchConfig> CheckRmsNormStrided(const void* x, int64_t x_stride, int64_t rows,
                                                 int64_t n, const void* y, int64_t y_stride);
absl::StatusOr<LaunchConfig> CheckLayerNorm(const float* x, int64_t rows, int64_t n,
                                            const float* y);
// Also: src and dst must not overlap unless from == to and src == dst (nothing to launch).
// The geometry is the conversion kernel's (from == to copies without one).
absl::StatusOr<LaunchConfig> CheckConvert(const void* src, DType from, const void* dst, DType to,
                                          int64_t n);
absl::StatusOr<LaunchConfig> CheckCopyRows(const void* src, int64_t src_stride, const void* dst,
                                           int64_t dst_stride, int64_t rows, int64_t width);
absl::StatusOr<LaunchConfig> CheckGatherRowsByIndex(const void* src, const int32_t* index,
                                                    int64_t count, int64_t n, const void* dst);
absl::StatusOr<LaunchConfig> CheckScale(const float* x, int64_t n);
absl::StatusOr<LaunchConfig> CheckFillHeadIds(const int32_t* ids, int64_t tokens, int used);

// ---- Products (matmul_kernels.h) --------------------------------------------------------------

// Gemv's launch geometry once w's shape and row size pass.
absl::StatusOr<LaunchConfig> CheckGemv(const DeviceMatrix& w, int64_t batch);

// GroupedGemv's shape; x_stride and y_stride are the effective ones (0 already replaced by
// w.cols and w.rows). Returns the launch geometry of one member row block.
struct GroupedGemvCheck {
  size_t member_bytes = 0;
  int members = 0;
  int64_t tokens = 0;
  int used = 0;
  int64_t x_stride = 0;
  int64_t y_stride = 0;
  bool has_ids = false, has_x = false, has_y = false;
  bool has_order = false, has_offsets = false;  // the sorted form: both or neither
};
absl::StatusOr<LaunchConfig> CheckGroupedGemv(const DeviceMatrix& w, const GroupedGemvCheck& g);

// SortByMember: n > 0 choices over 1..kSortMaxMembers members, every pointer given; one block
// of kSortThreads with 2·(members + 1) ints of shared memory.
absl::StatusOr<LaunchConfig> CheckSortByMember(int64_t n, int members, bool has_ids, bool has_order,
                                               bool has_offsets);

// MoeCombine's launch geometry over tokens × n outputs.
absl::StatusOr<LaunchConfig> CheckMoeCombine(int64_t tokens, int used, int64_t n);

// GemmDequantized: the rows of W dequantized per chunk into `scratch_bytes`.
absl::StatusOr<int64_t> CheckGemmDequantized(const DeviceMatrix& w, DType act, int64_t batch,
                                             size_t scratch_bytes);

// GemmTiles (16-bit activations only): its launch geometry.
absl::StatusOr<LaunchConfig> CheckGemmTiles(const DeviceMatrix& w, DType act, int64_t batch);

// GroupedGemmTiles: GroupedGemv's shape in the sorted form, 16-bit activations; the grid
// covers every bucket's token tiles (x) and the row tiles (y).
absl::StatusOr<LaunchConfig> CheckGroupedGemmTiles(const DeviceMatrix& w, const GroupedGemvCheck& g,
                                                   DType act);

// ---- nn_kernels.h -----------------------------------------------------------------------------

absl::StatusOr<LaunchConfig> CheckRope(int64_t tokens, int heads, int head_dim, int n_rot,
                                       const int32_t* positions, const double* theta_scales);

// GatherRows from a quantized table: n ids (≤ INT32_MAX) into `out`.
absl::Status CheckGatherRows(const DeviceMatrix& table, const int32_t* ids, int64_t n,
                             const void* out);

// ---- attention_kernels.h ----------------------------------------------------------------------

// What PagedAttention reads and writes besides its shape.
struct PagedAttentionInputs {
  bool has_q = false, has_out = false, has_k = false, has_v = false;
  bool has_block_table = false, has_query_seq = false, has_query_kv_len = false;
  int max_blocks = 0;
  bool has_selected = false;
  int selected_per_query = 0;
};
// The launch geometry and the kernel's values per lane.
absl::StatusOr<LaunchConfig> CheckPagedAttention(const AttentionShape& shape,
                                                 const PagedAttentionInputs& in, int* per_lane);
// PagedAttentionDecode: PagedAttention's inputs and a workspace of at least one query's
// partials (`workspace_floats`); `chunk` receives the queries per pass it allows.
absl::StatusOr<LaunchConfig> CheckDecodeAttention(const AttentionShape& shape,
                                                  const PagedAttentionInputs& in,
                                                  bool values_in_keys, int64_t workspace_floats,
                                                  int* per_lane, int64_t* chunk);
// PagedAttentionTiled: the same inputs but no selection.
absl::StatusOr<LaunchConfig> CheckTiledAttention(const AttentionShape& shape,
                                                 const PagedAttentionInputs& in,
                                                 bool values_in_keys, int* per_lane);

// PagedAttentionMma: PagedAttentionTiled's inputs, elements of `element_bytes`, a tile within
// the device's `limits` (its opt-in shared memory).
absl::StatusOr<LaunchConfig> CheckMmaAttention(const AttentionShape& shape,
                                               const PagedAttentionInputs& in, bool values_in_keys,
                                               size_t element_bytes, const DeviceLimits& limits);

absl::Status CheckWriteKvCache(int64_t tokens, int kv_heads, int width, int block_size,
                               bool has_src, bool has_cache, bool has_slot_mapping);

// IndexerScores: the bytes of shared memory its block needs (heads × (dim + 1) floats).
absl::StatusOr<size_t> CheckIndexerScores(int64_t queries, int heads, int dim, int64_t n_keys,
                                          int block_size, int max_blocks);

// ---- selection_kernels.h ----------------------------------------------------------------------

absl::StatusOr<LaunchConfig> CheckTopK(int64_t rows, int64_t n, int64_t k);

// `gating` is MoeGating's code (1 softmax, 2 sigmoid).
absl::StatusOr<LaunchConfig> CheckMoeRoute(const MoeShape& shape, int gating, bool has_logits,
                                           bool has_ids, bool has_weights);

absl::StatusOr<LaunchConfig> CheckSample(int64_t sequences, int64_t vocab, const float* logits,
                                         const void* params, const int32_t* tokens);

}  // namespace tessera::cuda
