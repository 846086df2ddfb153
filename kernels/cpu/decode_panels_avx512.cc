// The decode-panel products (decode_panels.h; q4_K, q5_K, q6_K, q8_0): lane r of every
// register is row r of the panel, so a block's sums for 16 rows need no horizontal reduction.
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
#include "common/util/half.h"
#include "kernels/cpu/decode_panels.h"
#include "kernels/cpu/kernels_avx512.h"

namespace tessera::cpu::avx512 {
namespace {

using panel_layout::kDminAt;
using panel_layout::kMinAt;
using panel_layout::kQ6QAt;
using panel_layout::kQ6ScAt;
using panel_layout::kQsAt;
using panel_layout::kScAt;
// No software prefetch: a panel is one sequential stream, which the hardware prefetcher
// follows at the read bandwidth (on Zen 4, prefetching blocks 2 to 16 ahead into L1 cut
// one thread's rate from 24 to 12-15 GB/s).

__m512i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Shifts each 16-bit lane of v left by k bits (right by −k), k known at compile time.
__m512i ShiftBits(__m512i v, int k) {
  return k > 0 ? _mm512_slli_epi16(v, k) : k < 0 ? _mm512_srli_epi16(v, -k) : v;
}

// One q4_K / q5_K panel against V activation rows. Per block and vector: sub-block s's sums
// Σ u·a for the 16 rows, S_s, by vpdpbusd (q4_K: the high nibbles kept in place, ×16, and
// their scaled sum shifted back: ≤ 16·32·15·128·63·4 < 2^31, exact; q5_K: the fifth bit from
// the row's qh joined in bit 4 of each byte); isum = Σ_s sc_s·S_s and
// msum = Σ_s m_s·(bsums[2s] + bsums[2s + 1]) exact in int32; then, as the dots,
// acc = fma(d·d_a, isum, acc) and acc = fma(−(dmin·d_a), msum, acc). The sub-blocks go
// through in groups of kGroup pairs so that the sums in flight fit the registers (each
// pair's chain of 8 vpdpbusd per vector is independent of the others).
template <bool kFifthBit, int V>
void PanelDotsK4(const uint8_t* panel, int64_t n, const void* ap, size_t stride, float* out,
                 int64_t ldo) {
  constexpr int kGroup = V <= 2 ? 4 : V <= 4 ? 2 : 1;  // sub-block pairs per pass
  constexpr size_t kBlockBytes = kFifthBit ? kQ5KPanelBlockBytes : kQ4KPanelBlockBytes;
  const __m512i lo_mask = _mm512_set1_epi8(0x0F),
                hi_mask = _mm512_set1_epi8(static_cast<char>(0xF0)),
                keep = _mm512_set1_epi8(static_cast<char>(0xEF));
  const __m128i ones16 = _mm_set1_epi16(1);
  const quant::BlockQ8_K* a[V];
  for (int v = 0; v < V; ++v) {
    a[v] = reinterpret_cast<const quant::BlockQ8_K*>(static_cast<const uint8_t*>(ap) + v * stride);
  }
  __m512 acc[V];
  for (int v = 0; v < V; ++v) acc[v] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / quant::kQKK; ++i) {
    const uint8_t* blk = panel + static_cast<size_t>(i) * kBlockBytes;
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
        // q5_K: the fifth bits of elements 4g..4g + 3 of every sub-block (bit 2s: sub-block
        // pair s's low half, 2s + 1: its high half), ahead of the pair registers.
        __m512i fifth = _mm512_setzero_si512();
        if constexpr (kFifthBit) fifth = _mm512_load_si512(blk + kQsAt + g * 5 * 64);
#pragma GCC unroll 4
        for (int s = 0; s < kGroup; ++s) {
          const size_t at =
              kFifthBit ? kQsAt + (g * 5 + 1 + s0 + s) * 64 : kQsAt + (g * 4 + s0 + s) * 64;
          const __m512i q = _mm512_load_si512(blk + at);
          __m512i ql = _mm512_and_si512(q, lo_mask), qh;
          if constexpr (kFifthBit) {
            // keep ? nibble : fifth bit moved to bit 4 (the nibbles' bits 5-7 are zero).
            const int sb = 2 * (s0 + s);
            ql = _mm512_ternarylogic_epi32(ql, ShiftBits(fifth, 4 - sb), keep, 0xE4);
            qh = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(q, 4), lo_mask),
                                           ShiftBits(fifth, 3 - sb), keep, 0xE4);
          } else {
            qh = _mm512_and_si512(q, hi_mask);
          }
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
        const __m512i sc_lo = _mm512_cvtepu8_epi32(
            _mm_load_si128(reinterpret_cast<const __m128i*>(blk + kScAt + sb * kDecodePanelRows)));
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
      msum = _mm512_dpwssd_epi32(msum, mins[1], _mm512_broadcastd_epi32(_mm_srli_si128(sums, 4)));
      msum = _mm512_dpwssd_epi32(msum, mins[2], _mm512_broadcastd_epi32(_mm_srli_si128(sums, 8)));
      msum = _mm512_dpwssd_epi32(msum, mins[3], _mm512_broadcastd_epi32(_mm_srli_si128(sums, 12)));
      const __m512i isum =
          _mm512_add_epi32(isum_lo[v], kFifthBit ? isum_hi[v] : _mm512_srai_epi32(isum_hi[v], 4));
      const __m512 da = _mm512_set1_ps(a[v][i].d);
      acc[v] = _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(isum), acc[v]);
      acc[v] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(msum), acc[v]);
    }
  }
  for (int v = 0; v < V; ++v) _mm512_storeu_ps(out + v * ldo, acc[v]);
}

