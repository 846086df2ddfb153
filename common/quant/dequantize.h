// Dequantization of whole tensors to float32, for every type Tessera supports.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/gguf/ggml_type.h"

namespace tessera::quant {

// True when `type` can be dequantized by DequantizeToFloat.
bool CanDequantize(gguf::GgmlType type);

// Decodes `n_elements` values of `type` from `src` into `dst` (which must hold n_elements).
// Errors: a type not supported (named), n_elements not a multiple of the block, or `src`
// holding fewer bytes than n_elements need.
absl::Status DequantizeToFloat(gguf::GgmlType type, absl::Span<const uint8_t> src,
                               uint64_t n_elements, float* dst);

}  // namespace tessera::quant
