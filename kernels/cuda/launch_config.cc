#include "kernels/cuda/launch_config.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/quant/blocks.h"

namespace tessera::cuda {
namespace {

using gguf::GgmlType;

struct CudaType {
  GgmlType type;
  const char* name;
  QuantGeometry geometry;
};

// The weight types the CUDA decoders handle (kernels/cuda/quant_decode.cuh), with the block
// sizes of common/quant/blocks.h.
constexpr CudaType kCudaTypes[] = {
    {GgmlType::kF32, "f32", {1, 4}},
    {GgmlType::kF16, "f16", {1, 2}},
    {GgmlType::kBF16, "bf16", {1, 2}},
    {GgmlType::kQ4_0, "q4_0", {quant::kQK, sizeof(quant::BlockQ4_0)}},
    {GgmlType::kQ4_1, "q4_1", {quant::kQK, sizeof(quant::BlockQ4_1)}},
    {GgmlType::kQ5_0, "q5_0", {quant::kQK, sizeof(quant::BlockQ5_0)}},
    {GgmlType::kQ5_1, "q5_1", {quant::kQK, sizeof(quant::BlockQ5_1)}},
    {GgmlType::kQ8_0, "q8_0", {quant::kQK, sizeof(quant::BlockQ8_0)}},
    {GgmlType::kQ2_K, "q2_K", {quant::kQKK, sizeof(quant::BlockQ2_K)}},
    {GgmlType::kQ3_K, "q3_K", {quant::kQKK, sizeof(quant::BlockQ3_K)}},
    {GgmlType::kQ4_K, "q4_K", {quant::kQKK, sizeof(quant::BlockQ4_K)}},
    {GgmlType::kQ5_K, "q5_K", {quant::kQKK, sizeof(quant::BlockQ5_K)}},
    {GgmlType::kQ6_K, "q6_K", {quant::kQKK, sizeof(quant::BlockQ6_K)}},
    {GgmlType::kIQ4_NL, "iq4_nl", {quant::kQK, sizeof(quant::BlockIQ4_NL)}},
    {GgmlType::kIQ4_XS, "iq4_xs", {quant::kQKK, sizeof(quant::BlockIQ4_XS)}},
};

const CudaType* FindType(GgmlType type) {
  for (const CudaType& t : kCudaTypes) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

absl::Status Invalid(const char* kernel, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("cuda ", kernel, ": ", what));
}

// A grid of `blocks` along x must fit the device; larger problems would need a second
// dimension the kernels do not use.
absl::Status CheckGridX(const char* kernel, int64_t blocks, const DeviceLimits& limits) {
  if (blocks > limits.max_grid_x) {
    return Invalid(
        kernel, absl::StrCat("needs ", blocks, " blocks, the device allows ", limits.max_grid_x));
  }
  return absl::OkStatus();
}

// A weight type the decoders handle, positive sizes and whole blocks per row: what every
// matrix-product kernel relies on.
absl::Status CheckMatmulShape(const char* kernel, GgmlType type, int64_t rows, int64_t cols,
                              int64_t batch) {
  const CudaType* t = FindType(type);
  if (t == nullptr) return CudaQuantGeometry(type).status();
  if (rows <= 0 || cols <= 0 || batch <= 0) {
    return Invalid(kernel, absl::StrCat("shape ", rows, " x ", cols, " batch ", batch,
                                        ": expected positive sizes"));
  }
  if (cols % t->geometry.block_elems != 0) {
    return Invalid(kernel,
                   absl::StrCat("row length ", cols, " of ", t->name,
                                " is not a multiple of its block (", t->geometry.block_elems, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<QuantGeometry> CudaQuantGeometry(GgmlType type) {
  const CudaType* t = FindType(type);
  if (t == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda: ggml type id ", static_cast<uint32_t>(type),
                     " has no CUDA decoder (supported: f32, f16, "
                     "bf16, q4_0..q8_0, q2_K..q6_K, iq4_nl, iq4_xs)"));
  }
  return t->geometry;
}

absl::Status CheckRowBytes(GgmlType type, int64_t cols, size_t row_bytes, const char* what) {
  absl::StatusOr<QuantGeometry> g = CudaQuantGeometry(type);
  if (!g.ok()) return g.status();
  if (cols <= 0 || cols % g->block_elems != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda: ", what, ": row of ", cols, " ", FindType(type)->name,
                     " values is not a whole number of ", g->block_elems, "-element blocks"));
  }
  const uint64_t expected = static_cast<uint64_t>(cols / g->block_elems) * g->block_bytes;
  if (row_bytes != expected) {
    return absl::InvalidArgumentError(absl::StrCat("cuda: ", what, ": rows of ", cols, " ",
                                                   FindType(type)->name, " values take ", expected,
                                                   " bytes, the matrix says ", row_bytes));
  }
  return absl::OkStatus();
}

absl::Status CheckAlignment(const void* ptr, size_t alignment, const char* what) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  if (alignment == 0 || address % alignment == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("cuda: ", what, " at 0x", absl::Hex(address),
                                                 " is not ", alignment, "-byte aligned"));
}

absl::StatusOr<LaunchConfig> DequantizeLaunch(GgmlType type, int64_t n_elements,
                                              const DeviceLimits& limits) {
  absl::StatusOr<QuantGeometry> g = CudaQuantGeometry(type);
  if (!g.ok()) return g.status();
  if (n_elements <= 0 || n_elements % g->block_elems != 0) {
    return Invalid("dequantize",
                   absl::StrCat(n_elements, " elements of ", FindType(type)->name,
                                ": expected a positive multiple of ", g->block_elems));
  }
  LaunchConfig c;
  c.block = 256;
  c.grid_x = CeilDiv(n_elements, c.block);
  if (auto s = CheckGridX("dequantize", c.grid_x, limits); !s.ok()) return s;
  return c;
}

absl::StatusOr<LaunchConfig> GemvLaunch(GgmlType type, int64_t rows, int64_t cols, int64_t batch,
                                        const DeviceLimits& limits) {
  if (auto s = CheckMatmulShape("gemv", type, rows, cols, batch); !s.ok()) return s;
  LaunchConfig c;
  c.block = kGemvWarps * kWarpSize;
  c.grid_x = CeilDiv(rows, kGemvWarps);
  if (auto s = CheckGridX("gemv", c.grid_x, limits); !s.ok()) return s;
  return c;
}

absl::StatusOr<int64_t> GemmScratchRows(int64_t rows, int64_t cols, size_t element_bytes,
                                        size_t scratch_bytes) {
  if (rows <= 0 || cols <= 0 || element_bytes == 0) {
    return Invalid("gemm", absl::StrCat("shape ", rows, " x ", cols, " with ", element_bytes,
                                        "-byte elements: expected positive sizes"));
  }
  const uint64_t row_bytes = static_cast<uint64_t>(cols) * element_bytes;
  if (scratch_bytes < row_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("cuda gemm: the dequantization scratch holds ",
                                                     scratch_bytes, " bytes, one weight row of ",
                                                     cols, " values needs ", row_bytes));
  }
  return std::min<int64_t>(rows, static_cast<int64_t>(scratch_bytes / row_bytes));
}

