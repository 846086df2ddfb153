#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/quant_decode.cuh"

namespace tessera::cuda {
namespace {

template <gguf::GgmlType kType, typename T>
__global__ void DequantizeKernel(const uint8_t* src, int64_t n, T* dst) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = device::FromFloat<T>(device::RowElem<kType>(src, i));
}

}  // namespace

absl::Status Dequantize(gguf::GgmlType type, const void* src, int64_t n, DType out, void* dst,
                        cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = DequantizeLaunch(type, n);
  if (!c.ok()) return c.status();
  const auto* in = static_cast<const uint8_t*>(src);
  TESSERA_DISPATCH_DTYPE(
      out, T,
      TESSERA_DISPATCH_QUANT(
          type, kT, return absl::InternalError("cuda dequantize: no kernel instance for this type"),
          DequantizeKernel<kT, T>
          <<<c->grid_x, c->block, 0, stream>>>(in, n, static_cast<T*>(dst))));
  return LaunchStatus("dequantize");
}

}  // namespace tessera::cuda
