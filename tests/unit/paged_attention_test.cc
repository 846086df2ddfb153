// cpu::PagedAttention against float64 attention over the same cached values: every cache
// element type, scattered block tables, partial last blocks, GQA-sized and MLA-sized heads
// (V as the first dv values of the K rows), and the AVX-512 and portable kernels.
#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "common/util/half.h"
#include "gtest/gtest.h"

namespace tessera::cpu {
namespace {

struct Cache {
  KvElem elem;
  int width;  // values per slot
  std::vector<float> f32;
  std::vector<uint16_t> h16;
  const void* data() const {
    return elem == KvElem::kF32 ? static_cast<const void*>(f32.data())
                                : static_cast<const void*>(h16.data());
  }
  // The value the cache holds at (slot, i), as float64.
  double at(int64_t slot, int i) const {
    const int64_t k = slot * width + i;
    switch (elem) {
      case KvElem::kF32:
        return f32[k];
      case KvElem::kF16:
        return Fp16ToFloat(h16[k]);
      case KvElem::kBF16:
        return Bf16ToFloat(h16[k]);
    }
    return 0;
  }
};

Cache MakeCache(KvElem elem, int64_t slots, int width, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  Cache c{elem, width, {}, {}};
  const size_t n = static_cast<size_t>(slots) * width;
  if (elem == KvElem::kF32) {
    c.f32.resize(n);
    for (float& x : c.f32) x = d(rng);
  } else {
    c.h16.resize(n);
    for (uint16_t& x : c.h16) x = elem == KvElem::kF16 ? FloatToFp16(d(rng)) : FloatToBf16(d(rng));
  }
  return c;
}

struct Case {
  int nq, dk, dv, block_size;
  int64_t n_keys;
  bool v_in_k;  // MLA: values are the first dv of each K row
};

void Check(const Case& cs, KvElem elem, Isa isa, std::mt19937& rng) {
  SCOPED_TRACE(testing::Message() << "nq " << cs.nq << " dk " << cs.dk << " dv " << cs.dv << " bs "
                                  << cs.block_size << " keys " << cs.n_keys << " elem "
                                  << static_cast<int>(elem) << " isa " << IsaName(isa));
  const int n_blocks = static_cast<int>((cs.n_keys + cs.block_size - 1) / cs.block_size) + 3;
  // Scattered blocks: a shuffled table over a cache with spare blocks.
  std::vector<int32_t> table(n_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const int64_t slots = int64_t{n_blocks} * cs.block_size;
  // Two heads per slot; this call reads head 1 (offsets exercised).
  const int k_width = 2 * cs.dk, v_width = 2 * cs.dv;
  Cache k = MakeCache(elem, slots, k_width, rng);
  Cache v = cs.v_in_k ? k : MakeCache(elem, slots, v_width, rng);
  std::normal_distribution<float> d(0.0f, 0.5f);
  std::vector<float> q(cs.nq * cs.dk);
  for (float& x : q) x = d(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(cs.dk));

  PagedAttentionArgs a;
  a.q = q.data();
  a.nq = cs.nq;
  a.ldq = cs.dk;
  a.dk = cs.dk;
  a.k = {k.data(), elem, k_width, cs.dk};
  a.v = cs.v_in_k ? a.k : PagedRows{v.data(), elem, v_width, cs.dv};
  a.dv = cs.dv;
  a.block_table = table.data();
  a.block_size = cs.block_size;
  a.n_keys = cs.n_keys;
  a.scale = scale;
  const int ld_out = cs.dv + 3;
  std::vector<float> out(cs.nq * ld_out, -7.0f);
  a.out = out.data();
  a.ld_out = ld_out;
  std::vector<float> scratch;
  PagedAttention(a, &scratch, isa);

  auto slot_of = [&](int64_t j) {
    return int64_t{table[j / cs.block_size]} * cs.block_size + j % cs.block_size;
  };
  const Cache& vc = cs.v_in_k ? k : v;
  const int v_off = cs.v_in_k ? cs.dk : cs.dv;
  for (int r = 0; r < cs.nq; ++r) {
    std::vector<double> s(cs.n_keys);
    double m = -INFINITY;
    for (int64_t j = 0; j < cs.n_keys; ++j) {
      double acc = 0;
      for (int i = 0; i < cs.dk; ++i) acc += double{q[r * cs.dk + i]} * k.at(slot_of(j), cs.dk + i);
      s[j] = acc * scale;
      m = std::max(m, s[j]);
    }
    double z = 0;
    for (double& x : s) z += (x = std::exp(x - m));
    for (int i = 0; i < cs.dv; ++i) {
      double want = 0, mag = 0;
      for (int64_t j = 0; j < cs.n_keys; ++j) {
        const double term = s[j] / z * vc.at(slot_of(j), v_off + i);
        want += term;
        mag += std::fabs(term);
      }
      // float32 scores and accumulation: a few ulps of the magnitude summed.
      EXPECT_NEAR(out[r * ld_out + i], want, 2e-5 * (1 + mag) + 1e-5 * std::sqrt(cs.n_keys))
          << "row " << r << " value " << i;
    }
    for (int i = cs.dv; i < ld_out; ++i) ASSERT_EQ(out[r * ld_out + i], -7.0f) << "past dv";
  }
}

TEST(PagedAttention, MatchesFloat64AcrossElementTypesTablesAndKernels) {
  std::mt19937 rng(11);
  const Case cases[] = {
      {3, 64, 64, 16, 1, false},   // first decode token
      {3, 64, 64, 16, 37, false},  // partial last block
      {1, 128, 128, 16, 300, false}, {8, 64, 64, 4, 129, false},
      {5, 32, 48, 7, 50, false},   // odd block size, dk != dv
      {16, 80, 64, 16, 65, true},  // MLA-like: V inside K, dk = c + r
      {6, 24, 8, 16, 20, false},   // widths the AVX-512 kernel does not take
  };
  for (const Case& c : cases) {
    for (KvElem e : {KvElem::kF32, KvElem::kF16, KvElem::kBF16}) {
      for (Isa isa : {Isa::kScalar, Isa::kAvx512}) {
        if (isa == Isa::kAvx512 && !IsaSupported(isa)) continue;
        Check(c, e, isa, rng);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::cpu
