// Reference quantizers. Each picks scales directly from the block's range (no search), so
// that the error bound documented in quantize.h can be proved from the algorithm:
//   - scales are rounded to fp16 before the quants are chosen, so a stored block decodes to
//     the value the quant was rounded against;
//   - K-quant sub-block scales are quantized against a super-block scale, and the quants are
//     then rounded against the decoded sub-block scale (no drift between the two).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/quant/blocks.h"
#include "common/quant/reference_rows.h"
#include "common/util/half.h"

namespace tessera::quant::ref {
namespace {

int RoundToInt(float v) { return static_cast<int>(std::nearbyint(v)); }

// Round v/step to the nearest integer in [lo, hi]; 0 when the step is 0.
int QuantizeValue(float v, float step, int lo, int hi) {
  if (step == 0.0f) return 0;
  return std::clamp(RoundToInt(v / step), lo, hi);
}

// The element of largest magnitude, with its sign.
float SignedAbsMax(const float* x, int n) {
  float best = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(best)) best = x[i];
  }
  return best;
}

// Symmetric block: the extreme value maps exactly to -half (ggml's convention), so a block
// uses all 2^bits levels; returns the fp16 scale and writes unsigned quants (q + half).
uint16_t QuantizeSymmetric(const float* x, int n, int half, uint8_t* u) {
  const float max = SignedAbsMax(x, n);
  const uint16_t d16 = FloatToFp16(max / static_cast<float>(-half));
  const float d = Fp16ToFloat(d16);
  for (int i = 0; i < n; ++i) {
    u[i] = static_cast<uint8_t>(QuantizeValue(x[i], d, -half, half - 1) + half);
  }
  return d16;
}

// Asymmetric block: y = d·u + m with u in [0, levels-1].
void QuantizeAsymmetric(const float* x, int n, int levels, uint16_t* d_out, uint16_t* m_out,
                        uint8_t* u) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  *m_out = FloatToFp16(lo);
  const float m = Fp16ToFloat(*m_out);
  *d_out = FloatToFp16((hi - m) / static_cast<float>(levels - 1));
  const float d = Fp16ToFloat(*d_out);
  for (int i = 0; i < n; ++i)
    u[i] = static_cast<uint8_t>(QuantizeValue(x[i] - m, d, 0, levels - 1));
}

}  // namespace

void QuantizeF32(const float* x, void* dst, int64_t n) {
  std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
}

void QuantizeF16(const float* x, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = FloatToFp16(x[i]);
}

void QuantizeBF16(const float* x, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = FloatToBf16(x[i]);
}

void QuantizeQ4_0(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    uint8_t u[kQK];
    y[i].d = QuantizeSymmetric(x, kQK, 8, u);
    for (int j = 0; j < 16; ++j) y[i].qs[j] = static_cast<uint8_t>(u[j] | (u[j + 16] << 4));
  }
}

void QuantizeQ4_1(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    uint8_t u[kQK];
    QuantizeAsymmetric(x, kQK, 16, &y[i].d, &y[i].m, u);
    for (int j = 0; j < 16; ++j) y[i].qs[j] = static_cast<uint8_t>(u[j] | (u[j + 16] << 4));
  }
}

namespace {

// Q5 layouts: low nibbles as Q4, bit 4 of element j in bit j of qh.
void PackQ5(const uint8_t* u, uint8_t* qs, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((u[j] & 0xF) | ((u[j + 16] & 0xF) << 4));
    qh |= static_cast<uint32_t>(u[j] >> 4) << j;
    qh |= static_cast<uint32_t>(u[j + 16] >> 4) << (j + 16);
  }
  std::memcpy(qh_bytes, &qh, 4);
}

}  // namespace

void QuantizeQ5_0(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    uint8_t u[kQK];
    y[i].d = QuantizeSymmetric(x, kQK, 16, u);
    PackQ5(u, y[i].qs, y[i].qh);
  }
}

void QuantizeQ5_1(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    uint8_t u[kQK];
    QuantizeAsymmetric(x, kQK, 32, &y[i].d, &y[i].m, u);
    PackQ5(u, y[i].qs, y[i].qh);
  }
}

// Symmetric over 127 levels each side; the scale is rounded to fp16 first, so the clamp only
// bites when that rounding shrank the scale (by at most 2^-11).
void QuantizeQ8_0(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    y[i].d = FloatToFp16(amax / 127.0f);
    const float d = Fp16ToFloat(y[i].d);
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(QuantizeValue(x[j], d, -127, 127));
    }
  }
}

