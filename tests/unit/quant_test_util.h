// Random test data for the quant tests: blocks of any supported type with finite scales.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/gguf/ggml_type.h"
#include "common/quant/type_traits.h"
#include "common/util/half.h"

namespace tessera::quant::testing {

// Byte offsets of the fp16 scale fields inside one block (spec section 15), so random
// blocks can be made with finite, moderate scales; everything else is random bits.
inline std::vector<int> Fp16FieldOffsets(gguf::GgmlType type) {
  using gguf::GgmlType;
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ8_0:
    case GgmlType::kIQ4_NL:
    case GgmlType::kIQ4_XS:
      return {0};
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
      return {0, 2};
    case GgmlType::kQ2_K:
      return {80, 82};
    case GgmlType::kQ3_K:
      return {108};
    case GgmlType::kQ6_K:
      return {208};
    default:
      return {};
  }
}

// `n_elements` of `type` as packed bytes: random quants, scales of magnitude 1e-3..1e-1
// (either sign), plain types holding N(0,1) values.
inline std::vector<uint8_t> RandomBlocks(gguf::GgmlType type, int64_t n_elements,
                                         std::mt19937_64& rng) {
  const QuantTraits* t = FindQuantTraits(type);
  const int64_t blocks = n_elements / t->block_elems;
  std::vector<uint8_t> bytes(static_cast<size_t>(blocks * t->block_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> scale(1e-3f, 1e-1f);
  auto random_scale = [&] { return (byte(rng) & 1 ? -1.0f : 1.0f) * scale(rng); };
  for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
  uint8_t* p = bytes.data();
  switch (type) {
    case gguf::GgmlType::kF32:
      for (int64_t i = 0; i < n_elements; ++i) {
        const float v = normal(rng);
        std::memcpy(p + 4 * i, &v, 4);
      }
      return bytes;
    case gguf::GgmlType::kF16:
    case gguf::GgmlType::kBF16:
      for (int64_t i = 0; i < n_elements; ++i) {
        const float v = normal(rng);
        const uint16_t h = type == gguf::GgmlType::kF16 ? FloatToFp16(v) : FloatToBf16(v);
        std::memcpy(p + 2 * i, &h, 2);
      }
      return bytes;
    case gguf::GgmlType::kQ8_K:
      for (int64_t b = 0; b < blocks; ++b) {
        const float d = random_scale();
        std::memcpy(p + b * t->block_bytes, &d, 4);
      }
      return bytes;
    default:
      break;
  }
  for (int64_t b = 0; b < blocks; ++b) {
    for (int off : Fp16FieldOffsets(type)) {
      const uint16_t h = FloatToFp16(random_scale());
      std::memcpy(p + b * t->block_bytes + off, &h, 2);
    }
  }
  return bytes;
}

}  // namespace tessera::quant::testing
