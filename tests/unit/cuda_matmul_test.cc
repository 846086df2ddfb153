// GPU dequantization, decode GEMV and prefill GEMM against the CPU reference decoders and
// the float64 matrix product (kernels/reference/matmul_ref.h). Label `gpu`.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/quant/dequantize.h"
#include "common/quant/type_traits.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/nn_kernels.h"
#include "kernels/reference/matmul_ref.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/quant_test_util.h"

namespace tessera::cuda {
namespace {

using gguf::GgmlType;
using testing::Decode;
using testing::DeviceBuffer;
using testing::Encode;
using testing::Epsilon;
using testing::RandomVector;
using testing::Round;

constexpr GgmlType kTypes[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0,   GgmlType::kQ4_1,
    GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ2_K,   GgmlType::kQ3_K,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS};

const char* Name(GgmlType t) { return quant::FindQuantTraits(t)->name; }

std::vector<float> CpuDequantize(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> out(n);
  EXPECT_TRUE(quant::DequantizeToFloat(type, bytes, n, out.data()).ok());
  return out;
}

class CudaMatmul : public testing::GpuTest {};

TEST_F(CudaMatmul, DequantizeIsBitExactForEveryType) {
  std::mt19937_64 rng(1);
  const int64_t n = 256 * 37;
  for (GgmlType type : kTypes) {
    SCOPED_TRACE(Name(type));
    const std::vector<uint8_t> bytes = quant::testing::RandomBlocks(type, n, rng);
    const std::vector<float> expected = CpuDequantize(type, bytes, n);
    DeviceBuffer src(bytes);
    for (DType out : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(DTypeName(out));
      DeviceBuffer dst(n * DTypeBytes(out));
      ASSERT_TRUE(Dequantize(type, src.get(), n, out, dst.get(), nullptr).ok());
      Sync();
      const std::vector<float> got = Decode(dst.Download<uint8_t>(n * DTypeBytes(out)), out);
      const std::vector<float> want = Round(expected, out);
      int mismatches = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (std::memcmp(&got[i], &want[i], 4) != 0 && mismatches++ < 5) {
          ADD_FAILURE() << "element " << i << ": gpu " << got[i] << ", cpu " << want[i];
        }
      }
      EXPECT_EQ(mismatches, 0);
    }
  }
}

TEST_F(CudaMatmul, GatherRowsDecodesEmbeddings) {
  std::mt19937_64 rng(7);
  const int64_t rows = 50, cols = 512;
  const std::vector<int32_t> ids = {3, 49, 0, 3, -1, 50};  // the last two: zeros
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0, GgmlType::kBF16}) {
    SCOPED_TRACE(Name(type));
    const std::vector<uint8_t> w = quant::testing::RandomBlocks(type, rows * cols, rng);
    const std::vector<float> all = CpuDequantize(type, w, rows * cols);
    DeviceBuffer dw(w), dids(ids), dout(ids.size() * cols * 2);
    const DeviceMatrix m{type, rows, cols, w.size() / rows, dw.get()};
    ASSERT_TRUE(GatherRows(m, dids.as<int32_t>(), static_cast<int64_t>(ids.size()), DType::kF16,
                           dout.get(), nullptr)
                    .ok());
    Sync();
    std::vector<float> want;
    for (int32_t id : ids) {
      for (int64_t k = 0; k < cols; ++k)
        want.push_back(id >= 0 && id < rows ? all[id * cols + k] : 0.0f);
    }
    EXPECT_EQ(Decode(dout.Download<uint8_t>(ids.size() * cols * 2), DType::kF16),
              Round(want, DType::kF16));
  }
}

