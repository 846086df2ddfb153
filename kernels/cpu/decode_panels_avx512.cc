// The q4_K decode-panel products (decode_panels.h): lane r of every register is row r of the
// panel, so a block's sums for 16 rows need no horizontal reduction.
// GCC 12 takes the undefined pass-through operands of _mm512_cvtepu8_epi32 and friends for
// uninitialized variables once inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "common/quant/blocks.h"
#include "kernels/cpu/decode_panels.h"
#include "kernels/cpu/kernels_avx512.h"

namespace tessera::cpu::avx512 {
namespace {

constexpr size_t kDminAt = 32, kScAt = 64, kMinAt = 192, kQsAt = 320;
// No software prefetch: a panel is one sequential stream, which the hardware prefetcher
// follows at the read bandwidth (on Zen 4, prefetching blocks 2 to 16 ahead into L1 cut
// one thread's rate from 24 to 12-15 GB/s).

__m512i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// One panel against V activation rows. Per block and vector: sub-block s's sums
// Σ u·a for the 16 rows, S_s, by vpdpbusd (the high nibbles kept in place, ×16, and their
// scaled sum shifted back: ≤ 16·32·15·128·63·4 < 2^31, exact); isum = Σ_s sc_s·S_s and
// msum = Σ_s m_s·(bsums[2s] + bsums[2s + 1]) exact in int32; then, as the dots,
// acc = fma(d·d_a, isum, acc) and acc = fma(−(dmin·d_a), msum, acc). The sub-blocks go
// through in groups of kGroup pairs so that the sums in flight fit the registers (each
// pair's chain of 8 vpdpbusd per vector is independent of the others).
template <int V>
void PanelDots(const uint8_t* panel, int64_t n, const void* ap, size_t stride, float* out,
               int64_t ldo) {
  constexpr int kGroup = V <= 2 ? 4 : V <= 4 ? 2 : 1;  // sub-block pairs per pass
  const __m512i lo_mask = _mm512_set1_epi8(0x0F), hi_mask = _mm512_set1_epi8(static_cast<char>(0xF0));
  const __m128i ones16 = _mm_set1_epi16(1);
  const quant::BlockQ8_K* a[V];
  for (int v = 0; v < V; ++v) {
    a[v] = reinterpret_cast<const quant::BlockQ8_K*>(static_cast<const uint8_t*>(ap) + v * stride);
  }
  __m512 acc[V];
  for (int v = 0; v < V; ++v) acc[v] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / quant::kQKK; ++i) {
    const uint8_t* blk = panel + static_cast<size_t>(i) * kQ4KPanelBlockBytes;
    __m512i isum_lo[V], isum_hi[V];
    for (int v = 0; v < V; ++v) isum_lo[v] = isum_hi[v] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int s0 = 0; s0 < 4; s0 += kGroup) {
      __m512i lo[V][kGroup], hi[V][kGroup];
      for (int v = 0; v < V; ++v) {
        for (int s = 0; s < kGroup; ++s) lo[v][s] = hi[v][s] = _mm512_setzero_si512();
      }
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
#pragma GCC unroll 4
        for (int s = 0; s < kGroup; ++s) {
          const __m512i q = _mm512_load_si512(blk + kQsAt + (g * 4 + s0 + s) * 64);
          const __m512i ql = _mm512_and_si512(q, lo_mask), qh = _mm512_and_si512(q, hi_mask);
#pragma GCC unroll 8
          for (int v = 0; v < V; ++v) {
            const int8_t* x = a[v][i].qs + 64 * (s0 + s) + 4 * g;
            lo[v][s] = _mm512_dpbusd_epi32(lo[v][s], ql, Broadcast4(x));
            hi[v][s] = _mm512_dpbusd_epi32(hi[v][s], qh, Broadcast4(x + 32));
          }
        }
      }
#pragma GCC unroll 4
      for (int s = 0; s < kGroup; ++s) {
        const int sb = 2 * (s0 + s);
        const __m512i sc_lo = _mm512_cvtepu8_epi32(_mm_load_si128(
            reinterpret_cast<const __m128i*>(blk + kScAt + sb * kDecodePanelRows)));
        const __m512i sc_hi = _mm512_cvtepu8_epi32(_mm_load_si128(
            reinterpret_cast<const __m128i*>(blk + kScAt + (sb + 1) * kDecodePanelRows)));
        for (int v = 0; v < V; ++v) {
          isum_lo[v] = _mm512_add_epi32(isum_lo[v], _mm512_mullo_epi32(lo[v][s], sc_lo));
          isum_hi[v] = _mm512_add_epi32(isum_hi[v], _mm512_mullo_epi32(hi[v][s], sc_hi));
        }
      }
    }
    __m512i mins[4];
    for (int p = 0; p < 4; ++p) {
      mins[p] = _mm512_cvtepu8_epi16(_mm256_load_si256(
          reinterpret_cast<const __m256i*>(blk + kMinAt + p * 2 * kDecodePanelRows)));
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk)));
    const __m512 dmin =
        _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + kDminAt)));
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      // The 8 sub-block sums of the activation block as int16, pairs (2p, 2p + 1) per dword.
      const __m128i* bs = reinterpret_cast<const __m128i*>(a[v][i].bsums);
      const __m128i sums = _mm_packs_epi32(_mm_madd_epi16(_mm_loadu_si128(bs), ones16),
                                           _mm_madd_epi16(_mm_loadu_si128(bs + 1), ones16));
      __m512i msum = _mm512_setzero_si512();
      msum = _mm512_dpwssd_epi32(msum, mins[0], _mm512_broadcastd_epi32(sums));
      msum = _mm512_dpwssd_epi32(msum, mins[1],
                                 _mm512_broadcastd_epi32(_mm_srli_si128(sums, 4)));
      msum = _mm512_dpwssd_epi32(msum, mins[2],
                                 _mm512_broadcastd_epi32(_mm_srli_si128(sums, 8)));
      msum = _mm512_dpwssd_epi32(msum, mins[3],
                                 _mm512_broadcastd_epi32(_mm_srli_si128(sums, 12)));
      const __m512i isum = _mm512_add_epi32(isum_lo[v], _mm512_srai_epi32(isum_hi[v], 4));
      const __m512 da = _mm512_set1_ps(a[v][i].d);
      acc[v] = _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(isum), acc[v]);
      acc[v] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(msum), acc[v]);
    }
  }
  for (int v = 0; v < V; ++v) _mm512_storeu_ps(out + v * ldo, acc[v]);
}

}  // namespace

void DecodePanelDotsQ4_K(const uint8_t* panel, int64_t n, const void* a, size_t stride, int nb,
                         float* out, int64_t ldo) {
  switch (nb) {
    case 1: return PanelDots<1>(panel, n, a, stride, out, ldo);
    case 2: return PanelDots<2>(panel, n, a, stride, out, ldo);
    case 3: return PanelDots<3>(panel, n, a, stride, out, ldo);
    case 4: return PanelDots<4>(panel, n, a, stride, out, ldo);
    case 5: return PanelDots<5>(panel, n, a, stride, out, ldo);
    case 6: return PanelDots<6>(panel, n, a, stride, out, ldo);
    case 7: return PanelDots<7>(panel, n, a, stride, out, ldo);
    default: return PanelDots<8>(panel, n, a, stride, out, ldo);
  }
}

}  // namespace tessera::cpu::avx512
