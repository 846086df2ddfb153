// Small AVX2 building blocks shared by the *_avx2.cc kernel files. Include this only from
// files compiled with -mavx2 -mfma -mf16c. Every function is `static inline` so each kernel
// file keeps a private copy: no AVX2 code can be merged into baseline callers by the linker.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace tessera::cpu::avx2 {

static inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

static inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

static inline __m256i Load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

static inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline int HorizontalSumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// 16 packed bytes -> 32 nibbles in element order (low nibbles first, then high).
static inline __m256i Nibbles32(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), mask), _mm_and_si128(raw, mask));
}

// Byte j = 0x10 where bit j of `bits` is set, else 0 (the fifth bit of Q5_0 / Q5_1).
static inline __m256i FifthBits32(uint32_t bits) {
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// Q2_K / Q3_K: the 2-bit field at `shift` of each of the 32 bytes at q.
static inline __m256i TwoBits32(const uint8_t* q, int shift) {
  return _mm256_and_si256(_mm256_srl_epi16(Load32(q), _mm_cvtsi32_si128(shift)),
                          _mm256_set1_epi8(3));
}

// Q3_K: bit `bit` of each of the 32 hmask bytes, as 0/1 bytes.
static inline __m256i BitOfBytes(__m256i bytes, int bit) {
  return _mm256_and_si256(_mm256_srl_epi16(bytes, _mm_cvtsi32_si128(bit)), _mm256_set1_epi8(1));
}

// Q4_K / Q5_K group p (elements 64p .. 64p+63): the 32 quants of sub-block 2p (`lo`) and
// of 2p+1 (`hi`); with `qh` (Q5_K) bits 2p / 2p+1 of each qh byte become bit 4.
static inline void K4Quants(const uint8_t* qs, const __m256i* qh, int p, __m256i* lo, __m256i* hi) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i raw = Load32(qs + 32 * p);
  *lo = _mm256_and_si256(raw, mask);
  *hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
  if (qh != nullptr) {
    *lo = _mm256_or_si256(*lo, _mm256_slli_epi16(BitOfBytes(*qh, 2 * p), 4));
    *hi = _mm256_or_si256(*hi, _mm256_slli_epi16(BitOfBytes(*qh, 2 * p + 1), 4));
  }
}

// Q6_K half h: the 4 × 32 unsigned 6-bit quants (q + 32) of elements 128h + 32r + l.
static inline void Q6KQuants(const uint8_t* ql, const uint8_t* qh, __m256i u[4]) {
  const __m256i mask4 = _mm256_set1_epi8(0x0F);
  const __m256i mask2 = _mm256_set1_epi8(0x03);
  const __m256i a = Load32(ql);
  const __m256i b = Load32(ql + 32);
  const __m256i c = Load32(qh);
  const __m256i low[4] = {_mm256_and_si256(a, mask4), _mm256_and_si256(b, mask4),
                          _mm256_and_si256(_mm256_srli_epi16(a, 4), mask4),
                          _mm256_and_si256(_mm256_srli_epi16(b, 4), mask4)};
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    const __m256i top = _mm256_and_si256(_mm256_srl_epi16(c, _mm_cvtsi32_si128(2 * r)), mask2);
    u[r] = _mm256_or_si256(low[r], _mm256_slli_epi16(top, 4));
  }
}

// The IQ4_NL codebook in both 128-bit lanes, for _mm256_shuffle_epi8 lookups.
static inline __m256i Iq4Table(const int8_t* values16) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values16)));
}

}  // namespace tessera::cpu::avx2