TEST_F(CudaMatmul, DequantizeRejectsPartialBlocks) {
  absl::Status s = Dequantize(GgmlType::kQ4_K, nullptr, 100, DType::kF32, nullptr, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

// y = W x against the float64 product of the decoded W with the x the device saw; the bound
// is float32 accumulation over |W||x| plus one rounding of y to the activation dtype.
void ExpectProduct(GgmlType type, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                   const std::vector<float>& x_seen, int64_t batch, DType act,
                   const std::vector<float>& y) {
  absl::StatusOr<std::vector<double>> ref =
      kernels::reference::MatmulFloat64(type, w, rows, cols, x_seen, batch);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const std::vector<float> wf = CpuDequantize(type, w, rows * cols);
  int failures = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t r = 0; r < rows; ++r) {
      double mag = 0;
      for (int64_t k = 0; k < cols; ++k) mag += std::fabs(wf[r * cols + k] * x_seen[b * cols + k]);
      const double want = (*ref)[b * rows + r];
      const double bound = 2e-6 * mag + Epsilon(act) * std::fabs(want) + 1e-30;
      const double got = y[b * rows + r];
      if (!(std::fabs(got - want) <= bound) && failures++ < 5) {
        ADD_FAILURE() << "y[" << b << "][" << r << "] = " << got << ", float64 " << want
                      << ", bound " << bound;
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_F(CudaMatmul, GemvEveryTypeAndBatch) {
  std::mt19937_64 rng(2);
  const int64_t rows = 67;
  for (GgmlType type : kTypes) {
    // 512: the kernel's runs of 8 per lane; 288: its element-per-lane path (32-element types).
    for (int64_t cols : {512, 288}) {
      if (cols % quant::FindQuantTraits(type)->block_elems != 0) continue;
      SCOPED_TRACE(::testing::Message() << Name(type) << " cols " << cols);
      const std::vector<uint8_t> w = quant::testing::RandomBlocks(type, rows * cols, rng);
      DeviceBuffer dw(w);
      const DeviceMatrix m{type, rows, cols, w.size() / rows, dw.get()};
      for (int64_t batch : {1, 3, 11}) {
        SCOPED_TRACE(batch);
        const std::vector<float> x = RandomVector(cols * batch, rng);
        DeviceBuffer dx(x), dy(rows * batch * 4);
        ASSERT_TRUE(Gemv(m, dx.get(), DType::kF32, batch, dy.get(), nullptr).ok());
        Sync();
        ExpectProduct(type, w, rows, cols, x, batch, DType::kF32, dy.Download<float>(rows * batch));
      }
    }
  }
}

TEST_F(CudaMatmul, GemvHalfActivations) {
  std::mt19937_64 rng(3);
  const int64_t rows = 40, cols = 768, batch = 2;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kQ6_K}) {
    const std::vector<uint8_t> w = quant::testing::RandomBlocks(type, rows * cols, rng);
    DeviceBuffer dw(w);
    const DeviceMatrix m{type, rows, cols, w.size() / rows, dw.get()};
    for (DType act : {DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(Name(type)) + " " + DTypeName(act));
      const std::vector<float> x = RandomVector(cols * batch, rng);
      DeviceBuffer dx(Encode(x, act)), dy(rows * batch * DTypeBytes(act));
      ASSERT_TRUE(Gemv(m, dx.get(), act, batch, dy.get(), nullptr).ok());
      Sync();
      ExpectProduct(type, w, rows, cols, Round(x, act), batch, act,
                    Decode(dy.Download<uint8_t>(rows * batch * DTypeBytes(act)), act));
    }
  }
}

TEST_F(CudaMatmul, ExpertGemvAndCombine) {
  std::mt19937_64 rng(5);
  const int experts = 6, tokens = 3, used = 2;
  const int64_t rows = 48, cols = 256;
  const GgmlType type = GgmlType::kQ4_K;
  std::vector<std::vector<uint8_t>> w(experts);
  std::vector<uint8_t> stacked;
  for (auto& e : w) {
    e = quant::testing::RandomBlocks(type, rows * cols, rng);
    stacked.insert(stacked.end(), e.begin(), e.end());
  }
  const size_t expert_bytes = w[0].size();
  const std::vector<int32_t> ids = {4, 0, 5, 4, 2, 99};  // 99: out of range, zeros
  const std::vector<float> weights = {0.7f, 0.3f, 0.5f, 0.5f, 1.0f, 2.0f};
  DeviceBuffer dw(stacked), dids(ids), dweights(weights);
  const DeviceMatrix m{type, rows, cols, expert_bytes / rows, dw.get()};
  for (bool per_choice : {false, true}) {
    SCOPED_TRACE(per_choice ? "input per choice" : "input per token");
    const std::vector<float> x = RandomVector(cols * tokens * (per_choice ? used : 1), rng);
    DeviceBuffer dx(x), dy(tokens * used * rows * 4), dout(tokens * rows * 4);
    GroupedGemvArgs g;
    g.w = m;
    g.member_bytes = expert_bytes;
    g.members = experts;
    g.ids = dids.as<int32_t>();
    g.tokens = tokens;
    g.used = used;
    g.x = dx.get();
    g.x_per_choice = per_choice;
    g.y = dy.get();
    ASSERT_TRUE(GroupedGemv(g, DType::kF32, nullptr).ok());
    ASSERT_TRUE(MoeCombine(dy.get(), dweights.as<float>(), tokens, used, rows, DType::kF32,
                           dout.get(), nullptr)
                    .ok());
    Sync();
    const std::vector<float> y = dy.Download<float>(tokens * used * rows);
    const std::vector<float> out = dout.Download<float>(tokens * rows);
    std::vector<double> combined(tokens * rows, 0.0);
    for (int t = 0; t < tokens; ++t) {
      for (int j = 0; j < used; ++j) {
        const int c = t * used + j;
        const std::vector<float> xc(x.begin() + (per_choice ? c : t) * cols,
                                    x.begin() + ((per_choice ? c : t) + 1) * cols);
        const std::vector<float> yc(y.begin() + c * rows, y.begin() + (c + 1) * rows);
        if (ids[c] >= experts) {
          EXPECT_EQ(yc, std::vector<float>(rows, 0.0f));
          continue;
        }
        ExpectProduct(type, w[ids[c]], rows, cols, xc, 1, DType::kF32, yc);
        for (int64_t r = 0; r < rows; ++r) combined[t * rows + r] += weights[c] * yc[r];
      }
    }
    for (size_t i = 0; i < combined.size(); ++i) {
      EXPECT_NEAR(out[i], combined[i], 1e-5 * (1 + std::fabs(combined[i]))) << i;
    }
  }
}

// MLA's absorbed k_b (spec 10.3 step 5): per head, q̃_h = K_b[h] q_h^nope (c × n), read
// from the query layout [t][h][n + r] and written into [t][h][c + r], rope parts untouched.
// More (token, choice) pairs than the grid's 65535 rows of blocks (a long MLA prefill with
// many heads, or MoE over thousands of tokens): one launch covers them all, every choice
// against its own member (float32 weights and inputs: the float64 dot product within 1e-5).
TEST_F(CudaMatmul, GroupedGemvBeyondTheGridLimit) {
  std::mt19937_64 rng(9);
  const int64_t rows = 4, cols = 32, members = 3, tokens = 17500, used = 4;
  const int64_t choices = tokens * used;  // 70000 > 65535
  const std::vector<float> w = RandomVector(members * rows * cols, rng);
  const std::vector<float> x = RandomVector(choices * cols, rng);
  std::vector<int32_t> ids(choices);
  for (int64_t c = 0; c < choices; ++c) ids[c] = static_cast<int32_t>((c * 7 + c / 5) % members);
  DeviceBuffer dw(w), dx(x), dids(ids), dy(choices * rows * 4);
  GroupedGemvArgs g;
  g.w = DeviceMatrix{GgmlType::kF32, rows, cols, static_cast<size_t>(cols) * 4, dw.get()};
  g.member_bytes = static_cast<size_t>(rows * cols) * 4;
  g.members = members;
  g.ids = dids.as<int32_t>();
  g.tokens = tokens;
  g.used = used;
  g.x = dx.get();
  g.x_per_choice = true;
  g.y = dy.get();
  ASSERT_TRUE(GroupedGemv(g, DType::kF32, nullptr).ok());
  Sync();
  const std::vector<float> y = dy.Download<float>(choices * rows);
  int failures = 0;
  for (int64_t c = 0; c < choices; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      double want = 0;
      for (int64_t k = 0; k < cols; ++k) {
        want += double(w[(ids[c] * rows + r) * cols + k]) * x[c * cols + k];
      }
      if (!(std::fabs(y[c * rows + r] - want) <= 1e-5 * (1 + std::fabs(want))) && failures++ < 5) {
        ADD_FAILURE() << "choice " << c << " row " << r << ": gpu " << y[c * rows + r]
                      << ", float64 " << want;
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_F(CudaMatmul, GroupedGemvAbsorbsPerHeadWithStrides) {
  std::mt19937_64 rng(6);
  const int heads = 4, tokens = 2, n = 128, r = 64, c = 96;
  for (GgmlType type : {GgmlType::kF16, GgmlType::kQ8_0}) {
    SCOPED_TRACE(Name(type));
    const std::vector<uint8_t> kb = quant::testing::RandomBlocks(type, heads * c * n, rng);
    const size_t member_bytes = kb.size() / heads;
    const std::vector<float> q = RandomVector(tokens * heads * (n + r), rng);
    std::vector<float> out(tokens * heads * (c + r), 7.0f);  // 7: the untouched sentinel
    std::vector<int32_t> ids;
    for (int t = 0; t < tokens; ++t) {
      for (int h = 0; h < heads; ++h) ids.push_back(h);
    }
    DeviceBuffer dkb(kb), dq(q), dout(out), dids(ids);
    GroupedGemvArgs g;
    g.w = DeviceMatrix{type, c, n, member_bytes / c, dkb.get()};
    g.member_bytes = member_bytes;
    g.members = heads;
    g.ids = dids.as<int32_t>();
    g.tokens = tokens;
    g.used = heads;
    g.x = dq.get();
    g.x_per_choice = true;
    g.x_stride = n + r;
    g.y = dout.get();
    g.y_stride = c + r;
    ASSERT_TRUE(GroupedGemv(g, DType::kF32, nullptr).ok());
    Sync();
    const std::vector<float> got = dout.Download<float>(out.size());
    for (int t = 0; t < tokens; ++t) {
      for (int h = 0; h < heads; ++h) {
        const int64_t qh = (t * heads + h) * (n + r), oh = (t * heads + h) * (c + r);
        const std::vector<uint8_t> member(kb.begin() + h * member_bytes,
                                          kb.begin() + (h + 1) * member_bytes);
        ExpectProduct(type, member, c, n, std::vector<float>(q.begin() + qh, q.begin() + qh + n), 1,
                      DType::kF32, std::vector<float>(got.begin() + oh, got.begin() + oh + c));
        for (int i = c; i < c + r; ++i) EXPECT_EQ(got[oh + i], 7.0f);
      }
    }
  }
}

// Decode batches up to kGemvMaxBatch (64) run in one weight pass; larger ones in passes. Each
// token's result is bit-identical to that token alone (batch invariance) and within the
// float32 bound of the float64 product, for every kernel instance (≤ 8, ≤ 24 and ≤ 64 tokens) and
// both inner loops (runs of 8 at 512 columns; one element per lane at 288).
TEST_F(CudaMatmul, GemvIsBatchInvariantUpTo64AndBeyond) {
  std::mt19937_64 rng(12);
  const int64_t rows = 37;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kF16}) {
    for (int64_t cols : {512, 288}) {
      if (cols % quant::FindQuantTraits(type)->block_elems != 0) continue;
      for (DType act : {DType::kF32, DType::kBF16}) {
        SCOPED_TRACE(::testing::Message()
                     << Name(type) << " cols " << cols << " " << DTypeName(act));
        const std::vector<uint8_t> w = quant::testing::RandomBlocks(type, rows * cols, rng);
        DeviceBuffer dw(w);
        const DeviceMatrix m{type, rows, cols, w.size() / rows, dw.get()};
        const int64_t most = 130;  // three passes of 64, 64 and 2
        const std::vector<float> x = Round(RandomVector(cols * most, rng), act);
        const size_t esz = DTypeBytes(act);
        DeviceBuffer dx(Encode(x, act));
        // Every token alone: the reference bits.
        DeviceBuffer dsolo(rows * most * esz);
        for (int64_t t = 0; t < most; ++t) {
          ASSERT_TRUE(Gemv(m, static_cast<const uint8_t*>(dx.get()) + t * cols * esz, act, 1,
                           static_cast<uint8_t*>(dsolo.get()) + t * rows * esz, nullptr)
                          .ok());
        }
        Sync();
        const std::vector<uint8_t> solo = dsolo.Download<uint8_t>(rows * most * esz);
        ExpectProduct(type, w, rows, cols, x, most, act, Decode(solo, act));
        for (int64_t batch : {int64_t{2}, int64_t{8}, int64_t{9}, int64_t{24}, int64_t{25},
                              int64_t{33}, int64_t{64}, int64_t{65}, most}) {
          DeviceBuffer dy(rows * batch * esz);
          ASSERT_TRUE(Gemv(m, dx.get(), act, batch, dy.get(), nullptr).ok());
          Sync();
          const std::vector<uint8_t> y = dy.Download<uint8_t>(rows * batch * esz);
          EXPECT_TRUE(std::equal(y.begin(), y.end(), solo.begin()))
              << "batch " << batch << ": a token's result depends on its batch-mates";
        }
      }
    }
  }
}

// SortByMember: every choice exactly once, in its member's bucket; choices of members outside
// [member0, member0 + members) (another rank's experts, bad ids) in the last bucket.
TEST_F(CudaMatmul, SortByMemberGroupsEveryChoiceOnce) {
  std::mt19937_64 rng(13);
  const int members = 5, member0 = 3;
  for (int64_t n : {1, 7, 1000, 5000}) {
    SCOPED_TRACE(n);
    std::vector<int32_t> ids(n);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % 11) - 1;  // -1 .. 9
    DeviceBuffer dids(ids), dorder(n * 4), doffsets((members + 2) * 4);
    ASSERT_TRUE(SortByMember(dids.as<int32_t>(), n, members, member0, dorder.as<int32_t>(),
                             doffsets.as<int32_t>(), nullptr)
                    .ok());
    Sync();
    const std::vector<int32_t> order = dorder.Download<int32_t>(n);
    const std::vector<int32_t> offsets = doffsets.Download<int32_t>(members + 2);
    ASSERT_EQ(offsets[0], 0);
    ASSERT_EQ(offsets[members + 1], n);
    std::vector<int> seen(n, 0);
    for (int b = 0; b <= members; ++b) {
      ASSERT_LE(offsets[b], offsets[b + 1]);
      for (int i = offsets[b]; i < offsets[b + 1]; ++i) {
        const int32_t c = order[i];
        ASSERT_TRUE(c >= 0 && c < n) << c;
        ++seen[c];
        const int m = ids[c] - member0;
        EXPECT_EQ(m >= 0 && m < members ? m : members, b) << "choice " << c << " id " << ids[c];
      }
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), n) << "a choice missing or repeated";
  }
  DeviceBuffer d(64);
  EXPECT_FALSE(
      SortByMember(d.as<int32_t>(), 4, 0, 0, d.as<int32_t>(), d.as<int32_t>(), nullptr).ok());
  EXPECT_FALSE(SortByMember(d.as<int32_t>(), 4, kSortMaxMembers + 1, 0, d.as<int32_t>(),
                            d.as<int32_t>(), nullptr)
                   .ok());
}

// The grouped product over choices sorted by member (MoE prefill: each expert's rows decoded
// once per 32 of its tokens) gives the per-choice kernel's bits: every choice, other ranks'
// experts as zero rows, inputs per token and per choice, more choices of one member than a
// pass, 16-bit activations; and the float64 product.
// A grouped product over `experts` stacked members of rows × cols (`member_bytes` each, at
// w) for `tokens` tokens of `used` choices; x and y are the caller's.
GroupedGemvArgs Stack(GgmlType type, int64_t rows, int64_t cols, int experts, int member0,
                      size_t member_bytes, void* w, const int32_t* ids, int64_t tokens, int used) {
  GroupedGemvArgs g;
  g.w = DeviceMatrix{type, rows, cols, member_bytes / rows, w};
  g.member_bytes = member_bytes;
  g.members = experts;
  g.member0 = member0;
  g.ids = ids;
  g.tokens = tokens;
  g.used = used;
  return g;
}

// `experts` random members of rows × cols of `type`, and the same bytes one after another in
// *stacked (the stacked-experts tensor).
std::vector<std::vector<uint8_t>> RandomMembers(GgmlType type, int64_t rows, int64_t cols,
                                                int experts, std::mt19937_64& rng,
                                                std::vector<uint8_t>* stacked) {
  std::vector<std::vector<uint8_t>> w(experts);
  for (auto& e : w) {
    e = quant::testing::RandomBlocks(type, rows * cols, rng);
    stacked->insert(stacked->end(), e.begin(), e.end());
  }
  return w;
}

TEST_F(CudaMatmul, SortedGroupedGemvEqualsPerChoiceBitForBit) {
  std::mt19937_64 rng(14);
  const int experts = 6, member0 = 2, used = 3;
  const int64_t rows = 21, cols = 256, tokens = 150;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kF32}) {
    for (DType act : {DType::kF32, DType::kF16}) {
      SCOPED_TRACE(::testing::Message() << Name(type) << " " << DTypeName(act));
      std::vector<uint8_t> stacked;
      const std::vector<std::vector<uint8_t>> w =
          RandomMembers(type, rows, cols, experts, rng, &stacked);
      const size_t expert_bytes = w[0].size();
      // Ids 0 .. 9 against the stack's 2 .. 7; member 2 (id 4) gets most of the choices.
      std::vector<int32_t> ids(tokens * used);
      for (auto& id : ids) id = rng() % 3 == 0 ? 4 : static_cast<int32_t>(rng() % 10);
      const size_t esz = DTypeBytes(act);
      DeviceBuffer dw(stacked), dids(ids), dorder(ids.size() * 4), doffsets((experts + 2) * 4);
      ASSERT_TRUE(SortByMember(dids.as<int32_t>(), tokens * used, experts, member0,
                               dorder.as<int32_t>(), doffsets.as<int32_t>(), nullptr)
                      .ok());
      for (bool per_choice : {false, true}) {
        SCOPED_TRACE(per_choice ? "input per choice" : "input per token");
        const int64_t x_rows = per_choice ? tokens * used : tokens;
        const std::vector<float> x = Round(RandomVector(cols * x_rows, rng), act);
        DeviceBuffer dx(Encode(x, act)), dplain(ids.size() * rows * esz),
            dsorted(ids.size() * rows * esz);
        GroupedGemvArgs g = Stack(type, rows, cols, experts, member0, expert_bytes, dw.get(),
                                  dids.as<int32_t>(), tokens, used);
        g.x = dx.get();
        g.x_per_choice = per_choice;
        g.y = dplain.get();
        ASSERT_TRUE(GroupedGemv(g, act, nullptr).ok());
        g.y = dsorted.get();
        g.order = dorder.as<int32_t>();
        g.offsets = doffsets.as<int32_t>();
        ASSERT_TRUE(GroupedGemv(g, act, nullptr).ok());
        g.offsets = nullptr;
        EXPECT_FALSE(GroupedGemv(g, act, nullptr).ok()) << "order without offsets";
        Sync();
        const std::vector<uint8_t> plain = dplain.Download<uint8_t>(ids.size() * rows * esz);
        const std::vector<uint8_t> sorted = dsorted.Download<uint8_t>(ids.size() * rows * esz);
        EXPECT_TRUE(plain == sorted)
            << "the sorted grouped product differs from the per-choice one";
        const std::vector<float> y = Decode(sorted, act);
        for (int64_t c = 0; c < tokens * used; c += 7) {
          const std::vector<float> yc(y.begin() + c * rows, y.begin() + (c + 1) * rows);
          const int m = ids[c] - member0;
          if (m < 0 || m >= experts) {
            EXPECT_EQ(yc, std::vector<float>(rows, 0.0f)) << "choice " << c;
            continue;
          }
          const int64_t xr = per_choice ? c : c / used;
          ExpectProduct(type, w[m], rows, cols,
                        std::vector<float>(x.begin() + xr * cols, x.begin() + (xr + 1) * cols), 1,
                        act, yc);
        }
      }
    }
  }
}

