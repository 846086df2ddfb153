// The small element-wise and copy kernels the GPU executor needs between the big ones
// (worker/executor/cuda_forward.cc): biases, strided norms and copies, dtype conversion,
// row gathers. Device pointers, queued on `stream`; errors are shape errors found before any
// launch (InvalidArgument naming the kernel and the value: negative counts, strides shorter
// than the row, null pointers) or launch errors. A count of zero queues nothing and is OK, even
// with null pointers.
#pragma once

#include "kernels/cuda/cuda_types.h"

namespace tessera::cuda {

// y[t·n + i] += bias[i] for t < rows, i < n; bias is float32, y is `dtype`.
absl::Status AddBias(void* y, const float* bias, int64_t rows, int64_t n, DType dtype,
                     cudaStream_t stream);

// RMSNorm of the first n values of each of `rows` rows: row r is read at x + r·x_stride and
// written at y + r·y_stride (elements; strides ≥ n); w (float32, n values) may be null; y may
// alias x only in place (y == x and y_stride == x_stride; other overlaps are not detected).
// Same arithmetic as RmsNorm (nn_kernels.h): float32 sum of squares, 1/sqrt(mean + eps); with
// stride == n the results equal RmsNorm's bit for bit.
absl::Status RmsNormStrided(const void* x, int64_t x_stride, const float* w, int64_t rows,
                            int64_t n, float eps, DType dtype, void* y, int64_t y_stride,
                            cudaStream_t stream);

// LayerNorm in float32 over each of `rows` contiguous rows of n: y = (x − mean) /
// sqrt(var + eps) · w + b with the biased variance (mean of squared deviations); w and b
// (n values each) may be null (1 and 0). y may alias x.
absl::Status LayerNormF32(const float* x, const float* w, const float* b, int64_t rows, int64_t n,
                          float eps, float* y, cudaStream_t stream);

// dst[i] = src[i] converted from `from` to `to` (round to nearest even; overflow gives
// infinity), i < n. src and dst must not overlap unless from == to and src == dst (a no-op);
// overlap is InvalidArgument. from == to copies the bytes.
absl::Status Convert(const void* src, DType from, void* dst, DType to, int64_t n,
                     cudaStream_t stream);

// `rows` rows of `width` elements of `dtype`: dst[r·dst_stride + i] = src[r·src_stride + i].
// Strides in elements, each ≥ width; src and dst must not overlap (not detected).
absl::Status CopyRows(const void* src, int64_t src_stride, void* dst, int64_t dst_stride,
                      int64_t rows, int64_t width, DType dtype, cudaStream_t stream);

// dst[i·n + j] = src[index[i]·n + j] for i < count, j < n (index on the device; an index
// below zero yields zeros). An index must be below src's row count: src's size is not passed,
// so that is the caller's to guarantee.
absl::Status GatherRowsByIndex(const void* src, const int32_t* index, int64_t count, int64_t n,
                               DType dtype, void* dst, cudaStream_t stream);

// x[i] *= s for i < n (float32).
absl::Status Scale(float* x, int64_t n, float s, cudaStream_t stream);

// ids[t·used + j] = j for t < tokens, j < used: the member ids of a per-head grouped product
// (MLA's absorbed k_b / v_b, one matrix per head).
absl::Status FillHeadIds(int32_t* ids, int64_t tokens, int used, cudaStream_t stream);

}  // namespace tessera::cuda
