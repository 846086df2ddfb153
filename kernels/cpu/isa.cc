#include "kernels/cpu/isa.h"

#include <cstdlib>
#include <cstring>
#include <fstream>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tessera::cpu {
namespace {

#if defined(__x86_64__)
// CPUID leaf 1, ECX bit 29. clang 14's __builtin_cpu_supports does not know "f16c".
// Read once: CPUID traps to the hypervisor on a VM and costs microseconds, and every matmul
// asks.
bool HasF16c() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    return (ecx & (1u << 29)) != 0;
  }();
  return has;
}
#endif

}  // namespace

bool IsaSupported(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c();
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

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name, family, model;
  auto value = [](const std::string& l) {
    const size_t colon = l.find(':');
    if (colon == std::string::npos) return std::string();
    const size_t start = l.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : l.substr(start);
  };
  auto key = [](const std::string& l) {
    const size_t end = l.find_last_not_of(" \t", l.find(':') - 1);
    return end == std::string::npos ? std::string() : l.substr(0, end + 1);
  };
  while (std::getline(in, line) && !line.empty()) {
    if (line.find(':') == std::string::npos) continue;
    const std::string k = key(line);
    if (k == "model name") name = value(line);
    if (k == "cpu family") family = value(line);
    if (k == "model") model = value(line);
  }
  if (name.empty()) return "unknown CPU";
  if (!family.empty() && !model.empty()) name += " (family " + family + " model " + model + ")";
  return name;
}

}  // namespace tessera::cpu
