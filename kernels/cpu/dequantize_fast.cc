#include "kernels/cpu/dequantize_fast.h"

#include "common/quant/type_traits.h"
#include "kernels/cpu/kernels_avx2.h"

namespace tessera::cpu {
namespace {

bool UsesAvx2(gguf::GgmlType type, Isa isa) {
  return static_cast<int>(isa) >= static_cast<int>(Isa::kAvx2) && IsaSupported(Isa::kAvx2) &&
         avx2::Dequantizer(type) != nullptr;
}

}  // namespace

DequantizeRowFn FastDequantizer(gguf::GgmlType type, Isa isa) {
  if (UsesAvx2(type, isa)) return avx2::Dequantizer(type);
  const quant::QuantTraits* t = quant::FindQuantTraits(type);
  return t == nullptr ? nullptr : t->dequantize;
}

const char* FastDequantizerName(gguf::GgmlType type, Isa isa) {
  if (UsesAvx2(type, isa)) return "avx2";
  return quant::FindQuantTraits(type) == nullptr ? "unsupported" : "scalar";
}

}  // namespace tessera::cpu
