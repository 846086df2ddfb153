// Device-side helpers shared by the kernels: dtype conversion, warp and block reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/cuda_types.h"

namespace tessera::cuda::device {

__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block; `scratch` holds one float per warp. Every thread gets the result.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = scratch[0];
  for (int w = 1; w < warps; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

}  // namespace tessera::cuda::device

// Runs the statements with `T` bound to the C++ type of `dtype` (a macro: the CUDA sources
// build as C++17, without templated lambdas).
#define TESSERA_DISPATCH_DTYPE(dtype, T, ...)                              \
  switch (dtype) {                                                         \
    case ::tessera::cuda::DType::kF32: {                                   \
      using T = float;                                                     \
      __VA_ARGS__;                                                         \
      break;                                                               \
    }                                                                      \
    case ::tessera::cuda::DType::kF16: {                                   \
      using T = __half;                                                    \
      __VA_ARGS__;                                                         \
      break;                                                               \
    }                                                                      \
    case ::tessera::cuda::DType::kBF16: {                                  \
      using T = __nv_bfloat16;                                             \
      __VA_ARGS__;                                                         \
      break;                                                               \
    }                                                                      \
    default:                                                               \
      return absl::InvalidArgumentError("cuda: unknown activation dtype"); \
  }
