// cublasGemmEx for the SIMT emulator: the one cuBLAS product the kernels call (gemm.cu's
// GemmDequantized), column-major with op(A) = A or Aᵀ, op(B) likewise, float32, float16 or
// bfloat16 operands, float32 accumulation in k order. Runs on the handle's stream, so that
// graph capture records it like the kernels around it.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/emu/emu_runtime.h"

namespace {

float Load(const void* p, cudaDataType t, int64_t i) {
  switch (t) {
    case CUDA_R_16F:
      return __half2float(static_cast<const __half*>(p)[i]);
    case CUDA_R_16BF:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

void Store(void* p, cudaDataType t, int64_t i, float v) {
  switch (t) {
    case CUDA_R_16F:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      break;
    case CUDA_R_16BF:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      break;
    default:
      static_cast<float*>(p)[i] = v;
  }
}

bool Supported(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }

}  // namespace

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t) {
  const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || (!ta && transa != CUBLAS_OP_N) || (!tb && transb != CUBLAS_OP_N) ||
      lda < (ta ? k : m) || ldb < (tb ? n : k) || ldc < m) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (compute != CUBLAS_COMPUTE_32F || !Supported(Atype) || !Supported(Btype) ||
      !Supported(Ctype)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  tessera::cuda::emu::Launch(tessera::cuda::emu::CublasStream(handle), [=] {
    // op(A) as m rows of k and op(B) as n columns of k, in float, then the products.
    std::vector<float> a_rows(static_cast<size_t>(m) * k), b_cols(static_cast<size_t>(n) * k);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t l = 0; l < k; ++l)
        a_rows[i * k + l] = Load(A, Atype, ta ? l + i * lda : i + l * lda);
    }
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t l = 0; l < k; ++l)
        b_cols[j * k + l] = Load(B, Btype, tb ? j + l * ldb : l + j * ldb);
    }
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        float acc = 0.0f;
        for (int64_t l = 0; l < k; ++l) acc += a_rows[i * k + l] * b_cols[j * k + l];
        const float old = b != 0.0f ? Load(C, Ctype, i + j * ldc) : 0.0f;
        Store(C, Ctype, i + j * ldc, a * acc + b * old);
      }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}