// The weights a GEMM multiplies: with 16-bit activations both paths round the decoded
// weights to the activation dtype (as float32 rows here); with float32 they are exact.
struct SeenWeights {
  GgmlType type;
  std::vector<uint8_t> bytes;
};
SeenWeights WeightsAsSeen(GgmlType type, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                          DType act) {
  if (act == DType::kF32) return {type, w};
  const std::vector<float> wf = Round(CpuDequantize(type, w, rows * cols), act);
  SeenWeights seen{GgmlType::kF32, std::vector<uint8_t>(wf.size() * 4)};
  std::memcpy(seen.bytes.data(), wf.data(), seen.bytes.size());
  return seen;
}

TEST_F(CudaMatmul, GemmThroughCublasInChunks) {
  std::mt19937_64 rng(4);
  const int64_t rows = 96, cols = 512, batch = 17;
  cublasHandle_t handle;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kIQ4_XS, GgmlType::kF16}) {
    const std::vector<uint8_t> w = quant::testing::RandomBlocks(type, rows * cols, rng);
    DeviceBuffer dw(w);
    const DeviceMatrix m{type, rows, cols, w.size() / rows, dw.get()};
    for (DType act : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(Name(type)) + " " + DTypeName(act));
      const std::vector<float> x = RandomVector(cols * batch, rng);
      DeviceBuffer dx(Encode(x, act)), dy(rows * batch * DTypeBytes(act));
      // 40 rows of scratch: three chunks (40, 40, 16).
      const size_t scratch_bytes = 40 * cols * DTypeBytes(act);
      DeviceBuffer scratch(scratch_bytes);
      ASSERT_TRUE(GemmDequantized(handle, m, dx.get(), act, batch, dy.get(), scratch.get(),
                                  scratch_bytes, nullptr)
                      .ok());
      Sync();
      const SeenWeights seen = WeightsAsSeen(type, w, rows, cols, act);
      ExpectProduct(seen.type, seen.bytes, rows, cols, Round(x, act), batch, act,
                    Decode(dy.Download<uint8_t>(rows * batch * DTypeBytes(act)), act));
    }
  }
  cublasDestroy(handle);
}