// q6_K: per block and vector, sub-block j's sums Σ u·a of the 16 rows (u = q + 32, the
// stored 6-bit value), S_j, by vpdpbusd; isum = Σ_j sc_j·S_j − 32·Σ_j sc_j·(bsums[j]) exact
// in int32 (the offsets by vpdpwssd on the scale pairs); then, as the dots,
// acc = fma(d·d_a, isum, acc). A pass takes the groups g of one half h whose elements fall
// in the same four sub-blocks (g / 4 fixed), both quant registers (kParts = 2: four
// sub-blocks in flight per vector) or one (two sub-blocks), so that the sums in flight fit
// the registers.
template <int V>
void PanelDotsQ6(const uint8_t* panel, int64_t n, const void* ap, size_t stride, float* out,
                 int64_t ldo) {
  constexpr int kParts = V <= 4 ? 2 : 1;
  const __m512i mask4 = _mm512_set1_epi8(0x0F), keep = _mm512_set1_epi8(static_cast<char>(0xCF));
  const quant::BlockQ8_K* a[V];
  for (int v = 0; v < V; ++v) {
    a[v] = reinterpret_cast<const quant::BlockQ8_K*>(static_cast<const uint8_t*>(ap) + v * stride);
  }
  // The 6-bit quants of one register's 4 bytes per lane: the low bits `low` (bits 6-7 zero)
  // and the 2 high bits in bits 4-5 of `high` (other bits ignored): (low & 0xCF) | (high & 0x30).
  const auto join = [&](__m512i low, __m512i high) {
    return _mm512_ternarylogic_epi32(low, high, keep, 0xE4);  // keep ? low : high
  };
  __m512 acc[V];
  for (int v = 0; v < V; ++v) acc[v] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / quant::kQKK; ++i) {
    const uint8_t* blk = panel + static_cast<size_t>(i) * kQ6KPanelBlockBytes;
    const uint8_t* sc = blk + kQ6ScAt;
    __m512i isum[V];
    for (int v = 0; v < V; ++v) isum[v] = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 2
      for (int gq = 0; gq < 2; ++gq) {
#pragma GCC unroll 2
        for (int part0 = 0; part0 < 2; part0 += kParts) {
          // s[v][k]: sub-block 8h + gq + 2·(2k' + part) for the parts in this pass, k =
          // 2·(part − part0) + {0: low nibbles, 1: high nibbles}.
          __m512i s[V][2 * kParts];
          for (int v = 0; v < V; ++v) {
            for (int k = 0; k < 2 * kParts; ++k) s[v][k] = _mm512_setzero_si512();
          }
#pragma GCC unroll 4
          for (int g = 4 * gq; g < 4 * gq + 4; ++g) {
            const uint8_t* q = blk + kQ6QAt + static_cast<size_t>(h * 8 + g) * 3 * 64;
            const __m512i hb = _mm512_load_si512(q + 128);
#pragma GCC unroll 2
            for (int part = part0; part < part0 + kParts; ++part) {
              const __m512i lb = _mm512_load_si512(q + 64 * part);
              // part 0 (ql[l]): elements l (qh bits 0-1) and l + 64 (bits 4-5);
              // part 1 (ql[l + 32]): l + 32 (bits 2-3) and l + 96 (bits 6-7).
              const __m512i u_lo =
                  join(_mm512_and_si512(lb, mask4), _mm512_slli_epi16(hb, part == 0 ? 4 : 2));
              const __m512i u_hi = join(_mm512_and_si512(_mm512_srli_epi16(lb, 4), mask4),
                                        part == 0 ? hb : _mm512_srli_epi16(hb, 2));
              const int k = 2 * (part - part0);
#pragma GCC unroll 8
              for (int v = 0; v < V; ++v) {
                const int8_t* x = a[v][i].qs + 128 * h + 32 * part + 4 * g;
                s[v][k] = _mm512_dpbusd_epi32(s[v][k], u_lo, Broadcast4(x));
                s[v][k + 1] = _mm512_dpbusd_epi32(s[v][k + 1], u_hi, Broadcast4(x + 64));
              }
            }
          }
          // Scale sc_j of the 16 rows as int32 lanes: j's pair, then its half.
#pragma GCC unroll 4
          for (int k = 0; k < 2 * kParts; ++k) {
            const int j = 8 * h + gq + 2 * (part0 + k / 2) + 4 * (k % 2);
            const __m512i pair = _mm512_cvtepi8_epi16(_mm256_load_si256(
                reinterpret_cast<const __m256i*>(sc + (j / 2) * 2 * kDecodePanelRows)));
            const __m512i scale = j % 2 == 0 ? _mm512_srai_epi32(_mm512_slli_epi32(pair, 16), 16)
                                             : _mm512_srai_epi32(pair, 16);
            for (int v = 0; v < V; ++v) {
              isum[v] = _mm512_add_epi32(isum[v], _mm512_mullo_epi32(s[v][k], scale));
            }
          }
        }
      }
    }
    const __m512 d = _mm512_load_ps(reinterpret_cast<const float*>(blk));
    __m512i offsets[V];
    for (int v = 0; v < V; ++v) offsets[v] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      const __m512i pair = _mm512_cvtepi8_epi16(
          _mm256_load_si256(reinterpret_cast<const __m256i*>(sc + p * 2 * kDecodePanelRows)));
      for (int v = 0; v < V; ++v) {
        int32_t bsum_pair;
        std::memcpy(&bsum_pair, a[v][i].bsums + 2 * p, 4);
        offsets[v] = _mm512_dpwssd_epi32(offsets[v], pair, _mm512_set1_epi32(bsum_pair));
      }
    }
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      isum[v] = _mm512_sub_epi32(isum[v], _mm512_slli_epi32(offsets[v], 5));
      acc[v] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(a[v][i].d)),
                               _mm512_cvtepi32_ps(isum[v]), acc[v]);
    }
  }
  for (int v = 0; v < V; ++v) _mm512_storeu_ps(out + v * ldo, acc[v]);
}

