#include "kernels/cpu/isa.h"

#include <cstdlib>
#include <cstring>

namespace tessera::cpu {

bool IsaSupported(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
    case Isa::kAvx512:
      return IsaSupported(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512vnni");
  }
  return false;
#else
  return isa == Isa::kScalar;
#endif
}

namespace {

Isa DetectBestIsa() {
  Isa best = Isa::kScalar;
  if (IsaSupported(Isa::kAvx512)) {
    best = Isa::kAvx512;
  } else if (IsaSupported(Isa::kAvx2)) {
    best = Isa::kAvx2;
  }
  const char* cap = std::getenv("TESSERA_ISA");
  if (cap != nullptr) {
    Isa limit = best;
    if (std::strcmp(cap, "scalar") == 0) limit = Isa::kScalar;
    if (std::strcmp(cap, "avx2") == 0) limit = Isa::kAvx2;
    if (static_cast<int>(limit) < static_cast<int>(best)) best = limit;
  }
  return best;
}

}  // namespace

Isa BestIsa() {
  static const Isa best = DetectBestIsa();
  return best;
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

}  // namespace tessera::cpu
