#include <algorithm>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/launcher_checks.h"
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

// One warp per (row, token·choice): the member's row against the choice's input. The grid's
// y walks the choices in strides of gridDim.y (at most 65535 rows of blocks), so a step of
// any length is one launch.
template <gguf::GgmlType kType, typename T>
__global__ void __launch_bounds__(kGemvWarps* kWarpSize)
    GroupedGemvKernel(GroupedGemvArgs a, int64_t x_stride, int64_t y_stride) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (row >= a.w.rows) return;  // the whole warp: no shuffle is left waiting
  const int64_t choices = a.tokens * a.used;
  for (int64_t choice = blockIdx.y; choice < choices; choice += gridDim.y) {  // t·used + j
    const int m = a.ids[choice] - a.member0;
    float acc = 0.0f;
    if (m >= 0 && m < a.members) {
      const uint8_t* wr = static_cast<const uint8_t*>(a.w.data) +
                          static_cast<size_t>(m) * a.member_bytes + row * a.w.row_bytes;
      const T* xc =
          static_cast<const T*>(a.x) + (a.x_per_choice ? choice : choice / a.used) * x_stride;
      for (int64_t k = lane; k < a.w.cols; k += kWarpSize) {
        acc += device::RowElem<kType>(wr, k) * device::ToFloat(xc[k]);
      }
      acc = device::WarpSum(acc);
    }
    if (lane == 0) static_cast<T*>(a.y)[choice * y_stride + row] = device::FromFloat<T>(acc);
  }
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
  absl::StatusOr<LaunchConfig> c = CheckGemv(w, batch);
  if (!c.ok()) return c.status();
  const auto* wd = static_cast<const uint8_t*>(w.data);
  for (int64_t b0 = 0; b0 < batch; b0 += kGemvMaxBatch) {
    const int nb = static_cast<int>(std::min<int64_t>(kGemvMaxBatch, batch - b0));
    TESSERA_DISPATCH_DTYPE(
        act, T, const T* xb = static_cast<const T*>(x) + b0 * w.cols;
        T* yb = static_cast<T*>(y) + b0 * w.rows; TESSERA_DISPATCH_QUANT(
            w.type, kT, return absl::InternalError("cuda gemv: no kernel instance for this type"),
            GemvKernel<kT, T>
            <<<c->grid_x, c->block, 0, stream>>>(wd, w.row_bytes, w.rows, w.cols, xb, nb, yb)));
    if (absl::Status s = LaunchStatus("gemv"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tessera::cuda

namespace tessera::cuda {

absl::Status GroupedGemv(const GroupedGemvArgs& a, DType act, cudaStream_t stream) {
  int64_t x_stride = 0, y_stride = 0;
  absl::StatusOr<LaunchConfig> c = CheckGroupedGemv(a, &x_stride, &y_stride);
  if (!c.ok()) return c.status();
  const dim3 grid(static_cast<unsigned>(c->grid_x),
                  static_cast<unsigned>(std::min<int64_t>(a.tokens * a.used, 65535)));
  TESSERA_DISPATCH_DTYPE(
      act, T,
      TESSERA_DISPATCH_QUANT(
          a.w.type, kT,
          return absl::InternalError("cuda grouped gemv: no kernel instance for this type"),
          GroupedGemvKernel<kT, T><<<grid, c->block, 0, stream>>>(a, x_stride, y_stride)));
  return LaunchStatus("grouped gemv");
}

absl::Status MoeCombine(const void* y, const float* weights, int64_t tokens, int used, int64_t n,
                        DType act, void* out, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckMoeCombine(tokens, used, n);
  if (!c.ok()) return c.status();
  TESSERA_DISPATCH_DTYPE(
      act, T,
      MoeCombineKernel<T><<<c->grid_x, c->block, 0, stream>>>(
          static_cast<const T*>(y), weights, tokens, used, n, static_cast<T*>(out)));
  return LaunchStatus("moe combine");
}

}  // namespace tessera::cuda
