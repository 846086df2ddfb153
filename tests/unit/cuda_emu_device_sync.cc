// cudaDeviceSynchronize for the GPU kernel tests on the emulator (tests/unit/cuda_test_util.h
// calls it; the emulator's runtime, kernels/cuda/emu/fake_cudart.cc, does not define it yet).
// Emulated streams run their work at once, so there is nothing to wait for. Weak, so that a
// definition the runtime gains later takes precedence instead of clashing.
#include <cuda_runtime.h>

__attribute__((weak)) cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