// The tensor-core GEMM against the float64 product, with edges in every dimension: rows and
// tokens that are not multiples of the 64 x 128 block tile, several token tiles, long rows,
// and (for f16/bf16 weights, whose blocks are one element) K not a multiple of the 32-step.
TEST_F(CudaMatmul, GemmTilesAgainstFloat64) {
  std::mt19937_64 rng(8);
  struct Shape {
    int64_t rows, cols, batch;
  };
  const GgmlType types[] = {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K,  GgmlType::kQ6_K,
                            GgmlType::kF16,  GgmlType::kBF16, GgmlType::kIQ4_XS};
  for (GgmlType type : types) {
    std::vector<Shape> shapes = {{100, 256, 37}, {64, 512, 128}, {130, 4096, 3}, {70, 512, 300}};
    if (type == GgmlType::kF16 || type == GgmlType::kBF16) {
      shapes.push_back({33, 200, 5});  // K tail of 8 past six whole steps
      shapes.push_back({5, 40, 1});    // one partial tile in every dimension
    }
    for (const Shape& sh : shapes) {
      const std::vector<uint8_t> w = quant::testing::RandomBlocks(type, sh.rows * sh.cols, rng);
      DeviceBuffer dw(w);
      const DeviceMatrix m{type, sh.rows, sh.cols, w.size() / sh.rows, dw.get()};
      for (DType act : {DType::kF16, DType::kBF16}) {
        SCOPED_TRACE(::testing::Message() << Name(type) << " " << DTypeName(act) << " " << sh.rows
                                          << " x " << sh.cols << " batch " << sh.batch);
        const std::vector<float> x = RandomVector(sh.cols * sh.batch, rng);
        const size_t y_bytes = sh.rows * sh.batch * DTypeBytes(act);
        DeviceBuffer dx(Encode(x, act)), dy(y_bytes);
        ASSERT_TRUE(GemmTiles(m, dx.get(), act, sh.batch, dy.get(), nullptr).ok());
        Sync();
        const SeenWeights seen = WeightsAsSeen(type, w, sh.rows, sh.cols, act);
        ExpectProduct(seen.type, seen.bytes, sh.rows, sh.cols, Round(x, act), sh.batch, act,
                      Decode(dy.Download<uint8_t>(y_bytes), act));
      }
    }
  }
}

