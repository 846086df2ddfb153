// AVX2 row dequantizers. Bit-exact with the reference decoders: quants are widened to
// int32 and converted exactly, products are exact, and the minimum is added or subtracted
// with a separate instruction (this file is built with -ffp-contract=off).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "common/quant/blocks.h"
#include "kernels/cpu/avx2_helpers.h"
#include "kernels/cpu/kernels_avx2.h"

namespace tessera::cpu::avx2 {
namespace {

using quant::kQK;
using quant::kQKK;

__m256 I8x8ToFloat(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

// y[0..15] = q·d for 16 signed bytes.
void StoreScaled16(__m128i q, __m256 d, float* y) {
  _mm256_storeu_ps(y, _mm256_mul_ps(I8x8ToFloat(q), d));
  _mm256_storeu_ps(y + 8, _mm256_mul_ps(I8x8ToFloat(_mm_srli_si128(q, 8)), d));
}

// y[0..15] = q·d − m (K-quant minimum).
void StoreScaledSub16(__m128i q, __m256 d, __m256 m, float* y) {
  _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(I8x8ToFloat(q), d), m));
  _mm256_storeu_ps(y + 8, _mm256_sub_ps(_mm256_mul_ps(I8x8ToFloat(_mm_srli_si128(q, 8)), d), m));
}

// y[0..15] = q·d + m (Q4_1 / Q5_1 offset).
void StoreScaledAdd16(__m128i q, __m256 d, __m256 m, float* y) {
  _mm256_storeu_ps(y, _mm256_add_ps(_mm256_mul_ps(I8x8ToFloat(q), d), m));
  _mm256_storeu_ps(y + 8, _mm256_add_ps(_mm256_mul_ps(I8x8ToFloat(_mm_srli_si128(q, 8)), d), m));
}

__m128i Lo128(__m256i v) { return _mm256_castsi256_si128(v); }
__m128i Hi128(__m256i v) { return _mm256_extracti128_si256(v, 1); }

void DequantizeF16(const void* src, float* y, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    // Plain types stream whole rows in decode; keep fills 2 KiB ahead in flight.
    _mm_prefetch(reinterpret_cast<const char*>(h + i) + 2048, _MM_HINT_T0);
    for (int j = 0; j < 32; j += 8) {
      _mm256_storeu_ps(
          y + i + j, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i + j))));
    }
  }
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  }
  for (; i < n; ++i) y[i] = HalfToFloat(h[i]);
}

void DequantizeBF16(const void* src, float* y, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (i % 32 == 0) _mm_prefetch(reinterpret_cast<const char*>(h + i) + 2048, _MM_HINT_T0);
    const __m256i w =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
    _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(h[i]) << 16;
    std::memcpy(y + i, &bits, 4);
  }
}

void DequantizeQ4_0(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const quant::BlockQ4_0*>(src);
  const __m256i eight = _mm256_set1_epi8(8);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const __m256 d = _mm256_set1_ps(HalfToFloat(x[i].d));
    const __m256i q = _mm256_sub_epi8(Nibbles32(x[i].qs), eight);
    StoreScaled16(Lo128(q), d, y);
    StoreScaled16(Hi128(q), d, y + 16);
  }
}

void DequantizeQ4_1(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const quant::BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const __m256 d = _mm256_set1_ps(HalfToFloat(x[i].d));
    const __m256 m = _mm256_set1_ps(HalfToFloat(x[i].m));
    const __m256i q = Nibbles32(x[i].qs);
    StoreScaledAdd16(Lo128(q), d, m, y);
    StoreScaledAdd16(Hi128(q), d, m, y + 16);
  }
}

void DequantizeQ5_0(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const quant::BlockQ5_0*>(src);
  const __m256i sixteen = _mm256_set1_epi8(16);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const __m256 d = _mm256_set1_ps(HalfToFloat(x[i].d));
    const __m256i q = _mm256_sub_epi8(
        _mm256_or_si256(Nibbles32(x[i].qs), FifthBits32(LoadU32(x[i].qh))), sixteen);
    StoreScaled16(Lo128(q), d, y);
    StoreScaled16(Hi128(q), d, y + 16);
  }
}

