// Host entry points that queue no kernel of their own, and so are the same on the GPU and in
// the CUDA emulator (whose fake runtime provides cudaGetLastError and cudaGetErrorString):
// built into both tessera_cuda and tessera_cuda_emu.
#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_types.h"
#include "kernels/cuda/glue_kernels.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/nn_kernels.h"

namespace tessera::cuda {

absl::Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::InternalError(absl::StrCat("cuda ", what, ": ", cudaGetErrorString(error)));
}

absl::Status RmsNorm(const void* x, const float* w, int64_t rows, int64_t n, float eps, DType dtype,
                     void* y, cudaStream_t stream) {
  // Contiguous rows are the strided kernel's stride == n case (one kernel for both).
  absl::StatusOr<LaunchConfig> c = RowLaunch("rmsnorm", rows, n);
  if (!c.ok()) return c.status();
  return RmsNormStrided(x, n, w, rows, n, eps, dtype, y, n, stream);
}

}  // namespace tessera::cuda