// Both prefill paths multiply the same 16-bit weights and activations in float32; their
// outputs differ by accumulation order and at most one rounding step of the output dtype.
TEST_F(CudaMatmul, GemmTilesAgreesWithGemmDequantized) {
  std::mt19937_64 rng(9);
  const int64_t rows = 100, cols = 512, batch = 37;
  cublasHandle_t handle;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0}) {
    const std::vector<uint8_t> w = quant::testing::RandomBlocks(type, rows * cols, rng);
    DeviceBuffer dw(w);
    const DeviceMatrix m{type, rows, cols, w.size() / rows, dw.get()};
    for (DType act : {DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(Name(type)) + " " + DTypeName(act));
      const std::vector<float> x = RandomVector(cols * batch, rng);
      const size_t y_bytes = rows * batch * DTypeBytes(act);
      const size_t scratch_bytes = rows * cols * DTypeBytes(act);
      DeviceBuffer dx(Encode(x, act)), dy_tiles(y_bytes), dy_cublas(y_bytes),
          scratch(scratch_bytes);
      ASSERT_TRUE(GemmTiles(m, dx.get(), act, batch, dy_tiles.get(), nullptr).ok());
      ASSERT_TRUE(GemmDequantized(handle, m, dx.get(), act, batch, dy_cublas.get(), scratch.get(),
                                  scratch_bytes, nullptr)
                      .ok());
      Sync();
      const std::vector<float> tiles = Decode(dy_tiles.Download<uint8_t>(y_bytes), act);
      const std::vector<float> blas = Decode(dy_cublas.Download<uint8_t>(y_bytes), act);
      const std::vector<float> wf = Round(CpuDequantize(type, w, rows * cols), act);
      const std::vector<float> xs = Round(x, act);
      int failures = 0;
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t r = 0; r < rows; ++r) {
          double mag = 0;
          for (int64_t k = 0; k < cols; ++k) mag += std::fabs(wf[r * cols + k] * xs[b * cols + k]);
          const float a = tiles[b * rows + r], c = blas[b * rows + r];
          const double bound =
              2 * Epsilon(act) * std::max(std::fabs(a), std::fabs(c)) + 4e-6 * mag + 1e-30;
          if (!(std::fabs(a - c) <= bound) && failures++ < 5) {
            ADD_FAILURE() << "y[" << b << "][" << r << "]: tiles " << a << ", cublas " << c
                          << ", bound " << bound;
          }
        }
      }
      EXPECT_EQ(failures, 0);
    }
  }
  cublasDestroy(handle);
}

