// Kernels compiled with AVX-512 F/BW/VL/VNNI (files *_avx512.cc). Call them only when
// IsaSupported(Isa::kAvx512). Same file rules as kernels_avx2.h.
#pragma once

#include <cstdint>

namespace tessera::cpu::avx512 {

// y[b * ldy + r] = Σ_k w[r * ldw + k] · xt[k * ldxt + b] for r < rows, b < batch. `xt` is x
// transposed with ldxt ≥ batch rounded up to 16; lanes past `batch` must be readable (their
// results are discarded).
void FloatGemmTransposedX(const float* w, int64_t ldw, int64_t rows, const float* xt, int64_t ldxt,
                          int64_t batch, int64_t n, float* y, int64_t ldy);

}  // namespace tessera::cpu::avx512
