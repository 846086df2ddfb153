#include "kernels/cpu/activation_quant.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/quant/blocks.h"
#include "common/util/half.h"

namespace tessera::cpu {
namespace {

// Round half to even, as _mm256_round_ps(_MM_ROUND_NEAREST) and ggml's nearest_int do:
// adding 1.5·2^23 leaves the rounded integer in the low mantissa bits. Valid for
// |v| < 2^22, which activation quants (|v| ≤ 127.5) always are; much cheaper than
// std::nearbyint, which baseline x86-64 cannot inline.
int RoundHalfEven(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

}  // namespace

void QuantizeActivationsQ8_0(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<quant::BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / quant::kQK; ++i, x += quant::kQK) {
    float amax = 0.0f;
    for (int j = 0; j < quant::kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    y[i].d = FloatToFp16(amax / 127.0f);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < quant::kQK; ++j) y[i].qs[j] = static_cast<int8_t>(RoundHalfEven(x[j] * id));
  }
}

void QuantizeActivationsQ8_K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<quant::BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / quant::kQKK; ++i, x += quant::kQKK) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < quant::kQKK; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < quant::kQKK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::min(127, RoundHalfEven(iscale * x[j])));
    }
    for (int b = 0; b < quant::kQKK / 16; ++b) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * b + l];
      y[i].bsums[b] = static_cast<int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace tessera::cpu
