// AVX-512 VNNI int8 GEMM for prefill (operand formats in int8_gemm_format.h). A register
// tile is RT panels (16 weight rows each, one row per int32 lane) × CT tokens: per 4
// elements, RT panel loads and CT activation broadcasts feed RT·CT vpdpbusd. Each group's
// int32 sum times its integer scale joins an int32 block sum (exact), which (d_w·d_a)
// scales into the accumulators, minus (dmin·d_a)·Σ m_g·Σa from vpdpwssd, block after block:
// the arithmetic of the integer dots (vec_dot_avx2.cc), so a (row, token) gets the same
// bits from either kernel and decode rows may take whichever is faster. Lanes are already
// y's rows, so stores need no transpose.
// GCC 12 reports the deliberately undefined pass-through operands of _mm512_cvtepi32_ps,
// _mm512_cvtps_epi32, ... (_mm512_undefined_*) as uninitialized once inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "common/quant/blocks.h"
#include "kernels/cpu/int8_gemm_format.h"
#include "kernels/cpu/kernels_avx512.h"

namespace tessera::cpu::avx512 {
namespace {

// Columns [k0, k1) of the product; k0 > 0 adds to what y holds.
template <int G, int A, int kOffset, bool kMins, int RT, int CT>
void Tile(const Int8Panel* panels, const __mmask16* store_mask, const Int8Activations& a,
          int64_t t0, int64_t k0, int64_t k1, float* y, int64_t ldy) {
  const int64_t n = a.cols, n_groups = n / G, n_blocks = n / A;
  const int8_t* aq[CT];
#pragma GCC unroll 8
  for (int c = 0; c < CT; ++c) aq[c] = a.q + (t0 + c) * n;
  __m512 acc[RT][CT];
#pragma GCC unroll 8
  for (int r = 0; r < RT; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < CT; ++c) {
      acc[r][c] = k0 == 0 ? _mm512_setzero_ps()
                          : _mm512_maskz_loadu_ps(store_mask[r], y + (t0 + c) * ldy + 16 * r);
    }
  }
  for (int64_t kb = k0; kb < k1; kb += A) {
    // Σ_g sc_g·(group dot) of the block, exact in int32, converted to float once: the
    // integer dots (vec_dot_avx2.cc) form the same block sums, so every (row, token) gets
    // the same bits from either kernel.
    __m512i block[RT][CT];
#pragma GCC unroll 8
    for (int r = 0; r < RT; ++r) {
#pragma GCC unroll 8
      for (int c = 0; c < CT; ++c) block[r][c] = _mm512_setzero_si512();
    }
    for (int64_t kg = kb; kg < kb + A; kg += G) {
      const int64_t g = kg / G;
      __m512i dot[RT][CT];
#pragma GCC unroll 8
      for (int c = 0; c < CT; ++c) {
        const __m512i init = kOffset == 0
                                 ? _mm512_setzero_si512()
                                 : _mm512_set1_epi32(-kOffset * a.gsum[(t0 + c) * n_groups + g]);
#pragma GCC unroll 8
        for (int r = 0; r < RT; ++r) dot[r][c] = init;
      }
#pragma GCC unroll 8
      for (int s = 0; s < G / 4; ++s) {
        const int64_t k = kg + 4 * s;
        __m512i w[RT];
#pragma GCC unroll 8
        for (int r = 0; r < RT; ++r) w[r] = _mm512_loadu_si512(panels[r].q + 16 * k);
#pragma GCC unroll 8
        for (int c = 0; c < CT; ++c) {
          int32_t four;
          std::memcpy(&four, aq[c] + k, 4);
          const __m512i x = _mm512_set1_epi32(four);
#pragma GCC unroll 8
          for (int r = 0; r < RT; ++r) dot[r][c] = _mm512_dpbusd_epi32(dot[r][c], w[r], x);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < RT; ++r) {
        // Groups as long as the block have scale 1 (Q8_0, Q4_0).
        if constexpr (G == A) {
#pragma GCC unroll 8
          for (int c = 0; c < CT; ++c) block[r][c] = dot[r][c];
        } else {
          const __m512i scale = _mm512_cvttps_epi32(_mm512_loadu_ps(panels[r].scale + 16 * g));
#pragma GCC unroll 8
          for (int c = 0; c < CT; ++c) {
            block[r][c] = _mm512_add_epi32(block[r][c], _mm512_mullo_epi32(dot[r][c], scale));
          }
        }
      }
    }
    const int64_t blk = kb / A;
#pragma GCC unroll 8
    for (int c = 0; c < CT; ++c) {
      const __m512 da = _mm512_set1_ps(a.d[(t0 + c) * n_blocks + blk]);
#pragma GCC unroll 8
      for (int r = 0; r < RT; ++r) {
        const __m512 d = _mm512_mul_ps(_mm512_loadu_ps(panels[r].d + 16 * blk), da);
        acc[r][c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(block[r][c]), acc[r][c]);
      }
    }
    if constexpr (kMins) {
      // Σ_g m_g·Σa over the block's groups, in int32 from int16 pairs.
      constexpr int kPairs = A / G / 2;
#pragma GCC unroll 8
      for (int c = 0; c < CT; ++c) {
        const int32_t* gp = a.gpair + ((t0 + c) * n_groups + kb / G) / 2;
        const __m512 da = _mm512_set1_ps(a.d[(t0 + c) * n_blocks + blk]);
#pragma GCC unroll 8
        for (int r = 0; r < RT; ++r) {
          __m512i mins = _mm512_setzero_si512();
          const int32_t* mp = panels[r].mpair + 16 * (kb / G / 2);
#pragma GCC unroll 8
          for (int p = 0; p < kPairs; ++p) {
            mins = _mm512_dpwssd_epi32(mins, _mm512_loadu_si512(mp + 16 * p),
                                       _mm512_set1_epi32(gp[p]));
          }
          const __m512 dmin = _mm512_mul_ps(_mm512_loadu_ps(panels[r].dmin + 16 * blk), da);
          acc[r][c] = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(mins), acc[r][c]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < CT; ++c) {
#pragma GCC unroll 8
    for (int r = 0; r < RT; ++r) {
      _mm512_mask_storeu_ps(y + (t0 + c) * ldy + 16 * r, store_mask[r], acc[r][c]);
    }
  }
}

template <int G, int A, int kOffset, bool kMins, int RT>
void Panels(const Int8Panel* panels, int rows, const Int8Activations& a, float* y, int64_t ldy) {
  constexpr int kCt = RT == 1 ? 8 : (G == A ? 6 : 4);
  __mmask16 mask[RT];
  for (int r = 0; r < RT; ++r) {
    const int valid = rows - 16 * r;
    mask[r] = valid >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << valid) - 1);
  }
  // Columns in slices whose panel part (RT·16 rows × kSlice bytes) stays in L1 while every
  // token passes; rows of 4096 streamed the whole panel from L2 per 4 tokens.
  constexpr int64_t kSlice = 512;
  for (int64_t k0 = 0; k0 < a.cols; k0 += kSlice) {
    const int64_t k1 = k0 + kSlice < a.cols ? k0 + kSlice : a.cols;
    int64_t t = 0;
    for (; t + kCt <= a.batch; t += kCt) {
      Tile<G, A, kOffset, kMins, RT, kCt>(panels, mask, a, t, k0, k1, y, ldy);
    }
    for (; t < a.batch; ++t) Tile<G, A, kOffset, kMins, RT, 1>(panels, mask, a, t, k0, k1, y, ldy);
  }
}

template <int G, int A, int kOffset, bool kMins>
void Dispatch(const Int8Panel* panels, int rows, const Int8Activations& a, float* y, int64_t ldy) {
  if (rows > 16) {
    Panels<G, A, kOffset, kMins, 2>(panels, rows, a, y, ldy);
  } else {
    Panels<G, A, kOffset, kMins, 1>(panels, rows, a, y, ldy);
  }
}

// The 16 horizontal sums of r[0..15], in order, by a tree of unpacks and lane shuffles
// (45 instructions instead of 16 separate reductions).
__m512i HorizontalSums16(const __m512i* r) {
  __m512i pairs[8], quads[4];
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: a0+a2, b0+b2, a1+a3, b1+b3
    pairs[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]),
                                _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]));
  }
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: the lane's sums of 4 inputs, in order
    quads[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(pairs[2 * i], pairs[2 * i + 1]),
                                _mm512_unpackhi_epi64(pairs[2 * i], pairs[2 * i + 1]));
  }
  __m512i halves[2];
  for (int i = 0; i < 2; ++i) {  // lanes: quads[2i] (0+1, 2+3), quads[2i+1] (0+1, 2+3)
    halves[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(quads[2 * i], quads[2 * i + 1], 0x88),
                                 _mm512_shuffle_i32x4(quads[2 * i], quads[2 * i + 1], 0xDD));
  }
  return _mm512_add_epi32(_mm512_shuffle_i32x4(halves[0], halves[1], 0x88),
                          _mm512_shuffle_i32x4(halves[0], halves[1], 0xDD));
}