// q8_0 against Q8_0 activations: per 32-element block and vector, S = Σ u·a over the 16 rows
// (u = q + 128) by vpdpbusd, Σ q·a = S − 128·Σa exact (Σa of the activation block, the same
// for every row), then, as the dots, acc = fma(d·d_a, Σ q·a, acc), block after block.
template <int V>
void PanelDotsQ8_0(const uint8_t* panel, int64_t n, const void* ap, size_t stride, float* out,
                   int64_t ldo) {
  const quant::BlockQ8_0* a[V];
  for (int v = 0; v < V; ++v) {
    a[v] = reinterpret_cast<const quant::BlockQ8_0*>(static_cast<const uint8_t*>(ap) + v * stride);
  }
  const __m256i ones = _mm256_set1_epi8(1);
  __m512 acc[V];
  for (int v = 0; v < V; ++v) acc[v] = _mm512_setzero_ps();
  const int64_t n_blocks = n / quant::kQK;
  for (int64_t i = 0; i < n_blocks; ++i) {
    const uint8_t* pair = panel + static_cast<size_t>(i / 2) * kQ8_0PanelPairBytes;
    const int64_t half = i % 2;
    const uint8_t* qs = pair + 64 + half * 8 * 64;
    // Two chains per vector (even and odd groups of 4 elements), joined at the end.
    __m512i s[V][2];
    for (int v = 0; v < V; ++v) s[v][0] = s[v][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i u = _mm512_load_si512(qs + g * 64);
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) {
        s[v][g % 2] = _mm512_dpbusd_epi32(s[v][g % 2], u, Broadcast4(a[v][i].qs + 4 * g));
      }
    }
    const __m512 d = _mm512_cvtph_ps(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(pair + half * 2 * kDecodePanelRows)));
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      // Σa of the block: vpdpbusd of ones with the activations, then the 8 lanes.
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[v][i].qs));
      const __m256i lanes = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, x);
      __m128i t = _mm_add_epi32(_mm256_castsi256_si128(lanes), _mm256_extracti128_si256(lanes, 1));
      t = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
      t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 1));
      const __m512i offset = _mm512_slli_epi32(_mm512_broadcastd_epi32(t), 7);
      const __m512i total = _mm512_sub_epi32(_mm512_add_epi32(s[v][0], s[v][1]), offset);
      const __m512 da = _mm512_set1_ps(Fp16ToFloat(a[v][i].d));
      acc[v] = _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(total), acc[v]);
    }
  }
  for (int v = 0; v < V; ++v) _mm512_storeu_ps(out + v * ldo, acc[v]);
}

