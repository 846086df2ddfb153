#include "kernels/cuda/kernel_checks.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/util/status_macros.h"

namespace tessera::cuda {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
  }
  return "?";
}

namespace {

absl::Status Invalid(const char* kernel, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("cuda ", kernel, ": ", what));
}

// The decoders read float32 weights as floats, 16-bit ones and every block's fp16 scales as
// 16-bit words: a misaligned address is a device fault that poisons the context, so it is
// refused here. Every block size is even; `bytes` (a stride between matrices) must keep the
// alignment too.
absl::Status CheckWeightAlignment(const char* kernel, const DeviceMatrix& w, size_t bytes = 0) {
  const size_t align = w.type == gguf::GgmlType::kF32 ? 4 : 2;
  const auto at = reinterpret_cast<uintptr_t>(w.data);
  if (at % align != 0 || w.row_bytes % align != 0 || bytes % align != 0) {
    return Invalid(kernel,
                   absl::StrCat("weights at address ", at, ", rows of ", w.row_bytes,
                                " bytes, stride ", bytes, ": expected multiples of ", align));
  }
  return absl::OkStatus();
}

// Counts first: negative is an error, and the product (elements touched) must fit int64.
absl::Status CheckCounts(const char* kernel, int64_t rows, const char* rows_name, int64_t n,
                         const char* n_name) {
  if (rows < 0 || n < 0) {
    return Invalid(kernel, absl::StrCat(rows, " ", rows_name, " of ", n, " ", n_name,
                                        ": expected counts ≥ 0"));
  }
  if (n > 0 && rows > INT64_MAX / n) {
    return Invalid(kernel,
                   absl::StrCat(rows, " ", rows_name, " of ", n, " ", n_name, " overflow int64"));
  }
  return absl::OkStatus();
}

// Rows of `width` read or written `stride` elements apart (rows > 0, width > 0).
absl::Status CheckStride(const char* kernel, const char* what, int64_t stride, int64_t rows,
                         int64_t width) {
  if (stride < width) {
    return Invalid(kernel, absl::StrCat(what, " stride ", stride, " is shorter than the row of ",
                                        width, " elements"));
  }
  if (rows - 1 > (INT64_MAX - width) / stride) {
    return Invalid(kernel, absl::StrCat(rows, " rows ", stride, " elements apart overflow int64"));
  }
  return absl::OkStatus();
}

absl::Status CheckPointer(const char* kernel, const char* what, const void* ptr) {
  if (ptr == nullptr) return Invalid(kernel, absl::StrCat(what, " is null"));
  return absl::OkStatus();
}

// `rows` rows of `width` read from `from` and written to `to`, each `..._stride` elements
// apart: counts, then (unless empty) strides, then pointers.
absl::Status CheckRowCopy(const char* kernel, int64_t rows, int64_t width, const char* from_name,
                          const void* from, int64_t from_stride, const char* to_name,
                          const void* to, int64_t to_stride) {
  if (absl::Status s = CheckCounts(kernel, rows, "rows", width, "values"); !s.ok()) return s;
  if (rows == 0 || width == 0) return absl::OkStatus();
  if (absl::Status s = CheckStride(kernel, from_name, from_stride, rows, width); !s.ok()) return s;
  if (absl::Status s = CheckStride(kernel, to_name, to_stride, rows, width); !s.ok()) return s;
  if (absl::Status s = CheckPointer(kernel, from_name, from); !s.ok()) return s;
  return CheckPointer(kernel, to_name, to);
}

absl::Status CheckCount(const char* kernel, int64_t n, const char* what) {
  if (n < 0) return Invalid(kernel, absl::StrCat(n, " ", what, ": expected a count ≥ 0"));
  return absl::OkStatus();
}

}  // namespace

// ---- Glue kernels -----------------------------------------------------------------------------

absl::StatusOr<LaunchConfig> CheckAddBias(const void* y, const float* bias, int64_t rows,
                                          int64_t n) {
  constexpr const char* kKernel = "add bias";
  TESSERA_RETURN_IF_ERROR(CheckCounts(kKernel, rows, "rows", n, "values"));
  if (rows == 0 || n == 0) return kNothingToLaunch;
  TESSERA_RETURN_IF_ERROR(CheckPointer(kKernel, "y", y));
  TESSERA_RETURN_IF_ERROR(CheckPointer(kKernel, "bias", bias));
  return ElementwiseLaunch(kKernel, rows * n);
}