absl::StatusOr<LaunchConfig> GemmTilesLaunch(GgmlType type, int64_t rows, int64_t cols,
                                             int64_t batch, const DeviceLimits& limits) {
  if (auto s = CheckMatmulShape("gemm tiles", type, rows, cols, batch); !s.ok()) return s;
  LaunchConfig c;
  c.block = kGemmTileWarps * kWarpSize;
  c.grid_x = CeilDiv(batch, kGemmTileTokens);
  c.grid_y = CeilDiv(rows, kGemmTileRows);
  if (auto s = CheckGridX("gemm tiles", c.grid_x, limits); !s.ok()) return s;
  if (c.grid_y > limits.max_grid_y) {
    return Invalid("gemm tiles",
                   absl::StrCat(rows, " rows need ", c.grid_y, " row tiles of ", kGemmTileRows,
                                ", the device allows ", limits.max_grid_y));
  }
  if (c.block > limits.max_threads_per_block || GemmTilesSharedBytes() > limits.max_shared_bytes) {
    return Invalid("gemm tiles",
                   absl::StrCat("blocks of ", c.block, " threads and ", GemmTilesSharedBytes(),
                                " bytes of shared memory exceed the device's ",
                                limits.max_threads_per_block, " and ", limits.max_shared_bytes));
  }
  return c;
}

absl::StatusOr<LaunchConfig> GroupedGemmTilesLaunch(GgmlType type, int64_t rows, int64_t cols,
                                                    int64_t choices, int members,
                                                    const DeviceLimits& limits) {
  absl::StatusOr<LaunchConfig> c = GemmTilesLaunch(type, rows, cols, choices, limits);
  if (!c.ok()) return c.status();
  c->grid_x = CeilDiv(choices, kGemmTileTokens) + members + 1;
  if (auto s = CheckGridX("grouped gemm tiles", c->grid_x, limits); !s.ok()) return s;
  return c;
}