template <int V>
struct Q4 {
  static void Run(const uint8_t* p, int64_t n, const void* a, size_t s, float* o, int64_t l) {
    PanelDotsK4<false, V>(p, n, a, s, o, l);
  }
};
template <int V>
struct Q5 {
  static void Run(const uint8_t* p, int64_t n, const void* a, size_t s, float* o, int64_t l) {
    PanelDotsK4<true, V>(p, n, a, s, o, l);
  }
};
template <int V>
struct Q6 {
  static void Run(const uint8_t* p, int64_t n, const void* a, size_t s, float* o, int64_t l) {
    PanelDotsQ6<V>(p, n, a, s, o, l);
  }
};
template <int V>
struct Q8 {
  static void Run(const uint8_t* p, int64_t n, const void* a, size_t s, float* o, int64_t l) {
    PanelDotsQ8_0<V>(p, n, a, s, o, l);
  }
};
template <template <int> class K>
void Dots(const uint8_t* panel, int64_t n, const void* a, size_t stride, int nb, float* out,
          int64_t ldo) {
  switch (nb) {
    case 1:
      return K<1>::Run(panel, n, a, stride, out, ldo);
    case 2:
      return K<2>::Run(panel, n, a, stride, out, ldo);
    case 3:
      return K<3>::Run(panel, n, a, stride, out, ldo);
    case 4:
      return K<4>::Run(panel, n, a, stride, out, ldo);
    case 5:
      return K<5>::Run(panel, n, a, stride, out, ldo);
    case 6:
      return K<6>::Run(panel, n, a, stride, out, ldo);
    case 7:
      return K<7>::Run(panel, n, a, stride, out, ldo);
    default:
      return K<8>::Run(panel, n, a, stride, out, ldo);
  }
}
}  // namespace

PanelDotsFn DecodePanelDots(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ4_K:
      return Dots<Q4>;
    case gguf::GgmlType::kQ5_K:
      return Dots<Q5>;
    case gguf::GgmlType::kQ6_K:
      return Dots<Q6>;
    case gguf::GgmlType::kQ8_0:
      return Dots<Q8>;
    default:
      return nullptr;
  }
}

}  // namespace tessera::cpu::avx512