absl::StatusOr<LaunchConfig> CheckRmsNormStrided(const void* x, int64_t x_stride, int64_t rows,
                                                 int64_t n, const void* y, int64_t y_stride) {
  constexpr const char* kKernel = "rmsnorm strided";
  TESSERA_RETURN_IF_ERROR(CheckRowCopy(kKernel, rows, n, "x", x, x_stride, "y", y, y_stride));
  if (rows == 0 || n == 0) return kNothingToLaunch;
  if (x == y && x_stride != y_stride) {
    // Row r would overwrite rows that other blocks are still reading.
    return Invalid(kKernel, absl::StrCat("in place with x stride ", x_stride, " and y stride ",
                                         y_stride, ": expected equal strides"));
  }
  return RowLaunch(kKernel, rows, n);
}

absl::StatusOr<LaunchConfig> CheckLayerNorm(const float* x, int64_t rows, int64_t n,
                                            const float* y) {
  constexpr const char* kKernel = "layernorm";
  TESSERA_RETURN_IF_ERROR(CheckCounts(kKernel, rows, "rows", n, "values"));
  if (rows == 0 || n == 0) return kNothingToLaunch;
  TESSERA_RETURN_IF_ERROR(CheckPointer(kKernel, "x", x));
  TESSERA_RETURN_IF_ERROR(CheckPointer(kKernel, "y", y));
  return RowLaunch(kKernel, rows, n);
}

absl::StatusOr<LaunchConfig> CheckConvert(const void* src, DType from, const void* dst, DType to,
                                          int64_t n) {
  constexpr const char* kKernel = "convert";
  TESSERA_RETURN_IF_ERROR(CheckCount(kKernel, n, "values"));
  if (n == 0) return kNothingToLaunch;
  if (n > INT64_MAX / 4) return Invalid(kKernel, absl::StrCat(n, " values overflow int64 bytes"));
  TESSERA_RETURN_IF_ERROR(CheckPointer(kKernel, "src", src));
  TESSERA_RETURN_IF_ERROR(CheckPointer(kKernel, "dst", dst));
  if (from == to && src == dst) return kNothingToLaunch;  // nothing changes
  const auto src_begin = reinterpret_cast<uintptr_t>(src);
  const auto dst_begin = reinterpret_cast<uintptr_t>(dst);
  const uintptr_t src_end = src_begin + static_cast<uintptr_t>(n) * DTypeBytes(from);
  const uintptr_t dst_end = dst_begin + static_cast<uintptr_t>(n) * DTypeBytes(to);
  if (src_begin < dst_end && dst_begin < src_end) {
    return Invalid(kKernel, absl::StrCat(n, " values from ", DTypeName(from), " to ", DTypeName(to),
                                         ": src and dst overlap (only from == to in place)"));
  }
  return ElementwiseLaunch(kKernel, n);  // cannot fail for n > 0
}

absl::StatusOr<LaunchConfig> CheckCopyRows(const void* src, int64_t src_stride, const void* dst,
                                           int64_t dst_stride, int64_t rows, int64_t width) {
  constexpr const char* kKernel = "copy rows";
  TESSERA_RETURN_IF_ERROR(
      CheckRowCopy(kKernel, rows, width, "src", src, src_stride, "dst", dst, dst_stride));
  if (rows == 0 || width == 0) return kNothingToLaunch;
  return RowLaunch(kKernel, rows, width);
}

absl::StatusOr<LaunchConfig> CheckGatherRowsByIndex(const void* src, const int32_t* index,
                                                    int64_t count, int64_t n, const void* dst) {
  constexpr const char* kKernel = "gather rows by index";
  TESSERA_RETURN_IF_ERROR(CheckCounts(kKernel, count, "rows", n, "values"));
  if (count == 0 || n == 0) return kNothingToLaunch;
  TESSERA_RETURN_IF_ERROR(CheckPointer(kKernel, "src", src));
  TESSERA_RETURN_IF_ERROR(CheckPointer(kKernel, "index", index));
  TESSERA_RETURN_IF_ERROR(CheckPointer(kKernel, "dst", dst));
  return RowLaunch(kKernel, count, n);
}

absl::StatusOr<LaunchConfig> CheckScale(const float* x, int64_t n) {
  constexpr const char* kKernel = "scale";
  TESSERA_RETURN_IF_ERROR(CheckCount(kKernel, n, "values"));
  if (n == 0) return kNothingToLaunch;
  TESSERA_RETURN_IF_ERROR(CheckPointer(kKernel, "x", x));
  return ElementwiseLaunch(kKernel, n);
}

