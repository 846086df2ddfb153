// What Tessera can do with each ggml type: the per-type codecs and the activation format of
// its integer dot product. Block geometry itself (elements and bytes per block) is a file
// format fact kept in common/gguf/ggml_type.h; this table adds support information only.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/gguf/ggml_type.h"

namespace tessera::quant {

// Decodes `n` elements (a multiple of the block size) from packed blocks to float32.
using DequantizeRowFn = void (*)(const void* src, float* y, int64_t n);
// Encodes `n` float32 elements (a multiple of the block size) into packed blocks.
using QuantizeRowFn = void (*)(const float* x, void* dst, int64_t n);

struct QuantTraits {
  gguf::GgmlType type;
  const char* name;                // ggml's name, e.g. "q4_K"
  int block_elems;                 // equal to the format table's; checked by a unit test
  int block_bytes;                 // sizeof the block struct in blocks.h
  DequantizeRowFn dequantize;      // reference decoder, bit-exact with ggml
  QuantizeRowFn quantize;          // reference encoder; nullptr for the IQ types
  gguf::GgmlType activation_type;  // what matmul quantizes x to: kQ8_0, kQ8_K, or kF32 (none)
};

// The traits of `type`, or nullptr when Tessera cannot compute with it.
const QuantTraits* FindQuantTraits(gguf::GgmlType type);
inline const QuantTraits* FindQuantTraits(uint32_t type_id) {
  return FindQuantTraits(static_cast<gguf::GgmlType>(type_id));
}

// Every supported type, in type-id order.
absl::Span<const QuantTraits> SupportedQuantTypes();

// OK when a tensor of type `type_id` can be used. Otherwise Unimplemented naming the tensor
// and the type ("tensor blk.0.ffn_down.weight: quant type iq2_xxs (id 16) is not supported
// yet"), or InvalidArgument for an id that is no ggml type at all. Meant for load-time
// validation, so an unsupported file fails before any compute.
absl::Status CheckTypeSupported(uint32_t type_id, std::string_view tensor_name);

// OK when rows of `row_length` elements of `type` are whole blocks; otherwise an
// InvalidArgument naming the tensor, its row length and the block size.
absl::Status CheckRowLength(gguf::GgmlType type, int64_t row_length, std::string_view tensor_name);

}  // namespace tessera::quant
