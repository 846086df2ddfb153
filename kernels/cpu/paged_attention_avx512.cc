// AVX-512 form of cpu::PagedAttention (paged_attention.h): keys and values converted from
// the cache's element type in registers, row blocks of up to 4 queries sharing each load.
// GCC 12 takes the undefined pass-through operands inside _mm512_reduce_* and
// _mm512_cvtph_ps for uninitialized variables.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/kernels_avx512.h"
#include "kernels/cpu/paged_attention_args.h"

namespace tessera::cpu::avx512 {
namespace {

constexpr int kRowBlock = 4;    // query rows per pass
constexpr int kChunkBlock = 4;  // 16-value chunks of a value row per pass

template <KvElem E>
__m512 Load16(const void* base, int64_t at) {
  if constexpr (E == KvElem::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(base) + at);
  } else if constexpr (E == KvElem::kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + at)));
  } else {
    const __m256i h = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + at));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// Bytes per cached value.
constexpr int ElemBytes(KvElem e) { return e == KvElem::kF32 ? 4 : 2; }

// Visits keys in position order with their slots, asking for the rows (`bytes` from element
// `rows.offset` of each slot) kPrefetchKeys keys ahead: the cache of every layer does not fit
// in L2, and a row's slots are a stride apart that crosses pages every few keys, where the
// hardware prefetcher stops.
constexpr int kPrefetchKeys = 6;

template <typename Visit>
void ForEachKey(const PagedAttentionArgs& a, const PagedRows& rows, int bytes, Visit visit) {
  const auto* data = static_cast<const char*>(rows.data);
  const int64_t row_bytes = rows.slot_stride * ElemBytes(rows.elem);
  const int64_t offset_bytes = rows.offset * ElemBytes(rows.elem);
  auto prefetch = [&](int64_t slot) {
    const char* p = data + slot * row_bytes + offset_bytes;
    for (int off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
  };
  for (int64_t j0 = 0; j0 < a.n_keys; j0 += a.block_size) {
    const int64_t base = int64_t{a.block_table[j0 / a.block_size]} * a.block_size;
    const int64_t left = a.n_keys - j0;
    const int64_t n = left < a.block_size ? left : a.block_size;
    // The next block's first keys, while this block's last ones are visited.
    const int64_t next_j0 = j0 + a.block_size;
    const int64_t next_base =
        next_j0 < a.n_keys ? int64_t{a.block_table[next_j0 / a.block_size]} * a.block_size : -1;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t ahead = i + kPrefetchKeys;
      if (ahead < n) {
        prefetch(base + ahead);
      } else if (next_base >= 0 && next_j0 + (ahead - a.block_size) < a.n_keys &&
                 ahead - a.block_size < a.block_size) {
        prefetch(next_base + (ahead - a.block_size));
      }
      visit(j0 + i, base + i);
    }
  }
}

// The 16 lanes of a sum folded to 8 (the first step of a horizontal sum, shared below).
inline __m256 Fold(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v),
                       _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

template <KvElem E, int R>
void Scores(const PagedAttentionArgs& a, int r0, float* scores) {
  const int chunks = a.dk / 16;
  // Partial sums of 8 consecutive keys are folded to 8 lanes and transposed into one vector
  // of 8 scores per row (hadd tree), instead of a full horizontal sum per key.
  float pending[R][8];
  int n_pending = 0;
  int64_t first = 0;
  __m256 partial[R][8];
  auto flush = [&]() {
    for (int r = 0; r < R; ++r) {
      for (int i = n_pending; i < 8; ++i) partial[r][i] = _mm256_setzero_ps();
      const __m256 s01 = _mm256_hadd_ps(partial[r][0], partial[r][1]);
      const __m256 s23 = _mm256_hadd_ps(partial[r][2], partial[r][3]);
      const __m256 s45 = _mm256_hadd_ps(partial[r][4], partial[r][5]);
      const __m256 s67 = _mm256_hadd_ps(partial[r][6], partial[r][7]);
      const __m256 s0123 = _mm256_hadd_ps(s01, s23);
      const __m256 s4567 = _mm256_hadd_ps(s45, s67);
      // Lanes: [k0 k1 k2 k3 | k0 k1 k2 k3] halves of s0123 (and of s4567 for k4-k7).
      const __m256 lo = _mm256_permute2f128_ps(s0123, s4567, 0x20);
      const __m256 hi = _mm256_permute2f128_ps(s0123, s4567, 0x31);
      _mm256_storeu_ps(pending[r], _mm256_mul_ps(_mm256_add_ps(lo, hi), _mm256_set1_ps(a.scale)));
      for (int i = 0; i < n_pending; ++i) scores[(r0 + r) * a.n_keys + first + i] = pending[r][i];
    }
    n_pending = 0;
  };
  ForEachKey(a, a.k, a.dk * ElemBytes(E), [&](int64_t j, int64_t slot) {
    if (n_pending == 0) first = j;
    const int64_t at = slot * a.k.slot_stride + a.k.offset;
    __m512 acc[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int c = 0; c < chunks; ++c) {
      const __m512 kc = Load16<E>(a.k.data, at + 16 * c);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(a.q + (r0 + r) * a.ldq + 16 * c), kc, acc[r]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) partial[r][n_pending] = Fold(acc[r]);
    if (++n_pending == 8) flush();
  });
  if (n_pending > 0) flush();
}