absl::StatusOr<LaunchConfig> CheckFillHeadIds(const int32_t* ids, int64_t tokens, int used) {
  constexpr const char* kKernel = "fill head ids";
  TESSERA_RETURN_IF_ERROR(CheckCounts(kKernel, tokens, "tokens", used, "heads"));
  if (tokens == 0 || used == 0) return kNothingToLaunch;
  TESSERA_RETURN_IF_ERROR(CheckPointer(kKernel, "ids", ids));
  return ElementwiseLaunch(kKernel, tokens * used);
}

// ---- Products ---------------------------------------------------------------------------------

absl::StatusOr<LaunchConfig> CheckGemv(const DeviceMatrix& w, int64_t batch) {
  absl::StatusOr<LaunchConfig> c = GemvLaunch(w.type, w.rows, w.cols, batch);
  if (!c.ok()) return c.status();
  TESSERA_RETURN_IF_ERROR(CheckRowBytes(w.type, w.cols, w.row_bytes, "gemv"));
  TESSERA_RETURN_IF_ERROR(CheckWeightAlignment("gemv", w));
  return c;
}

absl::StatusOr<LaunchConfig> CheckGroupedGemv(const DeviceMatrix& w, const GroupedGemvCheck& g) {
  absl::StatusOr<LaunchConfig> c = GemvLaunch(w.type, w.rows, w.cols, 1);
  if (!c.ok()) return c.status();
  TESSERA_RETURN_IF_ERROR(CheckRowBytes(w.type, w.cols, w.row_bytes, "grouped gemv"));
  TESSERA_RETURN_IF_ERROR(CheckWeightAlignment("grouped gemv", w, g.member_bytes));
  if (g.members <= 0 || g.tokens <= 0 || g.used <= 0 || g.tokens > INT64_MAX / g.used ||
      g.member_bytes < static_cast<size_t>(w.rows) * w.row_bytes || g.x_stride < w.cols ||
      g.y_stride < w.rows || !g.has_ids || !g.has_x || !g.has_y) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda grouped gemv: ", g.members, " members of ", g.member_bytes, " bytes (one needs ",
        static_cast<size_t>(w.rows) * w.row_bytes, "), ", g.tokens, " tokens x ", g.used,
        " choices, x stride ", g.x_stride, " (≥ ", w.cols, "), y stride ", g.y_stride, " (≥ ",
        w.rows, "), ids/x/y given: expected all to hold"));
  }
  if (g.has_order != g.has_offsets) {
    return absl::InvalidArgumentError(
        "cuda grouped gemv: the sorted form needs both order and offsets (SortByMember's)");
  }
  if (g.has_order && g.members + 1 > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda grouped gemv: ", g.members, " members sorted: at most 65534"));
  }
  return c;
}

absl::StatusOr<LaunchConfig> CheckSortByMember(int64_t n, int members, bool has_ids, bool has_order,
                                               bool has_offsets) {
  if (n <= 0 || n > INT32_MAX || members <= 0 || members > kSortMaxMembers || !has_ids ||
      !has_order || !has_offsets) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda sort by member: ", n, " choices over ", members, " members (expected 1..", INT32_MAX,
        " choices, 1..", kSortMaxMembers, " members; ids, order and offsets given)"));
  }
  LaunchConfig c;
  c.block = kSortThreads;
  c.grid_x = 1;
  c.shared_bytes = 2 * static_cast<size_t>(members + 1) * sizeof(int);
  return c;
}

absl::StatusOr<LaunchConfig> CheckMoeCombine(int64_t tokens, int used, int64_t n) {
  absl::StatusOr<LaunchConfig> c = ElementwiseLaunch("moe combine", tokens * n);
  if (!c.ok()) return c.status();
  if (used <= 0) return absl::InvalidArgumentError("cuda moe combine: used must be positive");
  return c;
}

absl::StatusOr<int64_t> CheckGemmDequantized(const DeviceMatrix& w, DType act, int64_t batch,
                                             size_t scratch_bytes) {
  if (batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda gemm: batch ", batch, ": expected a positive count"));
  }
  absl::StatusOr<int64_t> chunk = GemmScratchRows(w.rows, w.cols, DTypeBytes(act), scratch_bytes);
  if (!chunk.ok()) return chunk.status();
  TESSERA_RETURN_IF_ERROR(CheckRowBytes(w.type, w.cols, w.row_bytes, "gemm"));
  return chunk;
}

