#include "kernels/cpu/paged_attention.h"

#include <algorithm>

#include "common/util/half.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kernels_avx512.h"
#include "kernels/cpu/nn_ops.h"

namespace tessera::cpu {
namespace {

// Row `n` values of a cache row as float32.
void LoadRow(const PagedRows& rows, int64_t slot, int n, float* out) {
  const int64_t at = slot * rows.slot_stride + rows.offset;
  switch (rows.elem) {
    case KvElem::kF32:
      std::copy_n(static_cast<const float*>(rows.data) + at, n, out);
      break;
    case KvElem::kF16: {
      const auto* h = static_cast<const uint16_t*>(rows.data) + at;
      for (int i = 0; i < n; ++i) out[i] = Fp16ToFloat(h[i]);
      break;
    }
    case KvElem::kBF16: {
      const auto* h = static_cast<const uint16_t*>(rows.data) + at;
      for (int i = 0; i < n; ++i) out[i] = Bf16ToFloat(h[i]);
      break;
    }
  }
}

template <typename Visit>
void ForEachKey(const PagedAttentionArgs& a, Visit visit) {
  for (int64_t j0 = 0; j0 < a.n_keys; j0 += a.block_size) {
    const int64_t base = int64_t{a.block_table[j0 / a.block_size]} * a.block_size;
    const int64_t n = std::min<int64_t>(a.block_size, a.n_keys - j0);
    for (int64_t i = 0; i < n; ++i) visit(j0 + i, base + i);
  }
}

void PortablePagedAttention(const PagedAttentionArgs& a, float* scores) {
  std::vector<float> row(std::max(a.dk, a.dv));
  ForEachKey(a, [&](int64_t j, int64_t slot) {
    LoadRow(a.k, slot, a.dk, row.data());
    for (int r = 0; r < a.nq; ++r) {
      const float* q = a.q + r * a.ldq;
      float s = 0.0f;
      for (int i = 0; i < a.dk; ++i) s += q[i] * row[i];
      scores[r * a.n_keys + j] = s * a.scale;
    }
  });
  for (int r = 0; r < a.nq; ++r) {
    Softmax(scores + r * a.n_keys, a.n_keys);
    std::fill_n(a.out + r * a.ld_out, a.dv, 0.0f);
  }
  ForEachKey(a, [&](int64_t j, int64_t slot) {
    LoadRow(a.v, slot, a.dv, row.data());
    for (int r = 0; r < a.nq; ++r) {
      const float p = scores[r * a.n_keys + j];
      float* o = a.out + r * a.ld_out;
      for (int i = 0; i < a.dv; ++i) o[i] += p * row[i];
    }
  });
}

}  // namespace

void PagedAttention(const PagedAttentionArgs& a, std::vector<float>* scratch, Isa isa) {
  if (a.nq <= 0 || a.n_keys <= 0) return;
  scratch->resize(static_cast<size_t>(a.nq) * a.n_keys);
  if (isa == Isa::kAvx512 && IsaSupported(Isa::kAvx512) && a.dk % 16 == 0 && a.dv % 16 == 0) {
    avx512::PagedAttention(a, scratch->data());
    return;
  }
  PortablePagedAttention(a, scratch->data());
}

}  // namespace tessera::cpu