absl::StatusOr<LaunchConfig> RowLaunch(const char* kernel, int64_t rows, int64_t n,
                                       const DeviceLimits& limits) {
  if (rows <= 0 || n <= 0) {
    return Invalid(kernel, absl::StrCat(rows, " rows of ", n, ": expected positive sizes"));
  }
  if (rows > limits.max_grid_x) {
    return Invalid(kernel, absl::StrCat(rows, " rows exceed the grid limit ", limits.max_grid_x));
  }
  LaunchConfig c;
  c.grid_x = rows;
  int threads = kWarpSize;
  while (threads < n && threads < limits.max_threads_per_block) threads *= 2;
  c.block = threads;
  c.shared_bytes = static_cast<size_t>(threads / kWarpSize) * sizeof(float);
  return c;
}

absl::StatusOr<LaunchConfig> ElementwiseLaunch(const char* kernel, int64_t n,
                                               const DeviceLimits& limits) {
  if (n <= 0) return Invalid(kernel, absl::StrCat(n, " elements: expected a positive count"));
  LaunchConfig c;
  c.block = 256;
  // Grid-stride loops cover the rest when the grid is capped.
  c.grid_x = std::min<int64_t>(CeilDiv(n, c.block), limits.max_grid_x);
  return c;
}

absl::StatusOr<LaunchConfig> RopeLaunch(int64_t tokens, int heads, int head_dim, int n_rot,
                                        const DeviceLimits& limits) {
  if (tokens <= 0 || heads <= 0 || head_dim <= 0) {
    return Invalid("rope", absl::StrCat(tokens, " tokens x ", heads, " heads of ", head_dim,
                                        ": expected positive sizes"));
  }
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim) {
    return Invalid("rope", absl::StrCat("n_rot ", n_rot,
                                        ": expected a positive even count ≤ "
                                        "the head dimension ",
                                        head_dim));
  }
  if (heads > limits.max_grid_y) {
    return Invalid("rope", absl::StrCat(heads, " heads exceed the grid limit ", limits.max_grid_y));
  }
  if (n_rot / 2 > limits.max_threads_per_block) {
    return Invalid("rope", absl::StrCat("n_rot ", n_rot, " needs ", n_rot / 2,
                                        " threads per block, the device allows ",
                                        limits.max_threads_per_block));
  }
  if (auto s = CheckGridX("rope", tokens, limits); !s.ok()) return s;
  LaunchConfig c;
  c.grid_x = tokens;
  c.grid_y = heads;
  c.block = std::max(kWarpSize, (n_rot / 2 + kWarpSize - 1) / kWarpSize * kWarpSize);
  return c;
}

absl::StatusOr<LaunchConfig> TiledAttentionLaunch(const AttentionShape& s, bool values_in_keys,
                                                  int* per_lane, const DeviceLimits& limits) {
  absl::StatusOr<LaunchConfig> one = AttentionLaunch(s, per_lane, limits);  // shape checks
  if (!one.ok()) return one.status();
  LaunchConfig c;
  c.grid_x = CeilDiv(s.queries, kTiledQueries);
  c.grid_y = s.heads;
  c.block = kTiledWarps * kWarpSize;
  c.shared_bytes =
      static_cast<size_t>(kTiledKeys) * (s.d_k + (values_in_keys ? 0 : s.d_v)) * sizeof(float);
  if (c.shared_bytes > limits.max_shared_bytes) {
    return Invalid(
        "tiled attention",
        absl::StrCat("a tile of ", kTiledKeys, " keys of ", s.d_k, " + ",
                     values_in_keys ? 0 : s.d_v, " values needs ", c.shared_bytes,
                     " bytes of shared memory, the device allows ", limits.max_shared_bytes));
  }
  return c;
}

absl::StatusOr<LaunchConfig> DecodeAttentionLaunch(const AttentionShape& s, bool values_in_keys,
                                                   int* per_lane, const DeviceLimits& limits) {
  absl::StatusOr<LaunchConfig> tiled = TiledAttentionLaunch(s, values_in_keys, per_lane, limits);
  if (!tiled.ok()) return tiled.status();
  const int group = s.group > 0 ? s.group : s.heads / s.kv_heads;
  LaunchConfig c = *tiled;
  c.grid_x = s.queries;
  c.grid_y = static_cast<int64_t>(s.kv_heads) * CeilDiv(group, kDecodeHeads);
  c.shared_bytes += kTiledKeys * sizeof(int);  // each key's position (−1: not attended)
  if (c.grid_y > limits.max_grid_y || c.shared_bytes > limits.max_shared_bytes) {
    return Invalid("decode attention", absl::StrCat(c.grid_y, " head blocks, ", c.shared_bytes,
                                                    " bytes of shared memory"));
  }
  return c;
}