absl::StatusOr<LaunchConfig> CheckGemmTiles(const DeviceMatrix& w, DType act, int64_t batch) {
  if (act == DType::kF32) {
    return absl::InvalidArgumentError(
        "cuda gemm tiles: float32 activations: expected float16 or bfloat16 (tensor-core "
        "fragments are 16-bit; use GemmDequantized for float32)");
  }
  absl::StatusOr<LaunchConfig> c = GemmTilesLaunch(w.type, w.rows, w.cols, batch);
  if (!c.ok()) return c.status();
  TESSERA_RETURN_IF_ERROR(CheckRowBytes(w.type, w.cols, w.row_bytes, "gemm tiles"));
  TESSERA_RETURN_IF_ERROR(CheckWeightAlignment("gemm tiles", w));
  return c;
}

absl::StatusOr<LaunchConfig> CheckGroupedGemmTiles(const DeviceMatrix& w, const GroupedGemvCheck& g,
                                                   DType act) {
  TESSERA_RETURN_IF_ERROR(CheckGroupedGemv(w, g).status());
  if (!g.has_order) {
    return absl::InvalidArgumentError(
        "cuda grouped gemm tiles: needs the choices sorted by member (order and offsets from "
        "SortByMember)");
  }
  const int64_t choices = g.tokens * g.used;
  TESSERA_RETURN_IF_ERROR(CheckGemmTiles(w, act, choices).status());  // types, rows, alignment
  return GroupedGemmTilesLaunch(w.type, w.rows, w.cols, choices, g.members);
}

// ---- nn_kernels.h -----------------------------------------------------------------------------

absl::StatusOr<LaunchConfig> CheckRope(int64_t tokens, int heads, int head_dim, int n_rot,
                                       const int32_t* positions, const double* theta_scales) {
  absl::StatusOr<LaunchConfig> c = RopeLaunch(tokens, heads, head_dim, n_rot);
  if (!c.ok()) return c.status();
  if (positions == nullptr || theta_scales == nullptr) {
    return absl::InvalidArgumentError("cuda rope: positions and theta scales are required");
  }
  return c;
}

absl::Status CheckGatherRows(const DeviceMatrix& table, const int32_t* ids, int64_t n,
                             const void* out) {
  TESSERA_RETURN_IF_ERROR(CheckRowBytes(table.type, table.cols, table.row_bytes, "gather rows"));
  TESSERA_RETURN_IF_ERROR(CheckWeightAlignment("gather rows", table));
  if (n <= 0 || n > INT32_MAX || table.rows <= 0 || !ids || !out) {
    return absl::InvalidArgumentError(absl::StrCat("cuda gather rows: ", n, " ids from ",
                                                   table.rows,
                                                   " rows: expected positive counts, ids, out"));
  }
  return absl::OkStatus();
}

// ---- attention_kernels.h ----------------------------------------------------------------------

absl::StatusOr<LaunchConfig> CheckPagedAttention(const AttentionShape& shape,
                                                 const PagedAttentionInputs& in, int* per_lane) {
  absl::StatusOr<LaunchConfig> c = AttentionLaunch(shape, per_lane);
  if (!c.ok()) return c.status();
  if (!in.has_q || !in.has_out || !in.has_k || !in.has_v || !in.has_block_table ||
      !in.has_query_seq || !in.has_query_kv_len || in.max_blocks <= 0) {
    return absl::InvalidArgumentError(
        "cuda attention: q, out, caches, block table, query_seq and query_kv_len are required");
  }
  if (in.has_selected && in.selected_per_query <= 0) {
    return absl::InvalidArgumentError("cuda attention: a selection needs selected_per_query > 0");
  }
  return c;
}

absl::StatusOr<LaunchConfig> CheckDecodeAttention(const AttentionShape& shape,
                                                  const PagedAttentionInputs& in,
                                                  bool values_in_keys, int64_t workspace_floats,
                                                  int* per_lane, int64_t* chunk) {
  int unused = 0;
  if (absl::StatusOr<LaunchConfig> c = CheckPagedAttention(shape, in, &unused); !c.ok()) {
    return c.status();
  }
  const int64_t per_query = static_cast<int64_t>(shape.heads) * DecodePartialFloats(shape.d_v);
  if (workspace_floats < per_query) {
    return absl::InvalidArgumentError(absl::StrCat("cuda decode attention: the workspace holds ",
                                                   workspace_floats, " floats, one query of ",
                                                   shape.heads, " heads needs ", per_query));
  }
  *chunk = std::min<int64_t>(shape.queries, workspace_floats / per_query);
  return DecodeAttentionLaunch(shape, values_in_keys, per_lane);
}

