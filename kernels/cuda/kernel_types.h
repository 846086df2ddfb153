// The CUDA kernels' plain types, without the CUDA runtime header: activation dtypes and device
// matrix views. cuda_types.h re-exports them for the launchers; the argument checks
// (kernel_checks.h), built everywhere, use them directly.
#pragma once

#include <cstddef>
#include <cstdint>

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

}  // namespace tessera::cuda
