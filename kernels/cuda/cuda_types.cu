#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_types.h"

namespace tessera::cuda {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
  }
  return "?";
}

absl::Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::InternalError(absl::StrCat("cuda ", what, ": ", cudaGetErrorString(error)));
}

absl::Status LaunchStatus(const char* kernel) { return CudaStatus(cudaGetLastError(), kernel); }

}  // namespace tessera::cuda
