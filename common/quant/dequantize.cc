#include "common/quant/dequantize.h"

#include "absl/strings/str_cat.h"
#include "common/quant/type_traits.h"

namespace tessera::quant {

bool CanDequantize(gguf::GgmlType type) { return FindQuantTraits(type) != nullptr; }

absl::Status DequantizeToFloat(gguf::GgmlType type, absl::Span<const uint8_t> src,
                               uint64_t n_elements, float* dst) {
  const QuantTraits* traits = FindQuantTraits(type);
  if (traits == nullptr) {
    return absl::UnimplementedError(absl::StrCat("dequantize: type ",
                                                 gguf::GgmlTypeName(static_cast<uint32_t>(type)),
                                                 " is not supported yet"));
  }
  if (n_elements % static_cast<uint64_t>(traits->block_elems) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dequantize: ", n_elements, " elements is not a whole number of ",
                     traits->name, " blocks of ", traits->block_elems));
  }
  const uint64_t blocks = n_elements / static_cast<uint64_t>(traits->block_elems);
  if (blocks > src.size() / static_cast<uint64_t>(traits->block_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dequantize: ", n_elements, " ", traits->name, " elements need ",
        blocks * static_cast<uint64_t>(traits->block_bytes), " bytes, have ", src.size()));
  }
  traits->dequantize(src.data(), dst, static_cast<int64_t>(n_elements));
  return absl::OkStatus();
}

}  // namespace tessera::quant
