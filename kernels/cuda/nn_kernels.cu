#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kernel_checks.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/launcher_checks.h"
#include "kernels/cuda/nn_kernels.h"

namespace tessera::cuda {
namespace {

template <typename T>
__global__ void RopeKernel(T* x, int64_t token_stride, int head_dim, int n_rot, bool neox,
                           float magnitude, const int32_t* positions, const double* scales) {
  const int half = n_rot / 2;
  const int i = threadIdx.x;
  if (i >= half) return;
  T* head = x + blockIdx.x * token_stride + static_cast<int64_t>(blockIdx.y) * head_dim;
  // Angles in double, as the CPU computes them: positions reach 1e5+.
  double s, c;
  sincos(static_cast<double>(positions[blockIdx.x]) * scales[i], &s, &c);
  const float cs = static_cast<float>(c * magnitude), sn = static_cast<float>(s * magnitude);
  T* a = neox ? head + i : head + 2 * i;
  T* b = neox ? head + i + half : head + 2 * i + 1;
  const float x0 = device::ToFloat(*a), x1 = device::ToFloat(*b);
  *a = device::FromFloat<T>(x0 * cs - x1 * sn);
  *b = device::FromFloat<T>(x0 * sn + x1 * cs);
}

template <typename T>
__global__ void SoftmaxKernel(T* x, int64_t n) {
  extern __shared__ float scratch[];
  T* row = x + blockIdx.x * n;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, device::ToFloat(row[i]));
  m = device::BlockMax(m, scratch);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += expf(device::ToFloat(row[i]) - m);
  sum = device::BlockSum(sum, scratch);
  const float inv = 1.0f / sum;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    row[i] = device::FromFloat<T>(expf(device::ToFloat(row[i]) - m) * inv);
  }
}

template <typename T>
__global__ void SiluMulKernel(const T* gate, const T* up, int64_t n, T* out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = device::ToFloat(gate[i]);
    out[i] = device::FromFloat<T>(g / (1.0f + expf(-g)) * device::ToFloat(up[i]));
  }
}

}  // namespace

absl::Status Rope(const RopeArgs& a, DType dtype, void* x, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckRope(a);
  if (!c.ok()) return c.status();
  const dim3 grid(static_cast<unsigned>(c->grid_x), static_cast<unsigned>(c->grid_y));
  TESSERA_DISPATCH_DTYPE(dtype, T,
                         RopeKernel<T><<<grid, c->block, 0, stream>>>(
                             static_cast<T*>(x), a.token_stride, a.head_dim, a.n_rot, a.neox,
                             a.magnitude, a.positions, a.theta_scales));
  return LaunchStatus("rope");
}

absl::Status Softmax(void* x, int64_t rows, int64_t n, DType dtype, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = RowLaunch("softmax", rows, n);
  if (!c.ok()) return c.status();
  TESSERA_DISPATCH_DTYPE(dtype, T,
                         SoftmaxKernel<T>
                         <<<c->grid_x, c->block, c->shared_bytes, stream>>>(static_cast<T*>(x), n));
  return LaunchStatus("softmax");
}

absl::Status SiluMul(const void* gate, const void* up, int64_t n, DType dtype, void* out,
                     cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = ElementwiseLaunch("silu_mul", n);
  if (!c.ok()) return c.status();
  TESSERA_DISPATCH_DTYPE(
      dtype, T,
      SiluMulKernel<T><<<c->grid_x, c->block, 0, stream>>>(
          static_cast<const T*>(gate), static_cast<const T*>(up), n, static_cast<T*>(out)));
  return LaunchStatus("silu_mul");
}

}  // namespace tessera::cuda
