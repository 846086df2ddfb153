// Dequantization and matrix products on the GPU for every weight type of
// launch_config.h's CudaQuantGeometry. Pointers are device pointers; work is queued on
// `stream` and the functions return once it is queued (errors are shape errors, found before
// any launch, or CUDA launch errors).
#pragma once

#include <cublas_v2.h>

#include "kernels/cuda/cuda_types.h"

namespace tessera::cuda {

// dst[i] = element i of the `n` elements of `type` at `src`, converted to `out`.
absl::Status Dequantize(gguf::GgmlType type, const void* src, int64_t n, DType out, void* dst,
                        cudaStream_t stream);

// Decode GEMV: y[b·w.rows + r] = Σ_k W[r][k] · x[b·w.cols + k] for b < batch, with W read
// quantized and decoded in registers (one warp per row), activations and output in `act`,
// accumulation in float32. Any batch works; it is processed kGemvMaxBatch tokens per pass.
absl::Status Gemv(const DeviceMatrix& w, const void* x, DType act, int64_t batch, void* y,
                  cudaStream_t stream);

// Grouped decode GEMV for MoE experts (spec 5.6 step 9): `w` describes one expert (rows ×
// cols); expert e starts at w.data + e·expert_bytes. For token t and choice j with
// e = ids[t·used + j]: y[(t·used + j)·rows + r] = W_e[r] · x_{t,j}, where x_{t,j} is
// x + (t·used + j)·cols when x_per_choice (the down projection's inputs) and x + t·cols
// otherwise (gate and up share the token's input). An id outside [0, experts) yields zeros.
absl::Status GemvExperts(const DeviceMatrix& w, size_t expert_bytes, int experts,
                         const int32_t* ids, int64_t tokens, int used, const void* x,
                         bool x_per_choice, DType act, void* y, cudaStream_t stream);

// out[t·n + i] = Σ_j weights[t·used + j] · y[(t·used + j)·n + i]: the routed experts' outputs
// combined with their routing weights, float32 accumulation.
absl::Status MoeCombine(const void* y, const float* weights, int64_t tokens, int used, int64_t n,
                        DType act, void* out, cudaStream_t stream);

// Prefill GEMM, same result layout as Gemv: W is dequantized to `act` into `scratch`
// (`scratch_bytes`, as many rows at a time as fit, see GemmScratchRows) and multiplied with
// cublasGemmEx, float32 accumulation. `cublas` must be bound to `stream` by the caller.
absl::Status GemmDequantized(cublasHandle_t cublas, const DeviceMatrix& w, const void* x, DType act,
                             int64_t batch, void* y, void* scratch, size_t scratch_bytes,
                             cudaStream_t stream);

}  // namespace tessera::cuda
