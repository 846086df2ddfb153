// Slow, obviously correct float64 matrix product used as the truth in kernel tests.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/gguf/ggml_type.h"

namespace tessera::kernels::reference {

// y[b * rows + r] = Σ_k W[r][k] · x[b * cols + k] in float64, with W decoded by the
// reference dequantizer (bit-exact with ggml) and widened exactly to double.
absl::StatusOr<std::vector<double>> MatmulFloat64(gguf::GgmlType type, absl::Span<const uint8_t> w,
                                                  int64_t rows, int64_t cols,
                                                  absl::Span<const float> x, int64_t batch);

}  // namespace tessera::kernels::reference