// The grouped tensor-core product of MoE prefill: each choice's rows equal, bit for bit,
// GemmTiles of its member over the same activation row (a token's result does not depend on
// its tile-mates), and the float64 product of the 16-bit weights; choices outside the stack
// get zero rows. Members with several token tiles (one gets about half the choices), a
// partial row tile, padded strides, inputs per token and per choice.
TEST_F(CudaMatmul, GroupedGemmTilesEqualsGemmTilesPerMember) {
  std::mt19937_64 rng(15);
  const int experts = 5, member0 = 1, used = 3;
  const int64_t rows = 70, cols = 512, tokens = 150, choices = tokens * used;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0}) {
    std::vector<uint8_t> stacked;
    const std::vector<std::vector<uint8_t>> w =
        RandomMembers(type, rows, cols, experts, rng, &stacked);
    const size_t expert_bytes = w[0].size();
    // Ids 0 .. 6 against the stack's 1 .. 5; id 3 (member 2) takes about half the choices.
    std::vector<int32_t> ids(choices);
    for (auto& id : ids) id = rng() % 2 == 0 ? 3 : static_cast<int32_t>(rng() % 7);
    DeviceBuffer dw(stacked), dids(ids), dorder(choices * 4), doffsets((experts + 2) * 4);
    ASSERT_TRUE(SortByMember(dids.as<int32_t>(), choices, experts, member0, dorder.as<int32_t>(),
                             doffsets.as<int32_t>(), nullptr)
                    .ok());
    for (DType act : {DType::kF16, DType::kBF16}) {
      for (bool per_choice : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << Name(type) << " " << DTypeName(act)
                     << (per_choice ? " input per choice" : " input per token"));
        const size_t esz = DTypeBytes(act);
        const int64_t x_rows = per_choice ? choices : tokens;
        const int64_t x_stride = cols + 64, y_stride = rows + 6;  // padded
        const std::vector<float> x = Round(RandomVector(cols * x_rows, rng), act);
        std::vector<float> x_padded(x_rows * x_stride, 0.0f);
        for (int64_t i = 0; i < x_rows; ++i) {
          std::copy(x.begin() + i * cols, x.begin() + (i + 1) * cols,
                    x_padded.begin() + i * x_stride);
        }
        DeviceBuffer dx(Encode(x, act)), dxp(Encode(x_padded, act)), dy(choices * y_stride * esz);
        GroupedGemvArgs g = Stack(type, rows, cols, experts, member0, expert_bytes, dw.get(),
                                  dids.as<int32_t>(), tokens, used);
        g.x = dxp.get();
        g.x_per_choice = per_choice;
        g.x_stride = x_stride;
        g.y = dy.get();
        g.y_stride = y_stride;
        EXPECT_FALSE(GroupedGemmTiles(g, act, nullptr).ok()) << "without the sorted choices";
        g.order = dorder.as<int32_t>();
        g.offsets = doffsets.as<int32_t>();
        EXPECT_FALSE(GroupedGemmTiles(g, DType::kF32, nullptr).ok()) << "float32 activations";
        ASSERT_TRUE(GroupedGemmTiles(g, act, nullptr).ok());
        // Each member over every activation row, with GemmTiles.
        std::vector<std::vector<float>> whole(experts);
        for (int m = 0; m < experts; ++m) {
          const size_t bytes = x_rows * rows * esz;
          DeviceBuffer dwm(w[m]), dym(bytes);
          ASSERT_TRUE(GemmTiles(DeviceMatrix{type, rows, cols, expert_bytes / rows, dwm.get()},
                                dx.get(), act, x_rows, dym.get(), nullptr)
                          .ok());
          Sync();
          whole[m] = Decode(dym.Download<uint8_t>(bytes), act);
        }
        Sync();
        const std::vector<float> y = Decode(dy.Download<uint8_t>(choices * y_stride * esz), act);
        int differ = 0;
        for (int64_t c = 0; c < choices; ++c) {
          const std::vector<float> yc(y.begin() + c * y_stride, y.begin() + c * y_stride + rows);
          const int m = ids[c] - member0;
          if (m < 0 || m >= experts) {
            EXPECT_EQ(yc, std::vector<float>(rows, 0.0f)) << "choice " << c;
            continue;
          }
          const int64_t xr = per_choice ? c : c / used;
          const std::vector<float> want(whole[m].begin() + xr * rows,
                                        whole[m].begin() + (xr + 1) * rows);
          if (yc != want && differ++ < 3)
            ADD_FAILURE() << "choice " << c << " differs from GemmTiles";
          if (c % 7 == 0) {
            const SeenWeights seen = WeightsAsSeen(type, w[m], rows, cols, act);
            ExpectProduct(seen.type, seen.bytes, rows, cols,
                          std::vector<float>(x.begin() + xr * cols, x.begin() + (xr + 1) * cols), 1,
                          act, yc);
          }
        }
        EXPECT_EQ(differ, 0);
      }
    }
  }
}

TEST_F(CudaMatmul, GemmTilesRejectsFloat32AndUnknownTypes) {
  std::mt19937_64 rng(10);
  const std::vector<uint8_t> w = quant::testing::RandomBlocks(GgmlType::kQ8_0, 64 * 256, rng);
  DeviceBuffer dw(w), dx(256 * 4 * 4), dy(64 * 4 * 4);
  const DeviceMatrix m{GgmlType::kQ8_0, 64, 256, w.size() / 64, dw.get()};
  const absl::Status f32 = GemmTiles(m, dx.get(), DType::kF32, 4, dy.get(), nullptr);
  EXPECT_EQ(f32.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(f32.message()).find("float32"), std::string::npos) << f32;
  const DeviceMatrix iq2{GgmlType::kIQ2_XXS, 64, 256, 66, dw.get()};
  const absl::Status unknown = GemmTiles(iq2, dx.get(), DType::kF16, 4, dy.get(), nullptr);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(unknown.message()).find("no CUDA decoder"), std::string::npos) << unknown;
}

}  // namespace
}  // namespace tessera::cuda
