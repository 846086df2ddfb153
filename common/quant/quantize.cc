#include "common/quant/quantize.h"

#include "absl/strings/str_cat.h"
#include "common/quant/type_traits.h"

namespace tessera::quant {

bool CanQuantize(gguf::GgmlType type) {
  const QuantTraits* t = FindQuantTraits(type);
  return t != nullptr && t->quantize != nullptr;
}

absl::Status QuantizeFromFloat(gguf::GgmlType type, absl::Span<const float> x,
                               absl::Span<uint8_t> dst) {
  const QuantTraits* t = FindQuantTraits(type);
  if (t == nullptr || t->quantize == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "quantize: type ", gguf::GgmlTypeName(static_cast<uint32_t>(type)),
        " has no quantizer (supported: every non-IQ type of common/quant/type_traits.h)"));
  }
  if (x.size() % static_cast<size_t>(t->block_elems) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("quantize: ", x.size(),
                                                   " elements is not a whole number of ", t->name,
                                                   " blocks of ", t->block_elems));
  }
  const size_t need = x.size() / static_cast<size_t>(t->block_elems) * t->block_bytes;
  if (dst.size() != need) {
    return absl::InvalidArgumentError(absl::StrCat("quantize: ", x.size(), " ", t->name,
                                                   " elements take ", need,
                                                   " bytes, destination has ", dst.size()));
  }
  t->quantize(x.data(), dst.data(), static_cast<int64_t>(x.size()));
  return absl::OkStatus();
}

}  // namespace tessera::quant
