#include <algorithm>
#include "absl/strings/str_cat.h"
#include "kernels/cuda/kernel_checks.h"

#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/matmul_kernels.h"

namespace tessera::cuda {
namespace {

cudaDataType_t CublasType(DType t) {
  switch (t) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kBF16:
      return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

}  // namespace

absl::Status GemmDequantized(cublasHandle_t cublas, const DeviceMatrix& w, const void* x, DType act,
                             int64_t batch, void* y, void* scratch, size_t scratch_bytes,
                             cudaStream_t stream) {
  absl::StatusOr<int64_t> chunk = CheckGemmDequantized(w, act, batch, scratch_bytes);
  if (!chunk.ok()) return chunk.status();
  const size_t elem = DTypeBytes(act);
  const float alpha = 1.0f, beta = 0.0f;
  for (int64_t r0 = 0; r0 < w.rows; r0 += *chunk) {
    const int64_t n_rows = std::min(*chunk, w.rows - r0);
    if (absl::Status s = Dequantize(w.type, static_cast<const uint8_t*>(w.data) + r0 * w.row_bytes,
                                    n_rows * w.cols, act, scratch, stream);
        !s.ok()) {
      return s;
    }
    // Column-major view: the scratch is W_chunkᵀ (cols × n_rows), x is cols × batch and y is
    // rows × batch, so y[r0 .. r0 + n_rows) = op_T(scratch) · x with ldc = rows.
    const cublasStatus_t st = cublasGemmEx(
        cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n_rows), static_cast<int>(batch),
        static_cast<int>(w.cols), &alpha, scratch, CublasType(act), static_cast<int>(w.cols), x,
        CublasType(act), static_cast<int>(w.cols), &beta, static_cast<uint8_t*>(y) + r0 * elem,
        CublasType(act), static_cast<int>(w.rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
      return absl::InternalError(
          absl::StrCat("cuda gemm: cublasGemmEx failed (", cublasGetStatusString(st), ") for rows ",
                       r0, "..", r0 + n_rows, " of ", w.rows, " x ", w.cols, ", batch ", batch));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::cuda
