#include <algorithm>

#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/quant_decode.cuh"

namespace tessera::cuda {
namespace {

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
  for (int64_t k = lane; k < cols; k += kWarpSize) {
    const float v = device::RowElem<kType>(wr, k);
#pragma unroll
    for (int b = 0; b < kGemvMaxBatch; ++b) {
      if (b < batch) acc[b] += v * device::ToFloat(x[b * cols + k]);
    }
  }
#pragma unroll
  for (int b = 0; b < kGemvMaxBatch; ++b) {
    if (b >= batch) break;
    const float s = device::WarpSum(acc[b]);
    if (lane == 0) y[b * rows + row] = device::FromFloat<T>(s);
  }
}

}  // namespace

absl::Status Gemv(const DeviceMatrix& w, const void* x, DType act, int64_t batch, void* y,
                  cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = GemvLaunch(w.type, w.rows, w.cols, batch);
  if (!c.ok()) return c.status();
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
