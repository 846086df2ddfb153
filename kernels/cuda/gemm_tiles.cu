// Prefill GEMM on tensor cores: weight tiles are decoded (RowElem, bit-exact with the CPU)
// into shared memory as the 16-bit activation type and multiplied with WMMA 16×16×16
// fragments, float32 accumulation. The alternative to GemmDequantized's scratch buffer and
// cuBLAS; bench/cuda_bench.cc measures both. Geometry: launch_config.h, GemmTilesLaunch.
// GroupedGemmTiles runs the same tile over each member's choices (SortByMember's grouping):
// the MoE prefill product that decodes each expert's weight tile once per 128 of its tokens.
//
// The code favours plain, checkable indexing over speed: every shared-memory element is
// written by exactly one thread per K step, and edges (rows, tokens, K) are zero-padded in
// shared memory so that the MMA loop has no branches.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernel_checks.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/launcher_checks.h"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/quant_decode.cuh"

namespace tessera::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kLds = kGemmTileK + kGemmTilePad;  // elements per shared row (a multiple of 8)
constexpr int kThreads = kGemmTileWarps * kWarpSize;
constexpr int kRun = 8;                        // consecutive K elements one thread loads per pass
constexpr int kWarpRows = kGemmTileRows / 32;  // warps along the weight rows

static_assert(kLds % 8 == 0, "WMMA needs a leading dimension that is a multiple of 8");
static_assert(kGemmTileK % 16 == 0 && kGemmTileK % kRun == 0, "K step: whole fragments and runs");
static_assert(kGemmTileRows * kGemmTileK == kThreads * kRun, "one weight run per thread per step");
static_assert((kGemmTileTokens * kGemmTileK) % (kThreads * kRun) == 0, "whole activation passes");

// Shared memory of one block. Every fragment starts at a multiple of 32 bytes, as WMMA
// requires: rows are kLds·2 = 80 bytes and fragments start every 16 rows (1280 bytes) and at
// K offsets 0 and 16 (32 bytes); the arrays are multiples of 32 bytes.
template <typename T>
struct alignas(32) TileShared {
  T w[kGemmTileRows][kLds];    // w[r][k] = W[row0 + r][k0 + k]
  T x[kGemmTileTokens][kLds];  // x[t][k] = x[tok0 + t][k0 + k]
  float stage[kGemmTileWarps][16 * 16];
};
static_assert(sizeof(TileShared<__half>) == GemmTilesSharedBytes(), "launch_config.h's figure");
static_assert(sizeof(TileShared<__nv_bfloat16>) == GemmTilesSharedBytes(),
              "launch_config.h's figure");

// One block's tile: kGemmTileRows weight rows from row0 × kGemmTileTokens tokens.
// x_row(t) is token t's activation row (nullptr past the tile's tokens: zeros), y_row(t) its
// output row (nullptr: not written); the weights are rows × cols at w, row_bytes apart.
template <gguf::GgmlType kType, typename T, typename XRow, typename YRow>
__device__ void TileProduct(const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols,
                            int64_t row0, XRow x_row, YRow y_row) {
  __shared__ TileShared<T> s;
  const int tid = threadIdx.x;
  const int warp = tid / kWarpSize, lane = tid % kWarpSize;
  // This warp's 32 × 32 part of the block tile.
  const int warp_r = (warp % kWarpRows) * 32;
  const int warp_t = (warp / kWarpRows) * 32;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }

  // The weight run this thread decodes each step: row wr, K offset wk .. wk + kRun.
  const int wr = tid / (kGemmTileK / kRun);
  const int wk = (tid % (kGemmTileK / kRun)) * kRun;
  const int64_t w_row = row0 + wr;
  const uint8_t* w_data = w + (w_row < rows ? w_row : 0) * static_cast<int64_t>(row_bytes);

  for (int64_t k0 = 0; k0 < cols; k0 += kGemmTileK) {
    // Weights: decoded to float (bit-exact), rounded once to T; zeros past the edges.
#pragma unroll
    for (int u = 0; u < kRun; ++u) {
      const int64_t k = k0 + wk + u;
      const float v = (w_row < rows && k < cols) ? device::RowElem<kType>(w_data, k) : 0.0f;
      s.w[wr][wk + u] = device::FromFloat<T>(v);
    }
    // Activations: copied as they are; zeros past the edges.
    for (int idx = tid * kRun; idx < kGemmTileTokens * kGemmTileK; idx += kThreads * kRun) {
      const int t = idx / kGemmTileK, kk = idx % kGemmTileK;
      const T* xr = x_row(t);
#pragma unroll
      for (int u = 0; u < kRun; ++u) {
        const int64_t k = k0 + kk + u;
        s.x[t][kk + u] = (xr != nullptr && k < cols) ? xr[k] : device::FromFloat<T>(0.0f);
      }
    }
    __syncthreads();
    // C[r][t] += Σ_k W[r][k]·X[t][k]: A = the weight tile (row-major), B = the activation
    // tile read column-major (B[k][t] = x[t][k]).
#pragma unroll
    for (int kf = 0; kf < kGemmTileK; kf += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &s.w[warp_r + 16 * i][kf], kLds);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &s.x[warp_t + 16 * j][kf], kLds);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();  // every warp is done with the tiles before the next step overwrites them
  }

  // Out: each fragment through this warp's float stage, column-major (stage[r + 16·t]), so
  // that lanes write 16 consecutive rows of one token's output.
  float* stage = s.stage[warp];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_col_major);
      __syncwarp();
      for (int e = lane; e < 16 * 16; e += kWarpSize) {
        const int64_t row = row0 + warp_r + 16 * i + e % 16;
        T* yr = y_row(warp_t + 16 * j + e / 16);
        if (row < rows && yr != nullptr) yr[row] = device::FromFloat<T>(stage[e]);
      }
      __syncwarp();  // the stage is read before the next fragment overwrites it
    }
  }
}

