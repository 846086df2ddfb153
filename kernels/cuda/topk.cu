#include <cub/block/block_scan.cuh>

#include <algorithm>

#include "kernels/cuda/kernel_checks.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/radix_select.cuh"
#include "kernels/cuda/selection_kernels.h"

namespace tessera::cuda {
namespace {

struct Always {
  __device__ bool operator()(int) const { return true; }
};
struct Unit {
  __device__ double operator()(int) const { return 1.0; }
};

__global__ void __launch_bounds__(kTopKThreads)
    TopKKernel(const float* scores, int64_t n_total, int k, const int32_t* lengths, int32_t* out) {
  __shared__ device::RadixSelectStorage<kTopKThreads> storage;
  __shared__ typename cub::BlockScan<int, kTopKThreads>::TempStorage scan;
  __shared__ int written;
  const float* x = scores + blockIdx.x * n_total;
  int32_t* o = out + static_cast<int64_t>(blockIdx.x) * k;
  const int n = static_cast<int>(
      lengths ? min(static_cast<int64_t>(max(lengths[blockIdx.x], 0)), n_total) : n_total);
  const int kk = min(k, n);
  for (int i = kk + threadIdx.x; i < k; i += kTopKThreads) o[i] = -1;
  if (kk == 0) return;
  uint32_t threshold = 0;
  double above = 0.0;
  int cut = INT_MAX;  // every element is kept when kk == n
  if (kk < n) {
    device::RadixSelect<kTopKThreads>(n, x, Always{}, Unit{}, static_cast<double>(kk), storage,
                                      &threshold, &above);
    cut = device::TieCut<kTopKThreads>(n, x, Always{}, Unit{}, threshold, kk - above, storage);
  }
  // Compact the kept indices in ascending order.
  if (threadIdx.x == 0) written = 0;
  __syncthreads();
  for (int base = 0; base < n; base += kTopKThreads) {
    const int i = base + threadIdx.x;
    bool keep = false;
    if (i < n) {
      const uint32_t key = device::OrderKey(x[i]);
      keep = kk == n || key > threshold || (key == threshold && i <= cut);
    }
    int offset, total;
    cub::BlockScan<int, kTopKThreads>(scan).ExclusiveSum(keep ? 1 : 0, offset, total);
    const int start = written;
    if (keep && start + offset < kk) o[start + offset] = i;
    __syncthreads();
    if (threadIdx.x == 0) written = start + total;
    __syncthreads();
  }
}

}  // namespace

absl::Status TopK(const float* scores, int64_t rows, int64_t n, int64_t k, const int32_t* lengths,
                  int32_t* out, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckTopK(rows, n, k);
  if (!c.ok()) return c.status();
  TopKKernel<<<static_cast<unsigned>(c->grid_x), kTopKThreads, 0, stream>>>(
      scores, n, static_cast<int>(std::min<int64_t>(k, INT32_MAX)), lengths, out);
  return LaunchStatus("top-k");
}

}  // namespace tessera::cuda
