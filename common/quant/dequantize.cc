#include "common/quant/dequantize.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/util/half.h"
#include "common/util/strings.h"

namespace tessera::quant {

bool CanDequantize(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kF32:
    case gguf::GgmlType::kF16:
    case gguf::GgmlType::kBF16:
      return true;
    default:
      return false;
  }
}

absl::Status DequantizeToFloat(gguf::GgmlType type, absl::Span<const uint8_t> src,
                               uint64_t n_elements, float* dst) {
  const gguf::GgmlTypeInfo* info = gguf::LookupGgmlType(type);
  if (info == nullptr || !CanDequantize(type)) {
    return absl::UnimplementedError(absl::StrCat("dequantize: type ",
                                                 gguf::GgmlTypeName(static_cast<uint32_t>(type)),
                                                 " is not supported yet"));
  }
  auto need = gguf::GgmlTypeBytes(*info, n_elements);
  if (!need) {
    return absl::InvalidArgumentError(absl::StrCat("dequantize: ", n_elements,
                                                   " elements is not a whole number of ",
                                                   ToAbsl(info->name), " blocks"));
  }
  if (src.size() < *need) {
    return absl::InvalidArgumentError(absl::StrCat("dequantize: ", n_elements, " ",
                                                   ToAbsl(info->name), " elements need ", *need,
                                                   " bytes, have ", src.size()));
  }
  const uint8_t* p = src.data();
  switch (type) {
    case gguf::GgmlType::kF32:
      std::memcpy(dst, p, n_elements * sizeof(float));
      break;
    case gguf::GgmlType::kF16:
      for (uint64_t i = 0; i < n_elements; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = Fp16ToFloat(h);
      }
      break;
    case gguf::GgmlType::kBF16:
      for (uint64_t i = 0; i < n_elements; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = Bf16ToFloat(h);
      }
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

}  // namespace tessera::quant
