// Types shared by the CUDA kernels' host interfaces: activation dtypes and device matrix views
// (kernel_types.h) and the conversion of CUDA errors into absl::Status. Plain C++ (includes
// only the CUDA runtime header), so C++ tests and the worker can call the kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/kernel_types.h"
#include "kernels/cuda/launch_config.h"

namespace tessera::cuda {

// OK for cudaSuccess; otherwise Internal naming `what` and CUDA's message. Clears the sticky
// last-error state so that the next call starts clean.
absl::Status CudaStatus(cudaError_t error, const char* what);

// The launch error of the kernel just started, if any (cudaGetLastError), named `kernel`.
absl::Status LaunchStatus(const char* kernel);

// The current device's launch limits (cudaDeviceGetAttribute: threads per block, shared memory
// with and without the opt-in, grid sizes, multiprocessors), read once per device; DeviceLimits'
// defaults for any attribute the runtime does not give.
DeviceLimits CurrentDeviceLimits();

}  // namespace tessera::cuda
