// The ggml tensor type ids a GGUF file may name, with their block geometry.
//
// This is a fact of the file format (spec section 2.2 and 15): every id a reader may meet,
// whether or not Tessera can compute with it, so that byte sizes are right for every tensor
// and an unsupported type is reported by name. Which types the kernels support is said by
// common/quant, not here.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera::gguf {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
  kQ2_0 = 42,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;  // ggml's name, e.g. "q4_K", "bf16"
  uint32_t block_elems;   // elements per block (1 for plain types)
  uint32_t block_bytes;   // bytes per block; 0 where the layout is not known to us
};

// The geometry of type id `id`, or nullptr for an id that is unknown or retired
// (4, 5, 31-33, 36-38). Never aborts.
const GgmlTypeInfo* LookupGgmlType(uint32_t id);
inline const GgmlTypeInfo* LookupGgmlType(GgmlType t) {
  return LookupGgmlType(static_cast<uint32_t>(t));
}

// Case-insensitive lookup by ggml name ("Q4_K", "q4_k", "bf16"); nullopt when unknown.
std::optional<GgmlType> GgmlTypeFromName(std::string_view name);

// "q4_K", or "type#N" for an unknown id.
std::string GgmlTypeName(uint32_t id);

// Bytes taken by `n_elements` of the type, or nullopt when `n_elements` is not a multiple
// of the block size, the result overflows 64 bits, or the type's layout is unknown.
std::optional<uint64_t> GgmlTypeBytes(const GgmlTypeInfo& info, uint64_t n_elements);

}  // namespace tessera::gguf