void QuantizeQ8_K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
    float amax = 0.0f;
    for (int j = 0; j < kQKK; ++j) amax = std::max(amax, std::fabs(x[j]));
    y[i].d = amax / 127.0f;
    for (int j = 0; j < kQKK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(QuantizeValue(x[j], y[i].d, -127, 127));
    }
    for (int b = 0; b < kQKK / 16; ++b) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * b + l];
      y[i].bsums[b] = static_cast<int16_t>(sum);
    }
  }
}

namespace {

// K-quant super-block with signed sub-block scales (Q3_K, Q6_K). Sub-block j of `sub_len`
// values wants scale s_j = (signed max)/-half; those are quantized to integers in
// [-scale_max-1, scale_max] against d = max|s_j|/scale_max, and every value is then rounded
// against its decoded scale d16·sc_j into [-half, half-1]. `u` receives q + half.
uint16_t QuantizeSymmetricSuper(const float* x, int n_sub, int sub_len, int half, int scale_max,
                                int* sc, uint8_t* u) {
  float s[16];
  float smax = 0.0f;
  for (int j = 0; j < n_sub; ++j) {
    s[j] = SignedAbsMax(x + j * sub_len, sub_len) / static_cast<float>(-half);
    smax = std::max(smax, std::fabs(s[j]));
  }
  const uint16_t d16 = FloatToFp16(smax / static_cast<float>(scale_max));
  const float d = Fp16ToFloat(d16);
  for (int j = 0; j < n_sub; ++j) {
    sc[j] = QuantizeValue(s[j], d, -scale_max - 1, scale_max);
    const float dl = d * static_cast<float>(sc[j]);
    for (int l = 0; l < sub_len; ++l) {
      const int e = j * sub_len + l;
      u[e] = static_cast<uint8_t>(QuantizeValue(x[e], dl, -half, half - 1) + half);
    }
  }
  return d16;
}

// K-quant super-block with unsigned scales and subtracted minimums (Q2_K, Q4_K, Q5_K):
// y = d·sc_j·u − dmin·m_j, u in [0, levels-1], sc_j and m_j in [0, scale_max]. The minimum
// of each sub-block is clipped to ≤ 0 (ggml's convention) so m_j ≥ 0. Scales are rounded up
// so that the decoded step never shrinks below what the sub-block's range needs.
void QuantizeAsymmetricSuper(const float* x, int n_sub, int sub_len, int levels, int scale_max,
                             uint16_t* d_out, uint16_t* dmin_out, int* sc, int* m, uint8_t* u) {
  float step[16], neg_min[16];
  float step_max = 0.0f, neg_min_max = 0.0f;
  for (int j = 0; j < n_sub; ++j) {
    const float* v = x + j * sub_len;
    float lo = 0.0f, hi = v[0];
    for (int l = 0; l < sub_len; ++l) {
      lo = std::min(lo, v[l]);
      hi = std::max(hi, v[l]);
    }
    step[j] = std::max(0.0f, hi - lo) / static_cast<float>(levels - 1);
    neg_min[j] = -lo;
    step_max = std::max(step_max, step[j]);
    neg_min_max = std::max(neg_min_max, neg_min[j]);
  }
  *d_out = FloatToFp16(step_max / static_cast<float>(scale_max));
  *dmin_out = FloatToFp16(neg_min_max / static_cast<float>(scale_max));
  const float d = Fp16ToFloat(*d_out);
  const float dmin = Fp16ToFloat(*dmin_out);
  for (int j = 0; j < n_sub; ++j) {
    sc[j] = d == 0.0f ? 0 : std::clamp(static_cast<int>(std::ceil(step[j] / d)), 0, scale_max);
    m[j] = QuantizeValue(neg_min[j], dmin, 0, scale_max);
    const float dl = d * static_cast<float>(sc[j]);
    const float ml = dmin * static_cast<float>(m[j]);
    for (int l = 0; l < sub_len; ++l) {
      const int e = j * sub_len + l;
      u[e] = static_cast<uint8_t>(QuantizeValue(x[e] + ml, dl, 0, levels - 1));
    }
  }
}

// Q4_K / Q5_K: eight 6-bit (scale, min) pairs into 12 bytes (inverse of UnpackScaleMinK4).
void PackScaleMinK4(const int* sc, const int* m, uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

}  // namespace

// Element e = 128h + 32j + 16k + l: 2 bits at 2j of qs[32h + 16k + l]; sub-block e / 16.
void QuantizeQ2_K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ2_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
    int sc[16], m[16];
    uint8_t u[kQKK];
    QuantizeAsymmetricSuper(x, 16, 16, 4, 15, &y[i].d, &y[i].dmin, sc, m, u);
    for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<uint8_t>(sc[j] | (m[j] << 4));
    std::memset(y[i].qs, 0, sizeof y[i].qs);
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, j = (e / 32) % 4, kl = e % 32;
      y[i].qs[32 * h + kl] |= static_cast<uint8_t>(u[e] << (2 * j));
    }
  }
}

