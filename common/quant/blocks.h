// Byte layouts of the quantized blocks Tessera computes with (spec section 15).
//
// Each struct is exactly one block as stored in a GGUF file (little-endian, no padding);
// the static_asserts pin the sizes to ggml's. fp16 fields are raw binary16 bits (see
// common/util/half.h). Tensor data is 32-byte aligned in a file and every block size here is
// a multiple of its struct's alignment, so a row of blocks may be viewed as an array.
#pragma once

#include <cstdint>

namespace tessera::quant {

inline constexpr int kQK = 32;    // elements per legacy block (Q4_0 ... Q8_0, IQ4_NL)
inline constexpr int kQKK = 256;  // elements per K-quant super-block

// d·((q & 0xF) − 8): 4-bit signed quants, one fp16 scale.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// d·q + m: 4-bit unsigned quants with a scale and an offset.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// 5-bit signed quants: low nibble in qs, fifth bit j in bit j of qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_0) == 34);

// 16 sub-blocks of 16 with 4-bit scale and 4-bit min each.
struct BlockQ2_K {
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// 2 low bits in qs, the third in hmask, 16 signed 6-bit scales packed in 12 bytes.
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// 8 sub-blocks of 32 with 6-bit scale and 6-bit min each (packing in spec 15.2).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQKK / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 16 sub-blocks of 16, 6-bit quants (4 in ql, 2 in qh), signed 8-bit scales.
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Activation format of the K-quant dot products: float scale, and the sums of each 16
// quants so that a weight's per-sub-block minimum costs one multiply per sub-block.
struct BlockQ8_K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// Like Q4_0 but each nibble indexes the non-linear table kIq4nlValues.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// 8 sub-blocks of 32 through kIq4nlValues, with 6-bit sub-block scales.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQKK / 64];
  uint8_t qs[kQKK / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// Codebook format: 9-bit indices into iq3s_grid (4 values each), explicit sign bits.
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[kQKK / 4];
  uint8_t qh[kQKK / 32];
  uint8_t signs[kQKK / 8];
  uint8_t scales[kQKK / 64];
};
static_assert(sizeof(BlockIQ3_S) == 110);

// The IQ4_NL / IQ4_XS codebook (spec 15.1, ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// Q4_K / Q5_K: the 6-bit (scale, min) pair of sub-block `j` (0..7) from the packed 12 bytes.
// `static` on purpose: kernel files built with AVX flags include this header, and internal
// linkage keeps each file's copy from being merged with (and replacing) the baseline one.
static inline void UnpackScaleMinK4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K: all eight 6-bit scales (byte j of *scales) and minimums (byte j of *mins)
// at once, with 32-bit word operations (same result as UnpackScaleMinK4 for j = 0..7).
static inline void UnpackScalesMinsK4(const uint8_t* q, uint64_t* scales, uint64_t* mins) {
  uint32_t w0, w1, w2;
  __builtin_memcpy(&w0, q, 4);
  __builtin_memcpy(&w1, q + 4, 4);
  __builtin_memcpy(&w2, q + 8, 4);
  const uint32_t sc_lo = w0 & 0x3f3f3f3f;
  const uint32_t m_lo = w1 & 0x3f3f3f3f;
  const uint32_t sc_hi = (w2 & 0x0f0f0f0f) | (((w0 >> 6) & 0x03030303) << 4);
  const uint32_t m_hi = ((w2 >> 4) & 0x0f0f0f0f) | (((w1 >> 6) & 0x03030303) << 4);
  *scales = sc_lo | static_cast<uint64_t>(sc_hi) << 32;
  *mins = m_lo | static_cast<uint64_t>(m_hi) << 32;
}

// Q3_K: the 16 sub-block scales biased by +32 (S_i + 32, in 0..63), byte i of the pair
// (*lo for i < 8, *hi for i ≥ 8), with word operations (same values as UnpackQ3KScales).
static inline void UnpackBiasedScalesQ3K(const uint8_t* s12, uint64_t* lo, uint64_t* hi) {
  uint32_t w0, w1, w2;
  __builtin_memcpy(&w0, s12, 4);
  __builtin_memcpy(&w1, s12 + 4, 4);
  __builtin_memcpy(&w2, s12 + 8, 4);
  // Scales 4g..4g+3 take their high 2 bits from bits 2g of bytes 8..11.
  const uint32_t s0 = (w0 & 0x0f0f0f0f) | ((w2 & 0x03030303) << 4);
  const uint32_t s1 = (w1 & 0x0f0f0f0f) | (((w2 >> 2) & 0x03030303) << 4);
  const uint32_t s2 = ((w0 >> 4) & 0x0f0f0f0f) | (((w2 >> 4) & 0x03030303) << 4);
  const uint32_t s3 = ((w1 >> 4) & 0x0f0f0f0f) | (((w2 >> 6) & 0x03030303) << 4);
  *lo = s0 | static_cast<uint64_t>(s1) << 32;
  *hi = s2 | static_cast<uint64_t>(s3) << 32;
}

// Q3_K: the 16 signed 6-bit sub-block scales S_i from the packed 12 bytes (spec 15.2).
static inline void UnpackQ3KScales(const uint8_t* s12, int* out) {
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? (s12[i] & 0xF) : (s12[i - 8] >> 4);
    const int high = (s12[8 + (i % 4)] >> (2 * (i / 4))) & 3;
    out[i] = (low | (high << 4)) - 32;
  }
}

}  // namespace tessera::quant
