// The per-token operations of the forward pass on the GPU (spec section 5), the twins of
// kernels/cpu/nn_ops.h: activations in `dtype`, arithmetic in float32. Device pointers,
// queued on `stream`; errors are shape errors found before any launch, or launch errors.
#pragma once

#include "kernels/cuda/cuda_types.h"

namespace tessera::cuda {

// y[r] = x[r] / sqrt(mean(x[r]²) + eps) · w for each of `rows` rows of `n`; w (float32, n
// values) may be null; y may alias x.
absl::Status RmsNorm(const void* x, const float* w, int64_t rows, int64_t n, float eps, DType dtype,
                     void* y, cudaStream_t stream);

// RoPE in place on `tokens` tokens of `heads` heads of `head_dim`: head h of token t starts
// at x + t·token_stride + h·head_dim (elements). Pair i of a head rotates by
// θ = positions[t] · theta_scales[i] (double, device, n_rot/2 values from
// RopeThetaScales), cos and sin times `magnitude` (spec 5.2/5.3). NORM pairs (2i, 2i+1), NEOX
// pairs (i, i + n_rot/2); components ≥ n_rot pass through.
struct RopeArgs {
  int64_t tokens = 0;
  int heads = 0;
  int head_dim = 0;
  int64_t token_stride = 0;
  int n_rot = 0;
  bool neox = false;
  float magnitude = 1.0f;
  const int32_t* positions = nullptr;    // device, one per token
  const double* theta_scales = nullptr;  // device, n_rot/2
};
absl::Status Rope(const RopeArgs& args, DType dtype, void* x, cudaStream_t stream);

// In-place softmax over each of `rows` rows of `n` values (max-subtracted).
absl::Status Softmax(void* x, int64_t rows, int64_t n, DType dtype, cudaStream_t stream);

// out = silu(gate) · up element-wise over n values; out may alias gate.
absl::Status SiluMul(const void* gate, const void* up, int64_t n, DType dtype, void* out,
                     cudaStream_t stream);

// y[i] += x[i] over n values (the residual stream).
absl::Status AddInPlace(void* y, const void* x, int64_t n, DType dtype, cudaStream_t stream);

// Embedding lookup: row ids[i] of `table` (any supported weight type), decoded into
// out[i·table.cols ...] in `dtype`, for i < n. An id outside [0, table.rows) yields zeros.
absl::Status GatherRows(const DeviceMatrix& table, const int32_t* ids, int64_t n, DType dtype,
                        void* out, cudaStream_t stream);

}  // namespace tessera::cuda