// Sums of each `group` (16 or 32) of the 256 int32 quants in r[0..15], into gsum.
void GroupSums(const __m512i* r, int group, int32_t* gsum) {
  const __m512i sums = HorizontalSums16(r);
  if (group == 16) {
    _mm512_storeu_si512(gsum, sums);
  } else {
    const __m512i pairs = _mm512_add_epi32(sums, _mm512_srli_epi64(sums, 32));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(gsum), _mm512_cvtepi64_epi32(pairs));
  }
}

__m128i PackToInt8(__m512i r) { return _mm512_cvtepi32_epi8(r); }

// QuantizeActivationsQ8_K's rounding: the signed extreme maps to −127 (the first element of
// largest magnitude), q = min(127, round-half-even(x·(−127/max))), d = 1/(−127/max).
void QuantizeBlockQ8_K(const float* x, int group, int8_t* q, float* d, int32_t* gsum) {
  constexpr int kVecs = 256 / 16;
  __m512 v[kVecs];
  __m512 amax = _mm512_setzero_ps();
  for (int i = 0; i < kVecs; ++i) {
    v[i] = _mm512_loadu_ps(x + 16 * i);
    amax = _mm512_max_ps(amax, _mm512_abs_ps(v[i]));
  }
  const float a = _mm512_reduce_max_ps(amax);
  if (a == 0.0f) {
    std::memset(q, 0, 256);
    *d = 0.0f;
    for (int g = 0; g < 256 / group; ++g) gsum[g] = 0;
    return;
  }
  float max = a;
  for (int i = 0; i < kVecs; ++i) {
    const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(v[i]), _mm512_set1_ps(a), _CMP_EQ_OQ);
    if (hit != 0) {
      max = x[16 * i + __builtin_ctz(hit)];
      break;
    }
  }
  const float iscale = -127.0f / max;
  const __m512 vs = _mm512_set1_ps(iscale);
  __m512i r[kVecs];
  for (int i = 0; i < kVecs; ++i) {
    r[i] = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v[i], vs)), _mm512_set1_epi32(127));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * i), PackToInt8(r[i]));
  }
  GroupSums(r, group, gsum);
  *d = 1.0f / iscale;
}

