#include "common/quant/type_traits.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/quant/blocks.h"
#include "common/quant/reference_rows.h"

namespace tessera::quant {
namespace {

using gguf::GgmlType;

constexpr QuantTraits kTraits[] = {
    {GgmlType::kF32, "f32", 1, 4, ref::DequantizeF32, ref::QuantizeF32, GgmlType::kF32},
    {GgmlType::kF16, "f16", 1, 2, ref::DequantizeF16, ref::QuantizeF16, GgmlType::kF32},
    {GgmlType::kQ4_0, "q4_0", kQK, sizeof(BlockQ4_0), ref::DequantizeQ4_0, ref::QuantizeQ4_0,
     GgmlType::kQ8_0},
    {GgmlType::kQ4_1, "q4_1", kQK, sizeof(BlockQ4_1), ref::DequantizeQ4_1, ref::QuantizeQ4_1,
     GgmlType::kQ8_0},
    {GgmlType::kQ5_0, "q5_0", kQK, sizeof(BlockQ5_0), ref::DequantizeQ5_0, ref::QuantizeQ5_0,
     GgmlType::kQ8_0},
    {GgmlType::kQ5_1, "q5_1", kQK, sizeof(BlockQ5_1), ref::DequantizeQ5_1, ref::QuantizeQ5_1,
     GgmlType::kQ8_0},
    {GgmlType::kQ8_0, "q8_0", kQK, sizeof(BlockQ8_0), ref::DequantizeQ8_0, ref::QuantizeQ8_0,
     GgmlType::kQ8_0},
    {GgmlType::kQ2_K, "q2_K", kQKK, sizeof(BlockQ2_K), ref::DequantizeQ2_K, ref::QuantizeQ2_K,
     GgmlType::kQ8_K},
    {GgmlType::kQ3_K, "q3_K", kQKK, sizeof(BlockQ3_K), ref::DequantizeQ3_K, ref::QuantizeQ3_K,
     GgmlType::kQ8_K},
    {GgmlType::kQ4_K, "q4_K", kQKK, sizeof(BlockQ4_K), ref::DequantizeQ4_K, ref::QuantizeQ4_K,
     GgmlType::kQ8_K},
    {GgmlType::kQ5_K, "q5_K", kQKK, sizeof(BlockQ5_K), ref::DequantizeQ5_K, ref::QuantizeQ5_K,
     GgmlType::kQ8_K},
    {GgmlType::kQ6_K, "q6_K", kQKK, sizeof(BlockQ6_K), ref::DequantizeQ6_K, ref::QuantizeQ6_K,
     GgmlType::kQ8_K},
    {GgmlType::kQ8_K, "q8_K", kQKK, sizeof(BlockQ8_K), ref::DequantizeQ8_K, ref::QuantizeQ8_K,
     GgmlType::kQ8_K},
    {GgmlType::kIQ4_NL, "iq4_nl", kQK, sizeof(BlockIQ4_NL), ref::DequantizeIQ4_NL, nullptr,
     GgmlType::kQ8_0},
    {GgmlType::kIQ4_XS, "iq4_xs", kQKK, sizeof(BlockIQ4_XS), ref::DequantizeIQ4_XS, nullptr,
     GgmlType::kQ8_K},
    {GgmlType::kBF16, "bf16", 1, 2, ref::DequantizeBF16, ref::QuantizeBF16, GgmlType::kF32},
};

}  // namespace

const QuantTraits* FindQuantTraits(GgmlType type) {
  for (const QuantTraits& t : kTraits) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

absl::Span<const QuantTraits> SupportedQuantTypes() { return kTraits; }

absl::Status CheckTypeSupported(uint32_t type_id, std::string_view tensor_name) {
  if (FindQuantTraits(type_id) != nullptr) return absl::OkStatus();
  if (gguf::LookupGgmlType(type_id) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", std::string(tensor_name),
                                                   ": type id ", type_id, " is not a ggml type"));
  }
  std::string supported = absl::StrJoin(
      kTraits, ", ", [](std::string* out, const QuantTraits& t) { absl::StrAppend(out, t.name); });
  return absl::UnimplementedError(absl::StrCat(
      "tensor ", std::string(tensor_name), ": quant type ", gguf::GgmlTypeName(type_id), " (id ",
      type_id, ") is not supported yet (supported: ", supported, ")"));
}

absl::Status CheckRowLength(GgmlType type, int64_t row_length, std::string_view tensor_name) {
  const QuantTraits* t = FindQuantTraits(type);
  if (t == nullptr) return CheckTypeSupported(static_cast<uint32_t>(type), tensor_name);
  if (row_length <= 0 || row_length % t->block_elems != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", std::string(tensor_name), ": row length ", row_length,
        " is not a positive multiple of ", t->name, "'s block of ", t->block_elems, " elements"));
  }
  return absl::OkStatus();
}

}  // namespace tessera::quant
