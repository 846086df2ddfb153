// Data movement of the forward pass: KV-cache writes, embedding gathers, residual adds.
#include <algorithm>

#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernel_checks.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/launcher_checks.h"
#include "kernels/cuda/nn_kernels.h"
#include "kernels/cuda/quant_decode.cuh"

namespace tessera::cuda {
namespace {

// Block (token, kv head); threads over the row.
template <typename T>
__global__ void WriteKvKernel(KvWriteArgs a) {
  const int64_t slot = a.slot_mapping[blockIdx.x];
  if (slot < 0) return;
  const T* src = static_cast<const T*>(a.src) + blockIdx.x * a.src_token_stride +
                 static_cast<int64_t>(blockIdx.y) * a.width;
  T* dst = static_cast<T*>(a.cache) + (slot / a.block_size) * a.block_stride +
           (slot % a.block_size) * a.token_stride +
           static_cast<int64_t>(blockIdx.y) * a.head_stride;
  for (int i = threadIdx.x; i < a.width; i += blockDim.x) dst[i] = src[i];
}

template <typename T>
__global__ void AddKernel(T* y, const T* x, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = device::FromFloat<T>(device::ToFloat(y[i]) + device::ToFloat(x[i]));
  }
}

// Block per gathered row; threads over its elements.
template <gguf::GgmlType kType, typename T>
__global__ void GatherRowsKernel(const uint8_t* table, size_t row_bytes, int64_t rows, int64_t cols,
                                 const int32_t* ids, T* out) {
  const int32_t id = ids[blockIdx.x];
  T* o = out + blockIdx.x * cols;
  const bool valid = id >= 0 && id < rows;
  const uint8_t* row = table + (valid ? id : 0) * row_bytes;
  for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) {
    o[k] = device::FromFloat<T>(valid ? device::RowElem<kType>(row, k) : 0.0f);
  }
}

}  // namespace

absl::Status WriteKvCache(const KvWriteArgs& a, DType dtype, cudaStream_t stream) {
  if (absl::Status s = CheckWriteKvCache(a); !s.ok()) return s;
  const dim3 grid(static_cast<unsigned>(a.tokens), static_cast<unsigned>(a.kv_heads));
  const int threads = std::min(256, (a.width + kWarpSize - 1) / kWarpSize * kWarpSize);
  TESSERA_DISPATCH_DTYPE(dtype, T, WriteKvKernel<T><<<grid, threads, 0, stream>>>(a));
  return LaunchStatus("kv write");
}

absl::Status AddInPlace(void* y, const void* x, int64_t n, DType dtype, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = ElementwiseLaunch("add", n);
  if (!c.ok()) return c.status();
  TESSERA_DISPATCH_DTYPE(dtype, T,
                         AddKernel<T><<<c->grid_x, c->block, 0, stream>>>(
                             static_cast<T*>(y), static_cast<const T*>(x), n));
  return LaunchStatus("add");
}

absl::Status GatherRows(const DeviceMatrix& table, const int32_t* ids, int64_t n, DType dtype,
                        void* out, cudaStream_t stream) {
  if (absl::Status s = CheckGatherRows(table, ids, n, out); !s.ok()) return s;
  const auto* data = static_cast<const uint8_t*>(table.data);
  TESSERA_DISPATCH_DTYPE(
      dtype, T,
      TESSERA_DISPATCH_QUANT(
          table.type, kT, return CudaQuantGeometry(table.type).status(),
          GatherRowsKernel<kT, T><<<static_cast<unsigned>(n), 256, 0, stream>>>(
              data, table.row_bytes, table.rows, table.cols, ids, static_cast<T*>(out))));
  return LaunchStatus("gather rows");
}

}  // namespace tessera::cuda
