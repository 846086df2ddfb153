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
// neighbouring bytes of the same block) and accumulates against up to kMaxBatch tokens, so
// that a decode step of up to kGemvMaxBatch tokens reads each weight byte once. A token's
// arithmetic (the lane's run order, the per-run sum, the warp reduction) does not depend on
// kMaxBatch or on its batch-mates: its result is bit-identical to a batch of one.
template <gguf::GgmlType kType, typename T, int kMaxBatch>
__global__ void __launch_bounds__(kGemvWarps* kWarpSize)
    GemvKernel(const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols, const T* x,
               int batch, T* y) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (row >= rows) return;
  const uint8_t* wr = w + row * row_bytes;
  float acc[kMaxBatch] = {};
  if (cols % (kWarpSize * kRun) == 0) {
    // Each lane decodes a run of kRun consecutive elements (never crossing a block, as every
    // block size divides 256 and kRun divides 32), so the block and scale arithmetic is shared
    // by the run; a warp covers 256 consecutive elements per step.
    for (int64_t k0 = lane * kRun; k0 < cols; k0 += kWarpSize * kRun) {
      float v[kRun];
#pragma unroll
      for (int u = 0; u < kRun; ++u) v[u] = device::RowElem<kType>(wr, k0 + u);
#pragma unroll
      for (int b = 0; b < kMaxBatch; ++b) {
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
      for (int b = 0; b < kMaxBatch; ++b) {
        if (b < batch) acc[b] += v * device::ToFloat(x[b * cols + k]);
      }
    }
  }
#pragma unroll
  for (int b = 0; b < kMaxBatch; ++b) {
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

// The grouped product over choices sorted by member (GroupedGemvArgs::order/offsets): block
// row y < members walks member y's choices kGroupedPass at a time, and each warp decodes its
// weight row once per pass for all of them; block row `members` writes the zero rows of the
// choices outside the stack. A choice's arithmetic (lane l sums elements l, l + 32, ... in
// order, then the warp reduction) is GroupedGemvKernel's, so both give the same bits.
template <gguf::GgmlType kType, typename T>
__global__ void __launch_bounds__(kGemvWarps* kWarpSize)
    SortedGroupedGemvKernel(GroupedGemvArgs a, int64_t x_stride, int64_t y_stride) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (row >= a.w.rows) return;
  const int m = blockIdx.y;
  const int begin = a.offsets[m], end = a.offsets[m + 1];
  T* y = static_cast<T*>(a.y);
  if (m == a.members) {  // choices of other ranks' experts (or invalid ids): zero rows
    for (int i = begin + lane; i < end; i += kWarpSize) {
      y[a.order[i] * y_stride + row] = device::FromFloat<T>(0.0f);
    }
    return;
  }
  const uint8_t* wr = static_cast<const uint8_t*>(a.w.data) +
                      static_cast<size_t>(m) * a.member_bytes + row * a.w.row_bytes;
  const T* x = static_cast<const T*>(a.x);
  for (int p0 = begin; p0 < end; p0 += kGroupedPass) {
    const int n = min(kGroupedPass, end - p0);
    const T* xc[kGroupedPass];
#pragma unroll
    for (int c = 0; c < kGroupedPass; ++c) {
      if (c >= n) break;
      const int64_t choice = a.order[p0 + c];
      xc[c] = x + (a.x_per_choice ? choice : choice / a.used) * x_stride;
    }
    float acc[kGroupedPass] = {};
    for (int64_t k = lane; k < a.w.cols; k += kWarpSize) {
      const float v = device::RowElem<kType>(wr, k);
#pragma unroll
      for (int c = 0; c < kGroupedPass; ++c) {
        if (c < n) acc[c] += v * device::ToFloat(xc[c][k]);
      }
    }
#pragma unroll
    for (int c = 0; c < kGroupedPass; ++c) {
      if (c >= n) break;
      const float s = device::WarpSum(acc[c]);
      if (lane == 0)
        y[static_cast<int64_t>(a.order[p0 + c]) * y_stride + row] = device::FromFloat<T>(s);
    }
  }
}

// SortByMember: one block. Counts per bucket (member, or `members` for the rest) in shared
// memory, an exclusive scan by thread 0, then each choice takes the next slot of its bucket
// (the order inside a bucket is not fixed: each choice's result does not depend on it).
__global__ void __launch_bounds__(kSortThreads)
    SortByMemberKernel(const int32_t* ids, int64_t n, int members, int member0, int32_t* order,
                       int32_t* offsets) {
  extern __shared__ int counts[];  // [members + 1], then the cursors [members + 1]
  int* cursor = counts + members + 1;
  for (int b = threadIdx.x; b <= members; b += blockDim.x) counts[b] = 0;
  __syncthreads();
  auto bucket = [&](int64_t i) {
    const int m = ids[i] - member0;
    return m >= 0 && m < members ? m : members;
  };
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) atomicAdd(&counts[bucket(i)], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int sum = 0;
    for (int b = 0; b <= members; ++b) {
      offsets[b] = sum;
      cursor[b] = sum;
      sum += counts[b];
    }
    offsets[members + 1] = sum;
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    order[atomicAdd(&cursor[bucket(i)], 1)] = static_cast<int32_t>(i);
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
    // Three instances: up to 8 tokens (few accumulators, full occupancy), up to 24, up to 64
    // (every register of a thread). A token's arithmetic is the same in each.
    TESSERA_DISPATCH_DTYPE(
        act, T, const T* xb = static_cast<const T*>(x) + b0 * w.cols;
        T* yb = static_cast<T*>(y) + b0 * w.rows; TESSERA_DISPATCH_QUANT(
            w.type, kT, return absl::InternalError("cuda gemv: no kernel instance for this type"),
            if (nb <= kGemvSmallBatch) {
              GemvKernel<kT, T, kGemvSmallBatch>
                  <<<c->grid_x, c->block, 0, stream>>>(wd, w.row_bytes, w.rows, w.cols, xb, nb, yb);
            } else if (nb <= kGemvMidBatch) {
              GemvKernel<kT, T, kGemvMidBatch>
                  <<<c->grid_x, c->block, 0, stream>>>(wd, w.row_bytes, w.rows, w.cols, xb, nb, yb);
            } else {
              GemvKernel<kT, T, kGemvMaxBatch>
                  <<<c->grid_x, c->block, 0, stream>>>(wd, w.row_bytes, w.rows, w.cols, xb, nb, yb);
            }));
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
  if (a.order != nullptr) {
    const dim3 grid(static_cast<unsigned>(c->grid_x), static_cast<unsigned>(a.members + 1));
    TESSERA_DISPATCH_DTYPE(
        act, T,
        TESSERA_DISPATCH_QUANT(
            a.w.type, kT,
            return absl::InternalError("cuda grouped gemv: no kernel instance for this type"),
            SortedGroupedGemvKernel<kT, T><<<grid, c->block, 0, stream>>>(a, x_stride, y_stride)));
    return LaunchStatus("sorted grouped gemv");
  }
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

absl::Status SortByMember(const int32_t* ids, int64_t n, int members, int member0, int32_t* order,
                          int32_t* offsets, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c =
      CheckSortByMember(n, members, ids != nullptr, order != nullptr, offsets != nullptr);
  if (!c.ok()) return c.status();
  SortByMemberKernel<<<1, c->block, c->shared_bytes, stream>>>(ids, n, members, member0, order,
                                                               offsets);
  return LaunchStatus("sort by member");
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
