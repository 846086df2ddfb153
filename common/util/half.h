// IEEE binary16 and bfloat16 conversions (scalar, exact, no hardware needed).
#pragma once

#include <cstdint>
#include <cstring>

namespace tessera {

inline float Bits2Float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint32_t Float2Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// binary16 -> binary32, exact for every input including subnormals, infinities and NaNs.
inline float Fp16ToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    if (mant == 0) return Bits2Float(sign);
    // Subnormal: value = mant * 2^-24; renormalise.
    int shift = 0;
    while ((mant & 0x400) == 0) {
      mant <<= 1;
      ++shift;
    }
    mant &= 0x3ff;
    return Bits2Float(sign | static_cast<uint32_t>(127 - 15 + 1 - shift) << 23 | mant << 13);
  }
  if (exp == 0x1f) return Bits2Float(sign | 0x7f800000u | mant << 13);
  return Bits2Float(sign | (exp + 127 - 15) << 23 | mant << 13);
}

// binary32 -> binary16, round to nearest even; overflow gives infinity, NaN stays NaN.
inline uint16_t FloatToFp16(float f) {
  uint32_t x = Float2Bits(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t exp = (x >> 23) & 0xff;
  uint32_t mant = x & 0x7fffff;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 | (mant >> 13) : 0));
  int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = static_cast<uint32_t>(e) << 10 | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // may carry into the exponent
  return static_cast<uint16_t>(sign | half);
}

// bfloat16 is the upper half of a binary32.
inline float Bf16ToFloat(uint16_t b) { return Bits2Float(static_cast<uint32_t>(b) << 16); }

// binary32 -> bfloat16, round to nearest even; NaN stays (quiet) NaN.
inline uint16_t FloatToBf16(float f) {
  uint32_t x = Float2Bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace tessera
