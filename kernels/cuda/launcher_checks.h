// kernel_checks.h applied to the launchers' argument structs (whose headers include the CUDA
// runtime, which kernel_checks.h must not): one unpacking shared by the .cu launchers and the
// CUDA emulator (emu/emu_kernels.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/kernel_checks.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/nn_kernels.h"
#include "kernels/cuda/selection_kernels.h"

namespace tessera::cuda {

// GroupedGemvArgs as kernel_checks.h's shape, with the effective strides.
inline GroupedGemvCheck GroupedGemvCheckOf(const GroupedGemvArgs& a, int64_t x_stride,
                                           int64_t y_stride) {
  return {.member_bytes = a.member_bytes,
          .members = a.members,
          .tokens = a.tokens,
          .used = a.used,
          .x_stride = x_stride,
          .y_stride = y_stride,
          .has_ids = a.ids != nullptr,
          .has_x = a.x != nullptr,
          .has_y = a.y != nullptr,
          .has_order = a.order != nullptr,
          .has_offsets = a.offsets != nullptr};
}

// The effective strides of a grouped product (the args' 0 meaning w.cols and w.rows).
inline void GroupedStrides(const GroupedGemvArgs& a, int64_t* x_stride, int64_t* y_stride) {
  *x_stride = a.x_stride ? a.x_stride : a.w.cols;
  *y_stride = a.y_stride ? a.y_stride : a.w.rows;
}

// Also sets the effective strides.
inline absl::StatusOr<LaunchConfig> CheckGroupedGemv(const GroupedGemvArgs& a, int64_t* x_stride,
                                                     int64_t* y_stride) {
  GroupedStrides(a, x_stride, y_stride);
  return CheckGroupedGemv(a.w, GroupedGemvCheckOf(a, *x_stride, *y_stride));
}

inline absl::StatusOr<LaunchConfig> CheckGroupedGemmTiles(const GroupedGemvArgs& a, DType act,
                                                          int64_t* x_stride, int64_t* y_stride) {
  GroupedStrides(a, x_stride, y_stride);
  return CheckGroupedGemmTiles(a.w, GroupedGemvCheckOf(a, *x_stride, *y_stride), act);
}

inline absl::StatusOr<LaunchConfig> CheckRope(const RopeArgs& a) {
  return CheckRope(a.tokens, a.heads, a.head_dim, a.n_rot, a.positions, a.theta_scales);
}

// PagedAttentionArgs as kernel_checks.h's shape and inputs.
inline AttentionShape ShapeOf(const PagedAttentionArgs& a) {
  return {.queries = a.queries,
          .heads = a.heads,
          .kv_heads = a.kv_heads,
          .d_k = a.d_k,
          .d_v = a.d_v,
          .block_size = a.block_size,
          .head0 = a.head0,
          .group = a.group};
}
inline PagedAttentionInputs InputsOf(const PagedAttentionArgs& a) {
  return {.has_q = a.q != nullptr,
          .has_out = a.out != nullptr,
          .has_k = a.k.base != nullptr,
          .has_v = a.v.base != nullptr,
          .has_block_table = a.block_table != nullptr,
          .has_query_seq = a.query_seq != nullptr,
          .has_query_kv_len = a.query_kv_len != nullptr,
          .max_blocks = a.max_blocks,
          .has_selected = a.selected != nullptr,
          .selected_per_query = a.selected_per_query};
}

inline absl::StatusOr<LaunchConfig> CheckPagedAttention(const PagedAttentionArgs& a,
                                                        int* per_lane) {
  return CheckPagedAttention(ShapeOf(a), InputsOf(a), per_lane);
}

// MLA: the values are the keys' first d_v values (the same cache and strides).
inline bool ValuesInKeys(const PagedAttentionArgs& a) {
  return a.v.base == a.k.base && a.v.block_stride == a.k.block_stride &&
         a.v.token_stride == a.k.token_stride && a.v.head_stride == a.k.head_stride &&
         a.d_v <= a.d_k;
}

// A null workspace counts as none (the check then names the floats one query needs).
inline absl::StatusOr<LaunchConfig> CheckDecodeAttention(const PagedAttentionArgs& a,
                                                         const float* workspace,
                                                         int64_t workspace_floats, int* per_lane,
                                                         int64_t* chunk) {
  return CheckDecodeAttention(ShapeOf(a), InputsOf(a), ValuesInKeys(a),
                              workspace != nullptr ? workspace_floats : 0, per_lane, chunk);
}

inline absl::StatusOr<LaunchConfig> CheckTiledAttention(const PagedAttentionArgs& a,
                                                        int* per_lane) {
  return CheckTiledAttention(ShapeOf(a), InputsOf(a), ValuesInKeys(a), per_lane);
}

inline absl::StatusOr<LaunchConfig> CheckMmaAttention(const PagedAttentionArgs& a, DType dtype,
                                                      const DeviceLimits& limits) {
  return CheckMmaAttention(ShapeOf(a), InputsOf(a), ValuesInKeys(a), DTypeBytes(dtype), limits);
}

inline absl::Status CheckWriteKvCache(const KvWriteArgs& a) {
  return CheckWriteKvCache(a.tokens, a.kv_heads, a.width, a.block_size, a.src != nullptr,
                           a.cache != nullptr, a.slot_mapping != nullptr);
}

inline absl::StatusOr<size_t> CheckIndexerScores(const IndexerScoreArgs& a) {
  return CheckIndexerScores(a.queries, a.heads, a.dim, a.n_keys, a.block_size, a.max_blocks);
}

static_assert(static_cast<int>(MoeGating::kSoftmax) == 1 &&
              static_cast<int>(MoeGating::kSigmoid) == 2);  // CheckMoeRoute's codes
inline absl::StatusOr<LaunchConfig> CheckMoeRoute(const MoeRoutingArgs& a) {
  return CheckMoeRoute({.tokens = a.tokens,
                        .experts = a.experts,
                        .used = a.used,
                        .groups = a.groups,
                        .topk_groups = a.topk_groups},
                       static_cast<int>(a.gating), a.logits != nullptr, a.ids != nullptr,
                       a.weights != nullptr);
}

}  // namespace tessera::cuda
