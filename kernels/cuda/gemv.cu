#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/quant_decode.cuh"

namespace tessera::cuda {
namespace {

constexpr int kRun = 8;  // consecutive elements per lane in the GEMV's main loop

// One warp per weight row; lane l decodes elements l, l + 32, ... (consecutive lanes read
// neighbouring bytes of the same block) and accumulates against up to kGemvMaxBatch tokens.
template <gguf::GgmlType kType, typename T>
__global__ void __launch_bounds__(kGemvWarps* kWarpSize)
    GemvKernel(const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols, const T* x,
               int batch, T* y) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (row >= rows) return;
  const uint8_t* wr = w + row * row_bytes;
  float acc[kGemvMaxBatch] = {};
  if (cols % (kWarpSize * kRun) == 0) {
    // Each lane decodes a run of kRun consecutive elements (never crossing a block, as every
    // block size divides 256 and kRun divides 32), so the block and scale arithmetic is shared
    // by the run; a warp covers 256 consecutive elements per step.
    for (int64_t k0 = lane * kRun; k0 < cols; k0 += kWarpSize * kRun) {
      float v[kRun];
#pragma unroll
      for (int u = 0; u < kRun; ++u) v[u] = device::RowElem<kType>(wr, k0 + u);
#pragma unroll
      for (int b = 0; b < kGemvMaxBatch; ++b) {
        if (b >= batch) break;
        const T* xb = x + b * cols + k0;
        float s = 0.0f;
#pragma unroll
        for (int u = 0; u < kRun; ++u) s += v[u] * device::ToFloat(xb[u]);
        acc[b] += s;
      }
    }
  } else {
    for (int64_t k = lane; k < cols; k += kWarpSize) {
      const float v = device::RowElem<kType>(wr, k);
#pragma unroll
      for (int b = 0; b < kGemvMaxBatch; ++b) {
        if (b < batch) acc[b] += v * device::ToFloat(x[b * cols + k]);
      }
    }
  }
#pragma unroll
  for (int b = 0; b < kGemvMaxBatch; ++b) {
    if (b >= batch) break;
    const float s = device::WarpSum(acc[b]);
    if (lane == 0) y[b * rows + row] = device::FromFloat<T>(s);
  }
}

// One warp per (row, token·choice): the expert's row against the choice's input.
template <gguf::GgmlType kType, typename T>
__global__ void __launch_bounds__(kGemvWarps* kWarpSize)
    GemvExpertsKernel(const uint8_t* w, size_t row_bytes, size_t expert_bytes, int experts,
                      const int32_t* ids, int64_t rows, int64_t cols, const T* x, bool x_per_choice,
                      int used, T* y) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  const int64_t choice = blockIdx.y;  // t·used + j
  if (row >= rows) return;
  const int e = ids[choice];
  float acc = 0.0f;
  if (e >= 0 && e < experts) {
    const uint8_t* wr = w + static_cast<size_t>(e) * expert_bytes + row * row_bytes;
    const T* xc = x + (x_per_choice ? choice : choice / used) * cols;
    for (int64_t k = lane; k < cols; k += kWarpSize) {
      acc += device::RowElem<kType>(wr, k) * device::ToFloat(xc[k]);
    }
    acc = device::WarpSum(acc);
  }
  if (lane == 0) y[choice * rows + row] = device::FromFloat<T>(acc);
}

template <typename T>
__global__ void MoeCombineKernel(const T* y, const float* weights, int64_t tokens, int used,
                                 int64_t n, T* out) {
  const int64_t total = tokens * n;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / n, i = idx % n;
    float sum = 0.0f;
    for (int j = 0; j < used; ++j) {
      sum += weights[t * used + j] * device::ToFloat(y[(t * used + j) * n + i]);
    }
    out[idx] = device::FromFloat<T>(sum);
  }
}

}  // namespace

absl::Status Gemv(const DeviceMatrix& w, const void* x, DType act, int64_t batch, void* y,
                  cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = GemvLaunch(w.type, w.rows, w.cols, batch);
  if (!c.ok()) return c.status();
  if (absl::Status s = CheckRowBytes(w.type, w.cols, w.row_bytes, "gemv"); !s.ok()) return s;
  const auto* wd = static_cast<const uint8_t*>(w.data);
  for (int64_t b0 = 0; b0 < batch; b0 += kGemvMaxBatch) {
    const int nb = static_cast<int>(std::min<int64_t>(kGemvMaxBatch, batch - b0));
    TESSERA_DISPATCH_DTYPE(act, T, const T* xb = static_cast<const T*>(x) + b0 * w.cols;
                           T* yb = static_cast<T*>(y) + b0 * w.rows; TESSERA_DISPATCH_QUANT(
                               w.type, kT, return c.status(),
                               GemvKernel<kT, T><<<c->grid_x, c->block, 0, stream>>>(
                                   wd, w.row_bytes, w.rows, w.cols, xb, nb, yb)));
    if (absl::Status s = LaunchStatus("gemv"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tessera::cuda

namespace tessera::cuda {

absl::Status GemvExperts(const DeviceMatrix& w, size_t expert_bytes, int experts,
                         const int32_t* ids, int64_t tokens, int used, const void* x,
                         bool x_per_choice, DType act, void* y, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = GemvLaunch(w.type, w.rows, w.cols, 1);
  if (!c.ok()) return c.status();
  if (absl::Status s = CheckRowBytes(w.type, w.cols, w.row_bytes, "expert gemv"); !s.ok()) {
    return s;
  }
  if (experts <= 0 || tokens <= 0 || used <= 0 || tokens * used > 65535 ||
      expert_bytes < static_cast<size_t>(w.rows) * w.row_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda expert gemv: ", experts, " experts of ", expert_bytes, " bytes (one needs ",
        static_cast<size_t>(w.rows) * w.row_bytes, "), ", tokens, " tokens x ", used,
        " choices (at most 65535 in all): expected positive sizes that fit"));
  }
  const dim3 grid(static_cast<unsigned>(c->grid_x), static_cast<unsigned>(tokens * used));
  const auto* wd = static_cast<const uint8_t*>(w.data);
  TESSERA_DISPATCH_DTYPE(
      act, T,
      TESSERA_DISPATCH_QUANT(
          w.type, kT, return c.status(),
          GemvExpertsKernel<kT, T><<<grid, c->block, 0, stream>>>(
              wd, w.row_bytes, expert_bytes, experts, ids, w.rows, w.cols, static_cast<const T*>(x),
              x_per_choice, used, static_cast<T*>(y))));
  return LaunchStatus("expert gemv");
}

absl::Status MoeCombine(const void* y, const float* weights, int64_t tokens, int used, int64_t n,
                        DType act, void* out, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = ElementwiseLaunch("moe combine", tokens * n);
  if (!c.ok()) return c.status();
  if (used <= 0) return absl::InvalidArgumentError("cuda moe combine: used must be positive");
  TESSERA_DISPATCH_DTYPE(
      act, T,
      MoeCombineKernel<T><<<c->grid_x, c->block, 0, stream>>>(
          static_cast<const T*>(y), weights, tokens, used, n, static_cast<T*>(out)));
  return LaunchStatus("moe combine");
}

}  // namespace tessera::cuda
