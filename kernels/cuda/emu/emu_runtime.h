// The CUDA emulator's launch mechanism, for tests that run the GPU executor's host code on a
// machine without a GPU: "device" memory is host memory (cudaMalloc is malloc), streams run
// their work at once and in order, and the emulated kernels (emu_kernels.cc, the contracts of
// kernels/cuda/*.h computed in plain C++) go through Launch, so that a stream being captured
// (cudaStreamBeginCapture) records them into a graph that cudaGraphLaunch replays. Linked
// instead of the CUDA runtime, cuBLAS and the real kernels (target tessera_cuda_emu); never
// part of a program users run.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <functional>

namespace tessera::cuda::emu {

// Runs `work` now, or appends it to the graph `stream` is capturing.
void Launch(cudaStream_t stream, std::function<void()> work);

// Sets the error cudaGetLastError returns next (a launch the emulated device refuses).
void SetLastError(cudaError_t error);

// The stream cublasSetStream gave `handle` (nullptr: the legacy default stream).
cudaStream_t CublasStream(cublasHandle_t handle);

// Device memory the emulator reports as total (cudaMemGetInfo); allocations count against it.
inline constexpr size_t kEmulatedDeviceBytes = size_t{8} << 30;

// Shared memory per block the emulated device gives a launch: 48 KiB, or up to
// kEmulatedOptinSharedBytes (an H100's 227 KiB) for a kernel whose
// cudaFuncAttributeMaxDynamicSharedMemorySize was raised (cudaFuncSetAttribute).
inline constexpr size_t kEmulatedSharedBytes = size_t{48} << 10;
inline constexpr size_t kEmulatedOptinSharedBytes = size_t{227} << 10;
// The dynamic shared memory `kernel` may launch with (kEmulatedSharedBytes unless raised).
size_t MaxDynamicShared(const void* kernel);

}  // namespace tessera::cuda::emu
