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

template <typename Visit>
void ForEachKey(const PagedAttentionArgs& a, Visit visit) {
  for (int64_t j0 = 0; j0 < a.n_keys; j0 += a.block_size) {
    const int64_t base = int64_t{a.block_table[j0 / a.block_size]} * a.block_size;
    const int64_t left = a.n_keys - j0;
    const int64_t n = left < a.block_size ? left : a.block_size;
    for (int64_t i = 0; i < n; ++i) visit(j0 + i, base + i);
  }
}

template <KvElem E, int R>
void Scores(const PagedAttentionArgs& a, int r0, float* scores) {
  const int chunks = a.dk / 16;
  ForEachKey(a, [&](int64_t j, int64_t slot) {
    const int64_t at = slot * a.k.slot_stride + a.k.offset;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int c = 0; c < chunks; ++c) {
      const __m512 kc = Load16<E>(a.k.data, at + 16 * c);
      for (int r = 0; r < R; ++r) {
        acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(a.q + (r0 + r) * a.ldq + 16 * c), kc, acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      scores[(r0 + r) * a.n_keys + j] = _mm512_reduce_add_ps(acc[r]) * a.scale;
    }
  });
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
    ForEachKey(a, [&](int64_t j, int64_t slot) {
      const int64_t at = slot * a.v.slot_stride + a.v.offset + 16 * c0;
      __m512 vc[kChunkBlock];
      for (int c = 0; c < nc; ++c) vc[c] = Load16<E>(a.v.data, at + 16 * c);
      for (int r = 0; r < R; ++r) {
        const __m512 w = _mm512_set1_ps(p[(r0 + r) * a.n_keys + j]);
        for (int c = 0; c < nc; ++c) acc[r][c] = _mm512_fmadd_ps(w, vc[c], acc[r][c]);
      }
    });
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < nc; ++c) {
        _mm512_storeu_ps(a.out + (r0 + r) * a.ld_out + 16 * (c0 + c), acc[r][c]);
      }
    }
  }
}

template <KvElem EK, KvElem EV>
void Attend(const PagedAttentionArgs& a, float* scores) {
  int r0 = 0;
  for (; r0 + kRowBlock <= a.nq; r0 += kRowBlock) Scores<EK, kRowBlock>(a, r0, scores);
  for (; r0 < a.nq; ++r0) Scores<EK, 1>(a, r0, scores);
  for (int r = 0; r < a.nq; ++r) Softmax(scores + r * a.n_keys, a.n_keys);
  r0 = 0;
  for (; r0 + kRowBlock <= a.nq; r0 += kRowBlock) WeightedValues<EV, kRowBlock>(a, r0, scores);
  for (; r0 < a.nq; ++r0) WeightedValues<EV, 1>(a, r0, scores);
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