void DequantizeQ5_1(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const quant::BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const __m256 d = _mm256_set1_ps(HalfToFloat(x[i].d));
    const __m256 m = _mm256_set1_ps(HalfToFloat(x[i].m));
    const __m256i q = _mm256_or_si256(Nibbles32(x[i].qs), FifthBits32(LoadU32(x[i].qh)));
    StoreScaledAdd16(Lo128(q), d, m, y);
    StoreScaledAdd16(Hi128(q), d, m, y + 16);
  }
}

void DequantizeQ8_0(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const quant::BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const __m256 d = _mm256_set1_ps(HalfToFloat(x[i].d));
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs));
    StoreScaled16(Lo128(q), d, y);
    StoreScaled16(Hi128(q), d, y + 16);
  }
}

void DequantizeIQ4_NL(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const quant::BlockIQ4_NL*>(src);
  const __m256i table = Iq4Table(quant::kIq4nlValues);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const __m256 d = _mm256_set1_ps(HalfToFloat(x[i].d));
    const __m256i q = _mm256_shuffle_epi8(table, Nibbles32(x[i].qs));
    StoreScaled16(Lo128(q), d, y);
    StoreScaled16(Hi128(q), d, y + 16);
  }
}

void DequantizeQ2_K(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const quant::BlockQ2_K*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = HalfToFloat(x[i].d);
    const float dmin = HalfToFloat(x[i].dmin);
    int is = 0;
#pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 8
      for (int j = 0; j < 4; ++j, y += 32) {
        const __m256i q = TwoBits32(x[i].qs + 32 * h, 2 * j);
#pragma GCC unroll 8
        for (int k = 0; k < 2; ++k) {
          const uint8_t sc = x[i].scales[is++];
          const __m256 dl = _mm256_set1_ps(d * static_cast<float>(sc & 0xF));
          const __m256 ml = _mm256_set1_ps(dmin * static_cast<float>(sc >> 4));
          StoreScaledSub16(k == 0 ? Lo128(q) : Hi128(q), dl, ml, y + 16 * k);
        }
      }
    }
  }
}

void DequantizeQ3_K(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const quant::BlockQ3_K*>(src);
  const __m256i four = _mm256_set1_epi8(4);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = HalfToFloat(x[i].d);
    int scales[16];
    quant::UnpackQ3KScales(x[i].scales, scales);
    const __m256i hmask = Load32(x[i].hmask);
#pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 8
      for (int j = 0; j < 4; ++j, y += 32) {
        const __m256i hb = BitOfBytes(hmask, 4 * h + j);
        const __m256i q = _mm256_sub_epi8(
            _mm256_or_si256(TwoBits32(x[i].qs + 32 * h, 2 * j), _mm256_slli_epi16(hb, 2)), four);
        const int s = 8 * h + 2 * j;
        StoreScaled16(Lo128(q), _mm256_set1_ps(d * static_cast<float>(scales[s])), y);
        StoreScaled16(Hi128(q), _mm256_set1_ps(d * static_cast<float>(scales[s + 1])), y + 16);
      }
    }
  }
}

