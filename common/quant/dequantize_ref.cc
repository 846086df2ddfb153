// Reference dequantizers: ggml's dequantize_row_* (ggml-quants.c) operation for operation.
// Every product below is exact in float32 (an 11-bit fp16 significand times small integers),
// so only the final subtraction of a minimum rounds; the order of additions is ggml's.
#include <cstring>

#include "common/quant/blocks.h"
#include "common/quant/reference_rows.h"
#include "common/util/half.h"

namespace tessera::quant::ref {

void DequantizeF32(const void* src, float* y, int64_t n) {
  std::memcpy(y, src, static_cast<size_t>(n) * sizeof(float));
}

void DequantizeF16(const void* src, float* y, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) y[i] = Fp16ToFloat(h[i]);
}

void DequantizeBF16(const void* src, float* y, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) y[i] = Bf16ToFloat(h[i]);
}

void DequantizeQ4_0(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = Fp16ToFloat(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((x[i].qs[j] & 0xF) - 8) * d;
      y[j + 16] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantizeQ4_1(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = Fp16ToFloat(x[i].d);
    const float m = Fp16ToFloat(x[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(x[i].qs[j] & 0xF) * d + m;
      y[j + 16] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
    }
  }
}

namespace {

uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

void DequantizeQ5_0(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = Fp16ToFloat(x[i].d);
    const uint32_t qh = LoadU32(x[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
      const int hi = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = static_cast<float>(lo - 16) * d;
      y[j + 16] = static_cast<float>(hi - 16) * d;
    }
  }
}

void DequantizeQ5_1(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = Fp16ToFloat(x[i].d);
    const float m = Fp16ToFloat(x[i].m);
    const uint32_t qh = LoadU32(x[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
      const int hi = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = static_cast<float>(lo) * d + m;
      y[j + 16] = static_cast<float>(hi) * d + m;
    }
  }
}

void DequantizeQ8_0(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = Fp16ToFloat(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

// Element e = 128h + 32j + 16k + l uses quant bits 2j of qs[32h + 16k + l] and
// scale byte 8h + 2j + k (spec 15.2).
void DequantizeQ2_K(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ2_K*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = Fp16ToFloat(x[i].d);
    const float dmin = Fp16ToFloat(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int h = 0; h < 2; ++h, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int k = 0; k < 2; ++k) {
          const uint8_t sc = x[i].scales[is++];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) {
            *y++ = dl * static_cast<float>((q[16 * k + l] >> shift) & 3) - ml;
          }
        }
      }
    }
  }
}

void DequantizeQ3_K(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ3_K*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = Fp16ToFloat(x[i].d);
    int scales[16];
    UnpackQ3KScales(x[i].scales, scales);
    const uint8_t* q = x[i].qs;
    uint8_t mask = 1;
    int is = 0;
    for (int h = 0; h < 2; ++h, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, mask <<= 1) {
        for (int k = 0; k < 2; ++k) {
          const float dl = d * static_cast<float>(scales[is++]);
          for (int l = 0; l < 16; ++l) {
            const int q2 = (q[16 * k + l] >> shift) & 3;
            const int v = q2 - ((x[i].hmask[16 * k + l] & mask) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

void DequantizeQ4_K(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ4_K*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = Fp16ToFloat(x[i].d);
    const float dmin = Fp16ToFloat(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      UnpackScaleMinK4(is, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      UnpackScaleMinK4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void DequantizeQ5_K(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ5_K*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = Fp16ToFloat(x[i].d);
    const float dmin = Fp16ToFloat(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
      uint8_t sc, m;
      UnpackScaleMinK4(is, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      UnpackScaleMinK4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) {
        *y++ = d1 * static_cast<float>((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
      }
    }
  }
}

void DequantizeQ6_K(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = Fp16ToFloat(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int h = 0; h < 2; ++h, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

void DequantizeQ8_K(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i, y += kQKK) {
    for (int j = 0; j < kQKK; ++j) y[j] = x[i].d * static_cast<float>(x[i].qs[j]);
  }
}

void DequantizeIQ4_NL(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = Fp16ToFloat(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = d * static_cast<float>(kIq4nlValues[x[i].qs[j] & 0xF]);
      y[j + 16] = d * static_cast<float>(kIq4nlValues[x[i].qs[j] >> 4]);
    }
  }
}

void DequantizeIQ4_XS(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = Fp16ToFloat(x[i].d);
    const uint8_t* qs = x[i].qs;
    for (int ib = 0; ib < 8; ++ib, y += 32, qs += 16) {
      const int ls = ((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
                     (((x[i].scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0xF]);
        y[j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace tessera::quant::ref
