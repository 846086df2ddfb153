// CudaStatus (cuda_types.h), built into both the CUDA backend and the CUDA emulator, whose
// fake runtime provides the same cudaGetLastError and cudaGetErrorString.
#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_types.h"

namespace tessera::cuda {

absl::Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::InternalError(absl::StrCat("cuda ", what, ": ", cudaGetErrorString(error)));
}

}  // namespace tessera::cuda
