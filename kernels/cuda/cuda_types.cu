// LaunchStatus of the real runtime; the emulator has its own (CudaStatus, the same in both, is
// in shared_entry_points.cc).
#include "kernels/cuda/cuda_types.h"

namespace tessera::cuda {

absl::Status LaunchStatus(const char* kernel) { return CudaStatus(cudaGetLastError(), kernel); }

}  // namespace tessera::cuda
