// LaunchStatus of the real runtime (the emulator has its own; CudaStatus is cuda_status.cc).
#include "kernels/cuda/cuda_types.h"

namespace tessera::cuda {

absl::Status LaunchStatus(const char* kernel) { return CudaStatus(cudaGetLastError(), kernel); }

}  // namespace tessera::cuda