namespace {

// A prompt's attention kernel (`kernel`): PagedAttention's inputs without a selection.
absl::Status CheckPromptAttention(const char* kernel, const AttentionShape& shape,
                                  const PagedAttentionInputs& in) {
  int unused = 0;
  TESSERA_RETURN_IF_ERROR(CheckPagedAttention(shape, in, &unused).status());
  if (in.has_selected) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda ", kernel,
                     ": no key selection (DSA's selections differ per query; use "
                     "PagedAttentionDecode)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LaunchConfig> CheckTiledAttention(const AttentionShape& shape,
                                                 const PagedAttentionInputs& in,
                                                 bool values_in_keys, int* per_lane) {
  TESSERA_RETURN_IF_ERROR(CheckPromptAttention("tiled attention", shape, in));
  return TiledAttentionLaunch(shape, values_in_keys, per_lane);
}

absl::StatusOr<LaunchConfig> CheckMmaAttention(const AttentionShape& shape,
                                               const PagedAttentionInputs& in, bool values_in_keys,
                                               size_t element_bytes, const DeviceLimits& limits) {
  TESSERA_RETURN_IF_ERROR(CheckPromptAttention("tensor-core attention", shape, in));
  return MmaAttentionLaunch(shape, values_in_keys, element_bytes, limits);
}

absl::Status CheckWriteKvCache(int64_t tokens, int kv_heads, int width, int block_size,
                               bool has_src, bool has_cache, bool has_slot_mapping) {
  if (tokens <= 0 || kv_heads <= 0 || width <= 0 || block_size <= 0 || !has_src || !has_cache ||
      !has_slot_mapping || kv_heads > 65535 || tokens > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda kv write: ", tokens, " tokens x ", kv_heads, " heads of ", width, ", block size ",
        block_size, ": expected positive sizes and src, cache, slots"));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> CheckIndexerScores(int64_t queries, int heads, int dim, int64_t n_keys,
                                          int block_size, int max_blocks) {
  if (queries <= 0 || heads <= 0 || dim <= 0 || n_keys <= 0 || block_size <= 0 || max_blocks <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda indexer scores: queries ", queries, ", heads ", heads, ", dim ", dim,
                     ", keys ", n_keys, ", block size ", block_size, ": expected positive values"));
  }
  const size_t shared = static_cast<size_t>(heads) * (dim + 1) * sizeof(float);
  if (shared > 48 * 1024) {
    return absl::InvalidArgumentError(absl::StrCat("cuda indexer scores: ", heads, " heads of ",
                                                   dim, " need ", shared,
                                                   " bytes of shared memory, more than 48 KiB"));
  }
  return shared;
}

// ---- selection_kernels.h ----------------------------------------------------------------------

absl::StatusOr<LaunchConfig> CheckTopK(int64_t rows, int64_t n, int64_t k) {
  absl::StatusOr<LaunchConfig> c = TopKLaunch(rows, n, k);
  if (!c.ok()) return c.status();
  if (c->block != kTopKThreads) {
    return absl::FailedPreconditionError("cuda top-k: the device allows fewer than 512 threads");
  }
  return c;
}

absl::StatusOr<LaunchConfig> CheckMoeRoute(const MoeShape& shape, int gating, bool has_logits,
                                           bool has_ids, bool has_weights) {
  absl::StatusOr<LaunchConfig> c = MoeRoutingLaunch(shape);
  if (!c.ok()) return c.status();
  if (!has_logits || !has_ids || !has_weights) {
    return absl::InvalidArgumentError("cuda moe routing: logits, ids and weights are required");
  }
  if (gating != 1 && gating != 2) {
    return absl::InvalidArgumentError(
        "cuda moe routing: gating must be softmax (1) or sigmoid (2)");
  }
  return c;
}

absl::StatusOr<LaunchConfig> CheckSample(int64_t sequences, int64_t vocab, const float* logits,
                                         const void* params, const int32_t* tokens) {
  absl::StatusOr<LaunchConfig> c = SamplingLaunch(sequences, vocab);
  if (!c.ok()) return c.status();
  if (c->block != kSamplingThreads) {
    return absl::FailedPreconditionError(
        "cuda sampling: the device allows fewer than 1024 threads");
  }
  if (!logits || !params || !tokens) {
    return absl::InvalidArgumentError("cuda sampling: logits, params and tokens are required");
  }
  return c;
}

#undef TESSERA_RETURN_IF_ERROR

}  // namespace tessera::cuda