template <KvElem E, int R>
void WeightedValues(const PagedAttentionArgs& a, int r0, const float* p) {
  const int chunks = a.dv / 16;
  for (int c0 = 0; c0 < chunks; c0 += kChunkBlock) {
    const int nc = chunks - c0 < kChunkBlock ? chunks - c0 : kChunkBlock;
    __m512 acc[R][kChunkBlock];
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < kChunkBlock; ++c) acc[r][c] = _mm512_setzero_ps();
    }
    // Only the chunks this pass reads are asked for.
    PagedRows part = a.v;
    part.offset += 16 * c0;
    ForEachKey(a, part, 16 * nc * ElemBytes(E), [&](int64_t j, int64_t slot) {
      const int64_t at = slot * a.v.slot_stride + a.v.offset + 16 * c0;
      __m512 vc[kChunkBlock];
#pragma GCC unroll 4
      for (int c = 0; c < kChunkBlock; ++c) {
        if (c < nc) vc[c] = Load16<E>(a.v.data, at + 16 * c);
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512 w = _mm512_set1_ps(p[(r0 + r) * a.n_keys + j]);
#pragma GCC unroll 4
        for (int c = 0; c < kChunkBlock; ++c) {
          if (c < nc) acc[r][c] = _mm512_fmadd_ps(w, vc[c], acc[r][c]);
        }
      }
    });
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < nc; ++c) {
        _mm512_storeu_ps(a.out + (r0 + r) * a.ld_out + 16 * (c0 + c), acc[r][c]);
      }
    }
  }
}

template <int R>
struct RowCount {
  static constexpr int kValue = R;
};

// fn(RowCount<R>{}, r0) for the rows in blocks of kRowBlock, the rest (a GQA group of 3, say)
// as one block of its own.
template <typename Fn>
void ForRowBlocks(int nq, Fn fn) {
  for (int r0 = 0; r0 < nq; r0 += kRowBlock) {
    switch (nq - r0 < kRowBlock ? nq - r0 : kRowBlock) {
      case 1:
        fn(RowCount<1>{}, r0);
        break;
      case 2:
        fn(RowCount<2>{}, r0);
        break;
      case 3:
        fn(RowCount<3>{}, r0);
        break;
      default:
        fn(RowCount<kRowBlock>{}, r0);
        break;
    }
  }
}

template <KvElem EK, KvElem EV>
void Attend(const PagedAttentionArgs& a, float* scores) {
  ForRowBlocks(a.nq, [&](auto rows, int r0) { Scores<EK, decltype(rows)::kValue>(a, r0, scores); });
  for (int r = 0; r < a.nq; ++r) Softmax(scores + r * a.n_keys, a.n_keys);
  ForRowBlocks(
      a.nq, [&](auto rows, int r0) { WeightedValues<EV, decltype(rows)::kValue>(a, r0, scores); });
}

template <KvElem EK>
void AttendV(const PagedAttentionArgs& a, float* scores) {
  switch (a.v.elem) {
    case KvElem::kF32:
      return Attend<EK, KvElem::kF32>(a, scores);
    case KvElem::kF16:
      return Attend<EK, KvElem::kF16>(a, scores);
    case KvElem::kBF16:
      return Attend<EK, KvElem::kBF16>(a, scores);
  }
}

}  // namespace

void PagedAttention(const PagedAttentionArgs& a, float* scores) {
  switch (a.k.elem) {
    case KvElem::kF32:
      return AttendV<KvElem::kF32>(a, scores);
    case KvElem::kF16:
      return AttendV<KvElem::kF16>(a, scores);
    case KvElem::kBF16:
      return AttendV<KvElem::kBF16>(a, scores);
  }
}

}  // namespace tessera::cpu::avx512