// QuantizeActivationsQ8_0's rounding: d = fp16(amax/127), q = round-half-even(x·127/amax).
// The quants also go to r[0..1] as int32 for the group sums.
void QuantizeBlockQ8_0(const float* x, int8_t* q, float* d, __m512i* r) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  // The scale round-trips through fp16 (F16C, round to nearest even) as the block stores it.
  const __m128i h = _mm_cvtps_ph(_mm_set_ss(amax / 127.0f), _MM_FROUND_TO_NEAREST_INT);
  *d = _mm_cvtss_f32(_mm_cvtph_ps(h));
  const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  r[0] = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));
  r[1] = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), PackToInt8(r[0]));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), PackToInt8(r[1]));
}

// 32 quants, elements k..k+31 of a row, into a plain row of quants.
void StoreQuants(__m256i q, int64_t k, uint8_t* dst) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), q);
}

void RowQuantsQ4_K(const uint8_t* row, int64_t cols, uint8_t* dst) {
  const auto* x = reinterpret_cast<const quant::BlockQ4_K*>(row);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < cols / quant::kQKK; ++i) {
    for (int j = 0; j < 4; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * j));
      const int64_t k = i * quant::kQKK + 64 * j;
      StoreQuants(_mm256_and_si256(v, low4), k, dst);
      StoreQuants(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), k + 32, dst);
    }
  }
}

