// Types shared by the CUDA kernels' host interfaces: activation dtypes, device matrix views
// and the conversion of CUDA errors into absl::Status. Plain C++ (includes only the CUDA
// runtime header), so C++ tests and the worker can call the kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "common/gguf/ggml_type.h"

namespace tessera::cuda {

// Activation (compute) dtype of a kernel's float inputs and outputs.
enum class DType { kF32, kF16, kBF16 };

inline size_t DTypeBytes(DType t) { return t == DType::kF32 ? 4 : 2; }
const char* DTypeName(DType t);

// A quantized weight matrix in device memory (not owning): `rows` rows of `cols` elements,
// row r at data + r·row_bytes, in the GGUF block layout (common/quant/blocks.h).
struct DeviceMatrix {
  gguf::GgmlType type = gguf::GgmlType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  const void* data = nullptr;
};

// OK for cudaSuccess; otherwise Internal naming `what` and CUDA's message. Clears the sticky
// last-error state so that the next call starts clean.
absl::Status CudaStatus(cudaError_t error, const char* what);

// The launch error of the kernel just started, if any (cudaGetLastError), named `kernel`.
absl::Status LaunchStatus(const char* kernel);

}  // namespace tessera::cuda