// Q4_K / Q5_K (`Block` tells which): groups of 64 with two (scale, min) pairs each.
template <typename Block>
void DequantizeK4(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const Block*>(src);
  constexpr bool kFifthBit = sizeof(Block) == sizeof(quant::BlockQ5_K);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = HalfToFloat(x[i].d);
    const float dmin = HalfToFloat(x[i].dmin);
    uint64_t sc, m;
    quant::UnpackScalesMinsK4(x[i].scales, &sc, &m);
    __m256i qh;
    if constexpr (kFifthBit) qh = Load32(x[i].qh);
#pragma GCC unroll 8
    for (int p = 0; p < 4; ++p, y += 64) {
      const float sc1 = static_cast<float>((sc >> (16 * p)) & 0xFF);
      const float sc2 = static_cast<float>((sc >> (16 * p + 8)) & 0xFF);
      const float m1 = static_cast<float>((m >> (16 * p)) & 0xFF);
      const float m2 = static_cast<float>((m >> (16 * p + 8)) & 0xFF);
      const __m256 d1 = _mm256_set1_ps(d * sc1);
      const __m256 min1 = _mm256_set1_ps(dmin * m1);
      const __m256 d2 = _mm256_set1_ps(d * sc2);
      const __m256 min2 = _mm256_set1_ps(dmin * m2);
      __m256i lo, hi;
      K4Quants(x[i].qs, kFifthBit ? &qh : nullptr, p, &lo, &hi);
      StoreScaledSub16(Lo128(lo), d1, min1, y);
      StoreScaledSub16(Hi128(lo), d1, min1, y + 16);
      StoreScaledSub16(Lo128(hi), d2, min2, y + 32);
      StoreScaledSub16(Hi128(hi), d2, min2, y + 48);
    }
  }
}

void DequantizeQ6_K(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const quant::BlockQ6_K*>(src);
  const __m256i m32 = _mm256_set1_epi8(32);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = HalfToFloat(x[i].d);
#pragma GCC unroll 8
    for (int h = 0; h < 2; ++h, y += 128) {
      const int8_t* sc = x[i].scales + 8 * h;
      __m256i u[4];
      Q6KQuants(x[i].ql + 64 * h, x[i].qh + 32 * h, u);
#pragma GCC unroll 8
      for (int r = 0; r < 4; ++r) {
        const __m256i q = _mm256_sub_epi8(u[r], m32);
        StoreScaled16(Lo128(q), _mm256_set1_ps(d * static_cast<float>(sc[2 * r])), y + 32 * r);
        StoreScaled16(Hi128(q), _mm256_set1_ps(d * static_cast<float>(sc[2 * r + 1])),
                      y + 32 * r + 16);
      }
    }
  }
}

void DequantizeIQ4_XS(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const quant::BlockIQ4_XS*>(src);
  const __m256i table = Iq4Table(quant::kIq4nlValues);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = HalfToFloat(x[i].d);
#pragma GCC unroll 8
    for (int b = 0; b < 8; ++b, y += 32) {
      const int ls =
          ((x[i].scales_l[b / 2] >> (4 * (b % 2))) & 0xF) | (((x[i].scales_h >> (2 * b)) & 3) << 4);
      const __m256 dl = _mm256_set1_ps(d * static_cast<float>(ls - 32));
      const __m256i q = _mm256_shuffle_epi8(table, Nibbles32(x[i].qs + 16 * b));
      StoreScaled16(Lo128(q), dl, y);
      StoreScaled16(Hi128(q), dl, y + 16);
    }
  }
}

}  // namespace

DequantizeRowFn Dequantizer(gguf::GgmlType type) {
  using gguf::GgmlType;
  switch (type) {
    case GgmlType::kF16:
      return DequantizeF16;
    case GgmlType::kBF16:
      return DequantizeBF16;
    case GgmlType::kQ4_0:
      return DequantizeQ4_0;
    case GgmlType::kQ4_1:
      return DequantizeQ4_1;
    case GgmlType::kQ5_0:
      return DequantizeQ5_0;
    case GgmlType::kQ5_1:
      return DequantizeQ5_1;
    case GgmlType::kQ8_0:
      return DequantizeQ8_0;
    case GgmlType::kQ2_K:
      return DequantizeQ2_K;
    case GgmlType::kQ3_K:
      return DequantizeQ3_K;
    case GgmlType::kQ4_K:
      return DequantizeK4<quant::BlockQ4_K>;
    case GgmlType::kQ5_K:
      return DequantizeK4<quant::BlockQ5_K>;
    case GgmlType::kQ6_K:
      return DequantizeQ6_K;
    case GgmlType::kIQ4_NL:
      return DequantizeIQ4_NL;
    case GgmlType::kIQ4_XS:
      return DequantizeIQ4_XS;
    default:
      return nullptr;
  }
}

}  // namespace tessera::cpu::avx2