void RowQuantsQ5_K(const uint8_t* row, int64_t cols, uint8_t* dst) {
  const auto* x = reinterpret_cast<const quant::BlockQ5_K*>(row);
  const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  // Bit j of qh[l] is the fifth bit of element l of sub-block j.
  auto fifth = [&](__m256i qh, int j) {
    return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, j), one), 4);
  };
  for (int64_t i = 0; i < cols / quant::kQKK; ++i) {
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh));
    for (int j = 0; j < 4; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * j));
      const int64_t k = i * quant::kQKK + 64 * j;
      StoreQuants(_mm256_or_si256(_mm256_and_si256(v, low4), fifth(qh, 2 * j)), k, dst);
      StoreQuants(
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), fifth(qh, 2 * j + 1)),
          k + 32, dst);
    }
  }
}

void RowQuantsQ6_K(const uint8_t* row, int64_t cols, uint8_t* dst) {
  const auto* x = reinterpret_cast<const quant::BlockQ6_K*>(row);
  const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(0x03);
  auto high = [&](__m256i qh, int shift) {
    return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), low2), 4);
  };
  for (int64_t i = 0; i < cols / quant::kQKK; ++i) {
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].ql + 64 * h));
      const __m256i ql1 =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].ql + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh + 32 * h));
      const __m256i ql0_hi = _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4);
      const __m256i ql1_hi = _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4);
      const int64_t k = i * quant::kQKK + 128 * h;
      StoreQuants(_mm256_or_si256(_mm256_and_si256(ql0, low4), high(qh, 0)), k, dst);
      StoreQuants(_mm256_or_si256(_mm256_and_si256(ql1, low4), high(qh, 2)), k + 32, dst);
      StoreQuants(_mm256_or_si256(ql0_hi, high(qh, 4)), k + 64, dst);
      StoreQuants(_mm256_or_si256(ql1_hi, high(qh, 6)), k + 96, dst);
    }
  }
}

void RowQuantsQ8_0(const uint8_t* row, int64_t cols, uint8_t* dst) {
  const auto* x = reinterpret_cast<const quant::BlockQ8_0*>(row);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));  // signed q → q + 128
  for (int64_t i = 0; i < cols / quant::kQK; ++i) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs));
    StoreQuants(_mm256_xor_si256(v, flip), i * quant::kQK, dst);
  }
}

void RowQuantsQ4_0(const uint8_t* row, int64_t cols, uint8_t* dst) {
  const auto* x = reinterpret_cast<const quant::BlockQ4_0*>(row);
  const __m128i low4 = _mm_set1_epi8(0x0F);
  for (int64_t i = 0; i < cols / quant::kQK; ++i) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].qs));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), low4);
    StoreQuants(_mm256_set_m128i(hi, _mm_and_si128(v, low4)), i * quant::kQK, dst);
  }
}