// Same element order as Q2_K; q in [-4, 3] stored as u = q + 4: low 2 bits in qs, bit 2 in
// hmask[e % 32] bit e / 32; scales S_i + 32 as 6-bit values (spec 15.2).
void QuantizeQ3_K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ3_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
    int sc[16];
    uint8_t u[kQKK];
    y[i].d = QuantizeSymmetricSuper(x, 16, 16, 4, 31, sc, u);
    std::memset(y[i].scales, 0, sizeof y[i].scales);
    for (int s = 0; s < 16; ++s) {
      const int v = sc[s] + 32;
      y[i].scales[s % 8] |= static_cast<uint8_t>((v & 0xF) << (s < 8 ? 0 : 4));
      y[i].scales[8 + s % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (s / 4)));
    }
    std::memset(y[i].qs, 0, sizeof y[i].qs);
    std::memset(y[i].hmask, 0, sizeof y[i].hmask);
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, j = (e / 32) % 4, kl = e % 32;
      y[i].qs[32 * h + kl] |= static_cast<uint8_t>((u[e] & 3) << (2 * j));
      y[i].hmask[kl] |= static_cast<uint8_t>((u[e] >> 2) << (e / 32));
    }
  }
}

namespace {

// Q4_K / Q5_K quants: element 64p + 32k + l has its low nibble in qs[32p + l] (k = 0 low,
// k = 1 high) and, for Q5_K, bit 4 in qh[l] bit 2p + k.
void PackK4Quants(const uint8_t* u, uint8_t* qs, uint8_t* qh) {
  if (qh != nullptr) std::memset(qh, 0, 32);
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t a = u[64 * p + l], b = u[64 * p + 32 + l];
      qs[32 * p + l] = static_cast<uint8_t>((a & 0xF) | ((b & 0xF) << 4));
      if (qh != nullptr) {
        qh[l] |= static_cast<uint8_t>(((a >> 4) << (2 * p)) | ((b >> 4) << (2 * p + 1)));
      }
    }
  }
}

}  // namespace

void QuantizeQ4_K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
    int sc[8], m[8];
    uint8_t u[kQKK];
    QuantizeAsymmetricSuper(x, 8, 32, 16, 63, &y[i].d, &y[i].dmin, sc, m, u);
    PackScaleMinK4(sc, m, y[i].scales);
    PackK4Quants(u, y[i].qs, nullptr);
  }
}

void QuantizeQ5_K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
    int sc[8], m[8];
    uint8_t u[kQKK];
    QuantizeAsymmetricSuper(x, 8, 32, 32, 63, &y[i].d, &y[i].dmin, sc, m, u);
    PackScaleMinK4(sc, m, y[i].scales);
    PackK4Quants(u, y[i].qs, y[i].qh);
  }
}

// Element 128h + 32r + l (r = 0..3): low nibble in ql[64h + l + 32(r & 1)] (low half for
// r < 2, high half otherwise), top 2 bits in qh[32h + l] bits 2r; scale index e / 16.
void QuantizeQ6_K(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
    int sc[16];
    uint8_t u[kQKK];
    y[i].d = QuantizeSymmetricSuper(x, 16, 16, 32, 127, sc, u);
    for (int s = 0; s < 16; ++s) y[i].scales[s] = static_cast<int8_t>(sc[s]);
    std::memset(y[i].ql, 0, sizeof y[i].ql);
    std::memset(y[i].qh, 0, sizeof y[i].qh);
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, r = (e / 32) % 4, l = e % 32;
      y[i].ql[64 * h + l + 32 * (r & 1)] |= static_cast<uint8_t>((u[e] & 0xF) << (r < 2 ? 0 : 4));
      y[i].qh[32 * h + l] |= static_cast<uint8_t>((u[e] >> 4) << (2 * r));
    }
  }
}

}  // namespace tessera::quant::ref
