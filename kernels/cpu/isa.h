// The x86-64 instruction-set levels Tessera's CPU kernels are built for, and which of them
// the host runs. Kernels for each level live in files compiled with that level's flags; the
// dispatchers pick at run time, so one binary runs on any x86-64 (scalar code otherwise).
#pragma once

#include <string>

namespace tessera::cpu {

enum class Isa {
  kScalar = 0,  // plain x86-64 (or any other CPU)
  kAvx2 = 1,    // AVX2 + FMA + F16C
  kAvx512 = 2,  // AVX-512 F/BW/VL (+ VNNI where used) on top of kAvx2
};

// True when the host CPU (CPUID) supports `isa`.
bool IsaSupported(Isa isa);
// The highest level the host supports; $TESSERA_ISA=scalar|avx2|avx512 lowers it (for
// benchmarks and for checking the fallbacks on a capable machine).
Isa BestIsa();
const char* IsaName(Isa isa);
// The host CPU as /proc/cpuinfo names it, with its family and model numbers ("AMD EPYC
// (family 26 model 2)"); "unknown CPU" where that file says nothing.
std::string CpuModelName();

}  // namespace tessera::cpu