// The 16×16 transpose of 32-bit words: out[j] holds word j of in[0..15], in order.
void Transpose16x16(const __m512i* in, __m512i* out) {
  __m512i a[16], b[16];
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
  }
  // b[4i + m], 128-bit lane L: word 4L + m of rows 4i..4i+3.
  for (int i = 0; i < 4; ++i) {
    b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
  for (int m = 0; m < 4; ++m) {
    const __m512i e0 = _mm512_shuffle_i32x4(b[m], b[4 + m], 0x44);
    const __m512i e1 = _mm512_shuffle_i32x4(b[m], b[4 + m], 0xEE);
    const __m512i f0 = _mm512_shuffle_i32x4(b[8 + m], b[12 + m], 0x44);
    const __m512i f1 = _mm512_shuffle_i32x4(b[8 + m], b[12 + m], 0xEE);
    out[m] = _mm512_shuffle_i32x4(e0, f0, 0x88);
    out[4 + m] = _mm512_shuffle_i32x4(e0, f0, 0xDD);
    out[8 + m] = _mm512_shuffle_i32x4(e1, f1, 0x88);
    out[12 + m] = _mm512_shuffle_i32x4(e1, f1, 0xDD);
  }
}

}  // namespace

bool Int8Gemm(const Int8GemmLayout& layout, const Int8Panel* panels, int rows,
              const Int8Activations& a, float* y, int64_t ldy) {
  const int g = layout.group, blk = layout.act_block, off = layout.offset;
  if (g == 32 && blk == 256 && off == 0 && layout.mins) {
    Dispatch<32, 256, 0, true>(panels, rows, a, y, ldy);
  } else if (g == 16 && blk == 256 && off == 32 && !layout.mins) {
    Dispatch<16, 256, 32, false>(panels, rows, a, y, ldy);
  } else if (g == 32 && blk == 32 && off == 128 && !layout.mins) {
    Dispatch<32, 32, 128, false>(panels, rows, a, y, ldy);
  } else if (g == 32 && blk == 32 && off == 8 && !layout.mins) {
    Dispatch<32, 32, 8, false>(panels, rows, a, y, ldy);
  } else {
    return false;
  }
  return true;
}

void QuantizeInt8Activations(const float* x, int64_t n, int act_block, int group, int8_t* q,
                             float* d, int32_t* gsum) {
  if (act_block == 256) {
    for (int64_t i = 0; i < n / 256; ++i) {
      QuantizeBlockQ8_K(x + 256 * i, group, q + 256 * i, d + i, gsum + i * (256 / group));
    }
    return;
  }
  // Q8_0 blocks (group 32) eight at a time, so their sums share one reduction tree.
  __m512i r[16];
  int64_t i = 0;
  for (; i + 8 <= n / 32; i += 8) {
    for (int j = 0; j < 8; ++j) {
      QuantizeBlockQ8_0(x + 32 * (i + j), q + 32 * (i + j), d + i + j, r + 2 * j);
    }
    GroupSums(r, 32, gsum + i);
  }
  for (; i < n / 32; ++i) {
    QuantizeBlockQ8_0(x + 32 * i, q + 32 * i, d + i, r);
    gsum[i] = _mm512_reduce_add_epi32(_mm512_add_epi32(r[0], r[1]));
  }
}

RowQuantsFn RowQuants(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_K:
      return RowQuantsQ4_K;
    case gguf::GgmlType::kQ5_K:
      return RowQuantsQ5_K;
    case gguf::GgmlType::kQ6_K:
      return RowQuantsQ6_K;
    case gguf::GgmlType::kQ8_0:
      return RowQuantsQ8_0;
    case gguf::GgmlType::kQ4_0:
      return RowQuantsQ4_0;
    default:
      return nullptr;
  }
}

void InterleavePanel(const uint8_t* rows, int64_t cols, uint8_t* panel_q) {
  __m512i in[16], out[16];
  for (int64_t c0 = 0; c0 < cols; c0 += 64) {
    const int words = cols - c0 >= 64 ? 16 : static_cast<int>((cols - c0) / 4);
    const __mmask16 mask = static_cast<__mmask16>((1u << words) - 1);
    for (int r = 0; r < 16; ++r) in[r] = _mm512_maskz_loadu_epi32(mask, rows + r * cols + c0);
    Transpose16x16(in, out);
    for (int j = 0; j < words; ++j) _mm512_storeu_si512(panel_q + (c0 / 4 + j) * 64, out[j]);
  }
}

}  // namespace tessera::cpu::avx512