template <gguf::GgmlType kType, typename T>
__global__ void __launch_bounds__(kThreads)
    GemmTilesKernel(const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols, const T* x,
                    int64_t batch, T* y) {
  const int64_t tok0 = static_cast<int64_t>(blockIdx.x) * kGemmTileTokens;
  TileProduct<kType, T>(
      w, row_bytes, rows, cols, static_cast<int64_t>(blockIdx.y) * kGemmTileRows,
      [&](int t) { return tok0 + t < batch ? x + (tok0 + t) * cols : nullptr; },
      [&](int t) { return tok0 + t < batch ? y + (tok0 + t) * rows : nullptr; });
}

// Block (x, y): the x-th token tile of the buckets in order (bucket b's choices, offsets[b] ..
// offsets[b + 1] of `order`, in tiles of kGemmTileTokens; blocks past the last tile return),
// row tile y. The last bucket (other ranks' experts, invalid ids) gets zero rows.
template <gguf::GgmlType kType, typename T>
__global__ void __launch_bounds__(kThreads)
    GroupedGemmTilesKernel(GroupedGemvArgs a, int64_t x_stride, int64_t y_stride) {
  int tile = static_cast<int>(blockIdx.x), b = 0;
  for (; b <= a.members; ++b) {
    const int tiles = (a.offsets[b + 1] - a.offsets[b] + kGemmTileTokens - 1) / kGemmTileTokens;
    if (tile < tiles) break;
    tile -= tiles;
  }
  if (b > a.members) return;  // the same for every thread of the block
  const int begin = a.offsets[b] + tile * kGemmTileTokens;
  const int count = min(kGemmTileTokens, a.offsets[b + 1] - begin);
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kGemmTileRows;
  T* y = static_cast<T*>(a.y);
  if (b == a.members) {
    for (int e = threadIdx.x; e < count * kGemmTileRows; e += kThreads) {
      const int64_t row = row0 + e % kGemmTileRows;
      if (row < a.w.rows) {
        y[static_cast<int64_t>(a.order[begin + e / kGemmTileRows]) * y_stride + row] =
            device::FromFloat<T>(0.0f);
      }
    }
    return;
  }
  const T* x = static_cast<const T*>(a.x);
  TileProduct<kType, T>(
      static_cast<const uint8_t*>(a.w.data) + static_cast<size_t>(b) * a.member_bytes,
      a.w.row_bytes, a.w.rows, a.w.cols, row0,
      [&](int t) -> const T* {
        if (t >= count) return nullptr;
        const int64_t choice = a.order[begin + t];
        return x + (a.x_per_choice ? choice : choice / a.used) * x_stride;
      },
      [&](int t) -> T* { return t < count ? y + a.order[begin + t] * y_stride : nullptr; });
}

template <typename T>
absl::Status Launch(const DeviceMatrix& w, const void* x, int64_t batch, void* y,
                    const LaunchConfig& c, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(c.grid_x), static_cast<unsigned>(c.grid_y));
  const auto* wd = static_cast<const uint8_t*>(w.data);
  TESSERA_DISPATCH_QUANT(
      w.type, kT,
      return absl::InvalidArgumentError(absl::StrCat(
          "cuda gemm tiles: ggml type id ", static_cast<int>(w.type), " has no CUDA decoder")),
      GemmTilesKernel<kT, T><<<grid, c.block, 0, stream>>>(
          wd, w.row_bytes, w.rows, w.cols, static_cast<const T*>(x), batch, static_cast<T*>(y)));
  return LaunchStatus("gemm tiles");
}

}  // namespace

absl::Status GemmTiles(const DeviceMatrix& w, const void* x, DType act, int64_t batch, void* y,
                       cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckGemmTiles(w, act, batch);
  if (!c.ok()) return c.status();
  if (act == DType::kF16) return Launch<__half>(w, x, batch, y, *c, stream);
  return Launch<__nv_bfloat16>(w, x, batch, y, *c, stream);
}

namespace {

template <typename T>
absl::Status LaunchGrouped(const GroupedGemvArgs& a, int64_t x_stride, int64_t y_stride,
                           const LaunchConfig& c, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(c.grid_x), static_cast<unsigned>(c.grid_y));
  TESSERA_DISPATCH_QUANT(
      a.w.type, kT,
      return absl::InvalidArgumentError(absl::StrCat("cuda grouped gemm tiles: ggml type id ",
                                                     static_cast<int>(a.w.type),
                                                     " has no CUDA decoder")),
      GroupedGemmTilesKernel<kT, T><<<grid, c.block, 0, stream>>>(a, x_stride, y_stride));
  return LaunchStatus("grouped gemm tiles");
}

}  // namespace

absl::Status GroupedGemmTiles(const GroupedGemvArgs& a, DType act, cudaStream_t stream) {
  int64_t x_stride = 0, y_stride = 0;
  absl::StatusOr<LaunchConfig> c = CheckGroupedGemmTiles(a, act, &x_stride, &y_stride);
  if (!c.ok()) return c.status();
  if (act == DType::kF16) return LaunchGrouped<__half>(a, x_stride, y_stride, *c, stream);
  return LaunchGrouped<__nv_bfloat16>(a, x_stride, y_stride, *c, stream);
}

}  // namespace tessera::cuda
