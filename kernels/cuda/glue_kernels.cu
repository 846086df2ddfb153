// The glue kernels of glue_kernels.h. Launchers validate their arguments (before any CUDA call,
// so the checks hold on machines without a GPU), take their geometry from launch_config.h and
// queue one kernel; element-wise kernels loop grid-stride because ElementwiseLaunch caps the grid.
#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/glue_kernels.h"
#include "kernels/cuda/kernel_checks.h"
#include "kernels/cuda/launch_config.h"

namespace tessera::cuda {
namespace {

// ---- Kernels ----------------------------------------------------------------------------------

template <typename T>
__global__ void AddBiasKernel(T* y, const float* bias, int64_t total, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = device::FromFloat<T>(device::ToFloat(y[i]) + bias[i % n]);
  }
}

// RmsNormKernel (nn_kernels.cu) with row strides: the arithmetic must stay identical, statement
// for statement, so that stride == n reproduces RmsNorm bit for bit.
template <typename T>
__global__ void RmsNormStridedKernel(const T* x, int64_t x_stride, const float* w, int64_t n,
                                     float eps, T* y, int64_t y_stride) {
  extern __shared__ float scratch[];
  const T* row = x + static_cast<int64_t>(blockIdx.x) * x_stride;
  T* out = y + static_cast<int64_t>(blockIdx.x) * y_stride;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = device::ToFloat(row[i]);
    sum += v * v;
  }
  sum = device::BlockSum(sum, scratch);
  const float scale = 1.0f / sqrtf(sum / static_cast<float>(n) + eps);
  // In place (y == x) is safe: the reads above finished at BlockSum's barrier, and each thread
  // rewrites only the elements it reads here.
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = device::ToFloat(row[i]) * scale;
    out[i] = device::FromFloat<T>(w ? v * w[i] : v);
  }
}

// Two passes (mean, then squared deviations) rather than E[x²] − E[x]², which cancels badly
// when the mean is large against the spread.
__global__ void LayerNormKernel(const float* x, const float* w, const float* b, int64_t n,
                                float eps, float* y) {
  extern __shared__ float scratch[];
  const int64_t offset = static_cast<int64_t>(blockIdx.x) * n;
  const float* row = x + offset;
  float* out = y + offset;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += row[i];
  const float mean = device::BlockSum(sum, scratch) / static_cast<float>(n);
  float squares = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float d = row[i] - mean;
    squares += d * d;
  }
  const float inv = 1.0f / sqrtf(device::BlockSum(squares, scratch) / static_cast<float>(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = (row[i] - mean) * inv;
    out[i] = (w ? v * w[i] : v) + (b ? b[i] : 0.0f);
  }
}

// Through float32, which holds every f16 and bf16 value exactly: one rounding, to nearest even.
template <typename S, typename D>
__global__ void ConvertKernel(const S* src, D* dst, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = device::FromFloat<D>(device::ToFloat(src[i]));
  }
}

// One block per row.
template <typename T>
__global__ void CopyRowsKernel(const T* src, int64_t src_stride, T* dst, int64_t dst_stride,
                               int64_t width) {
  const T* from = src + static_cast<int64_t>(blockIdx.x) * src_stride;
  T* to = dst + static_cast<int64_t>(blockIdx.x) * dst_stride;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) to[i] = from[i];
}

// One block per gathered row; the index is uniform over the block.
template <typename T>
__global__ void GatherRowsByIndexKernel(const T* src, const int32_t* index, int64_t n, T* dst) {
  const int32_t id = index[blockIdx.x];
  T* out = dst + static_cast<int64_t>(blockIdx.x) * n;
  if (id < 0) {
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) out[j] = device::FromFloat<T>(0.0f);
    return;
  }
  const T* row = src + static_cast<int64_t>(id) * n;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) out[j] = row[j];
}

__global__ void ScaleKernel(float* x, int64_t n, float s) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] *= s;
  }
}

__global__ void FillHeadIdsKernel(int32_t* ids, int64_t total, int used) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    ids[i] = static_cast<int32_t>(i % used);
  }
}

}  // namespace

// ---- Launchers --------------------------------------------------------------------------------

absl::Status AddBias(void* y, const float* bias, int64_t rows, int64_t n, DType dtype,
                     cudaStream_t stream) {
  constexpr const char* kKernel = "add bias";
  absl::StatusOr<LaunchConfig> c = CheckAddBias(y, bias, rows, n);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  const int64_t total = rows * n;
  TESSERA_DISPATCH_DTYPE(dtype, T,
                         AddBiasKernel<T>
                         <<<c->grid_x, c->block, 0, stream>>>(static_cast<T*>(y), bias, total, n));
  return LaunchStatus(kKernel);
}