absl::StatusOr<LaunchConfig> MmaAttentionLaunch(const AttentionShape& s, bool values_in_keys,
                                                size_t element_bytes, const DeviceLimits& limits) {
  int per_lane = 0;
  absl::StatusOr<LaunchConfig> one = AttentionLaunch(s, &per_lane, limits);  // shape checks
  if (!one.ok()) return one.status();
  if (element_bytes != 2) {
    return Invalid("tensor-core attention",
                   absl::StrCat(element_bytes,
                                "-byte elements: tensor cores take 16-bit q, cache and out "
                                "(f16 or bf16)"));
  }
  if (s.d_k % 16 != 0 || s.d_v % 16 != 0) {
    return Invalid("tensor-core attention",
                   absl::StrCat("d_k ", s.d_k, ", d_v ", s.d_v, ": expected multiples of 16"));
  }
  const int64_t per_kv = s.group > 0 ? std::min(s.group, s.heads) : s.heads / s.kv_heads;
  LaunchConfig c;
  c.grid_x = CeilDiv(s.queries * per_kv, kMmaRows);
  c.grid_y = s.kv_heads;
  c.block = kMmaWarps * kWarpSize;
  c.shared_bytes = MmaAttentionSharedBytes(s.d_k, s.d_v, values_in_keys);
  const size_t allowed = std::max(limits.max_shared_bytes, limits.max_shared_optin);
  if (c.shared_bytes > allowed) {
    return Invalid(
        "tensor-core attention",
        absl::StrCat("a tile of ", kMmaRows, " rows and ", kMmaKeys, " keys of ", s.d_k, " + ",
                     values_in_keys ? 0 : s.d_v, " values needs ", c.shared_bytes,
                     " bytes of shared memory, the device allows ", allowed, " (opt-in)"));
  }
  if (auto st = CheckGridX("tensor-core attention", c.grid_x, limits); !st.ok()) return st;
  if (c.grid_y > limits.max_grid_y) {
    return Invalid("tensor-core attention",
                   absl::StrCat(c.grid_y, " KV heads exceed the grid limit ", limits.max_grid_y));
  }
  return c;
}

int AttentionInstance(int per_lane) {
  constexpr int kInstances[] = {2, 4, 8, 18};  // head dims 64, 128, 256, 576
  for (int w : kInstances) {
    if (per_lane <= w) return w;
  }
  return 0;
}

absl::StatusOr<LaunchConfig> AttentionLaunch(const AttentionShape& s, int* per_lane,
                                             const DeviceLimits& limits) {
  if (s.queries <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.d_k <= 0 || s.d_v <= 0 ||
      s.block_size <= 0) {
    return Invalid("attention",
                   absl::StrCat("queries ", s.queries, ", heads ", s.heads, ", kv heads ",
                                s.kv_heads, ", d_k ", s.d_k, ", d_v ", s.d_v, ", block size ",
                                s.block_size, ": expected positive values"));
  }
  if (s.group > 0
          ? (s.head0 < 0 || s.kv_heads != (s.head0 + s.heads - 1) / s.group - s.head0 / s.group + 1)
          : s.heads % s.kv_heads != 0) {
    if (s.group > 0) {
      return Invalid("attention", absl::StrCat("query heads ", s.head0, "..", s.head0 + s.heads - 1,
                                               " in groups of ", s.group, " do not use ",
                                               s.kv_heads, " KV heads"));
    }
    return Invalid("attention", absl::StrCat(s.heads, " query heads are not a multiple of ",
                                             s.kv_heads, " KV heads (GQA)"));
  }
  const int widest = std::max(s.d_k, s.d_v);
  const int lanes = (widest + kWarpSize - 1) / kWarpSize;
  if (lanes > kAttentionMaxPerLane) {
    return Invalid("attention", absl::StrCat("head dimension ", widest, " exceeds ",
                                             kAttentionMaxPerLane * kWarpSize));
  }
  if (s.heads > limits.max_grid_y) {
    return Invalid("attention",
                   absl::StrCat(s.heads, " heads exceed the grid limit ", limits.max_grid_y));
  }
  if (auto st = CheckGridX("attention", s.queries, limits); !st.ok()) return st;
  *per_lane = AttentionInstance(lanes);
  LaunchConfig c;
  c.grid_x = s.queries;
  c.grid_y = s.heads;
  c.block = kAttentionWarps * kWarpSize;
  // Each warp leaves its running max, its sum and its d_v partial output for the merge.
  c.shared_bytes =
      static_cast<size_t>(kAttentionWarps) * (2 + *per_lane * kWarpSize) * sizeof(float);
  if (c.shared_bytes > limits.max_shared_bytes) {
    return Invalid("attention", absl::StrCat("needs ", c.shared_bytes,
                                             " bytes of shared memory, the device allows ",
                                             limits.max_shared_bytes));
  }
  return c;
}

