#include "common/gguf/ggml_type.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/util/strings.h"

namespace tessera::gguf {
namespace {

// Block sizes from ggml-common.h (spec section 15).
constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::kF32, "f32", 1, 4},
    {GgmlType::kF16, "f16", 1, 2},
    {GgmlType::kQ4_0, "q4_0", 32, 18},
    {GgmlType::kQ4_1, "q4_1", 32, 20},
    {GgmlType::kQ5_0, "q5_0", 32, 22},
    {GgmlType::kQ5_1, "q5_1", 32, 24},
    {GgmlType::kQ8_0, "q8_0", 32, 34},
    {GgmlType::kQ8_1, "q8_1", 32, 36},
    {GgmlType::kQ2_K, "q2_K", 256, 84},
    {GgmlType::kQ3_K, "q3_K", 256, 110},
    {GgmlType::kQ4_K, "q4_K", 256, 144},
    {GgmlType::kQ5_K, "q5_K", 256, 176},
    {GgmlType::kQ6_K, "q6_K", 256, 210},
    {GgmlType::kQ8_K, "q8_K", 256, 292},
    {GgmlType::kIQ2_XXS, "iq2_xxs", 256, 66},
    {GgmlType::kIQ2_XS, "iq2_xs", 256, 74},
    {GgmlType::kIQ3_XXS, "iq3_xxs", 256, 98},
    {GgmlType::kIQ1_S, "iq1_s", 256, 50},
    {GgmlType::kIQ4_NL, "iq4_nl", 32, 18},
    {GgmlType::kIQ3_S, "iq3_s", 256, 110},
    {GgmlType::kIQ2_S, "iq2_s", 256, 82},
    {GgmlType::kIQ4_XS, "iq4_xs", 256, 136},
    {GgmlType::kI8, "i8", 1, 1},
    {GgmlType::kI16, "i16", 1, 2},
    {GgmlType::kI32, "i32", 1, 4},
    {GgmlType::kI64, "i64", 1, 8},
    {GgmlType::kF64, "f64", 1, 8},
    {GgmlType::kIQ1_M, "iq1_m", 256, 56},
    {GgmlType::kBF16, "bf16", 1, 2},
    {GgmlType::kTQ1_0, "tq1_0", 256, 54},
    {GgmlType::kTQ2_0, "tq2_0", 256, 66},
    {GgmlType::kMXFP4, "mxfp4", 32, 17},
    // NVFP4: 64 elements as four 16-element sub-blocks, each an FP8 (UE4M3) scale and 8 bytes.
    {GgmlType::kNVFP4, "nvfp4", 64, 36},
    // Q1_0 / Q2_0 are named but their block layout is not in our spec: block_bytes 0 makes
    // the reader report such a tensor by name instead of guessing its size.
    {GgmlType::kQ1_0, "q1_0", 32, 0},
    {GgmlType::kQ2_0, "q2_0", 32, 0},
};

}  // namespace

const GgmlTypeInfo* LookupGgmlType(uint32_t id) {
  for (const GgmlTypeInfo& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == id) return &t;
  }
  return nullptr;
}

std::optional<GgmlType> GgmlTypeFromName(std::string_view name) {
  std::string lower = absl::AsciiStrToLower(ToAbsl(name));
  for (const GgmlTypeInfo& t : kTypes) {
    if (absl::AsciiStrToLower(ToAbsl(t.name)) == lower) return t.type;
  }
  return std::nullopt;
}

std::string GgmlTypeName(uint32_t id) {
  const GgmlTypeInfo* t = LookupGgmlType(id);
  return t ? std::string(t->name) : absl::StrCat("type#", id);
}

std::optional<uint64_t> GgmlTypeBytes(const GgmlTypeInfo& info, uint64_t n_elements) {
  if (info.block_bytes == 0) return std::nullopt;
  if (n_elements % info.block_elems != 0) return std::nullopt;
  uint64_t blocks = n_elements / info.block_elems;
  uint64_t bytes;
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(info.block_bytes), &bytes)) {
    return std::nullopt;
  }
  return bytes;
}

}  // namespace tessera::gguf