absl::Status RmsNormStrided(const void* x, int64_t x_stride, const float* w, int64_t rows,
                            int64_t n, float eps, DType dtype, void* y, int64_t y_stride,
                            cudaStream_t stream) {
  constexpr const char* kKernel = "rmsnorm strided";
  absl::StatusOr<LaunchConfig> c = CheckRmsNormStrided(x, x_stride, rows, n, y, y_stride);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  TESSERA_DISPATCH_DTYPE(
      dtype, T,
      RmsNormStridedKernel<T><<<c->grid_x, c->block, c->shared_bytes, stream>>>(
          static_cast<const T*>(x), x_stride, w, n, eps, static_cast<T*>(y), y_stride));
  return LaunchStatus(kKernel);
}

absl::Status LayerNormF32(const float* x, const float* w, const float* b, int64_t rows, int64_t n,
                          float eps, float* y, cudaStream_t stream) {
  constexpr const char* kKernel = "layernorm";
  absl::StatusOr<LaunchConfig> c = CheckLayerNorm(x, rows, n, y);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  LayerNormKernel<<<c->grid_x, c->block, c->shared_bytes, stream>>>(x, w, b, n, eps, y);
  return LaunchStatus(kKernel);
}

absl::Status Convert(const void* src, DType from, void* dst, DType to, int64_t n,
                     cudaStream_t stream) {
  constexpr const char* kKernel = "convert";
  absl::StatusOr<LaunchConfig> c = CheckConvert(src, from, dst, to, n);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  if (from == to) {
    // A plain copy keeps every bit (NaN payloads included) and needs no kernel.
    return CudaStatus(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * DTypeBytes(from),
                                      cudaMemcpyDeviceToDevice, stream),
                      kKernel);
  }
  TESSERA_DISPATCH_DTYPE(
      from, S,
      TESSERA_DISPATCH_DTYPE(to, D,
                             ConvertKernel<S, D><<<c->grid_x, c->block, 0, stream>>>(
                                 static_cast<const S*>(src), static_cast<D*>(dst), n)));
  return LaunchStatus(kKernel);
}

absl::Status CopyRows(const void* src, int64_t src_stride, void* dst, int64_t dst_stride,
                      int64_t rows, int64_t width, DType dtype, cudaStream_t stream) {
  constexpr const char* kKernel = "copy rows";
  absl::StatusOr<LaunchConfig> c = CheckCopyRows(src, src_stride, dst, dst_stride, rows, width);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  TESSERA_DISPATCH_DTYPE(
      dtype, T,
      CopyRowsKernel<T><<<c->grid_x, c->block, 0, stream>>>(
          static_cast<const T*>(src), src_stride, static_cast<T*>(dst), dst_stride, width));
  return LaunchStatus(kKernel);
}

absl::Status GatherRowsByIndex(const void* src, const int32_t* index, int64_t count, int64_t n,
                               DType dtype, void* dst, cudaStream_t stream) {
  constexpr const char* kKernel = "gather rows by index";
  absl::StatusOr<LaunchConfig> c = CheckGatherRowsByIndex(src, index, count, n, dst);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  TESSERA_DISPATCH_DTYPE(dtype, T,
                         GatherRowsByIndexKernel<T><<<c->grid_x, c->block, 0, stream>>>(
                             static_cast<const T*>(src), index, n, static_cast<T*>(dst)));
  return LaunchStatus(kKernel);
}

absl::Status Scale(float* x, int64_t n, float s, cudaStream_t stream) {
  constexpr const char* kKernel = "scale";
  absl::StatusOr<LaunchConfig> c = CheckScale(x, n);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  ScaleKernel<<<c->grid_x, c->block, 0, stream>>>(x, n, s);
  return LaunchStatus(kKernel);
}

absl::Status FillHeadIds(int32_t* ids, int64_t tokens, int used, cudaStream_t stream) {
  constexpr const char* kKernel = "fill head ids";
  absl::StatusOr<LaunchConfig> c = CheckFillHeadIds(ids, tokens, used);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  const int64_t total = tokens * used;
  FillHeadIdsKernel<<<c->grid_x, c->block, 0, stream>>>(ids, total, used);
  return LaunchStatus(kKernel);
}

}  // namespace tessera::cuda