absl::StatusOr<LaunchConfig> TopKLaunch(int64_t rows, int64_t n, int64_t k,
                                        const DeviceLimits& limits) {
  if (rows <= 0 || n <= 0 || k <= 0) {
    return Invalid("top-k",
                   absl::StrCat(rows, " rows of ", n, ", k ", k, ": expected positive values"));
  }
  if (n > INT32_MAX) return Invalid("top-k", absl::StrCat("row of ", n, " exceeds 2^31 - 1"));
  if (auto s = CheckGridX("top-k", rows, limits); !s.ok()) return s;
  LaunchConfig c;
  c.grid_x = rows;
  c.block = std::min(kTopKThreads, limits.max_threads_per_block);
  c.shared_bytes = 256 * sizeof(uint32_t) + 4 * sizeof(uint32_t);
  return c;
}

absl::StatusOr<LaunchConfig> MoeRoutingLaunch(const MoeShape& s, const DeviceLimits& limits) {
  if (s.tokens <= 0 || s.experts <= 0 || s.used <= 0) {
    return Invalid("moe routing", absl::StrCat(s.tokens, " tokens, ", s.experts, " experts, k ",
                                               s.used, ": expected positive values"));
  }
  if (s.experts > kMoeMaxExperts) {
    return Invalid("moe routing", absl::StrCat(s.experts, " experts exceed ", kMoeMaxExperts));
  }
  if (s.used > kMoeMaxUsed || s.used > s.experts) {
    return Invalid("moe routing", absl::StrCat("k = ", s.used, ": expected at most ",
                                               std::min(kMoeMaxUsed, s.experts)));
  }
  if (s.groups < 1 || s.experts % s.groups != 0) {
    return Invalid("moe routing",
                   absl::StrCat(s.experts, " experts do not split into ", s.groups, " groups"));
  }
  if (s.groups > 1 && (s.topk_groups < 1 || s.topk_groups > s.groups)) {
    return Invalid("moe routing",
                   absl::StrCat("topk_group ", s.topk_groups, ": expected 1..", s.groups));
  }
  if (s.groups > 1 && s.experts / s.groups < 2) {
    return Invalid("moe routing", absl::StrCat("groups of ", s.experts / s.groups,
                                               " experts: the group score needs two"));
  }
  if (s.groups > 1 && static_cast<int64_t>(s.topk_groups) * (s.experts / s.groups) < s.used) {
    return Invalid("moe routing", absl::StrCat(s.topk_groups, " groups of ", s.experts / s.groups,
                                               " experts cannot supply k = ", s.used));
  }
  LaunchConfig c;
  c.block = 4 * kWarpSize;  // four tokens per block
  c.grid_x = CeilDiv(s.tokens, 4);
  if (auto st = CheckGridX("moe routing", c.grid_x, limits); !st.ok()) return st;
  return c;
}

absl::StatusOr<LaunchConfig> SamplingLaunch(int64_t sequences, int64_t vocab,
                                            const DeviceLimits& limits) {
  if (sequences <= 0 || vocab <= 0) {
    return Invalid("sampling", absl::StrCat(sequences, " sequences over a vocabulary of ", vocab,
                                            ": expected positive sizes"));
  }
  if (vocab > INT32_MAX) return Invalid("sampling", "vocabulary exceeds 2^31 - 1");
  if (auto s = CheckGridX("sampling", sequences, limits); !s.ok()) return s;
  LaunchConfig c;
  c.grid_x = sequences;
  c.block = std::min(kSamplingThreads, limits.max_threads_per_block);
  return c;
}

}  // namespace tessera::cuda
