// Matmul against a float64 reference of the reference-dequantized weights, for every type,
// at awkward sizes, both paths, every instruction-set level the host has, 1–3 threads.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/quant/blocks.h"
#include "common/quant/dequantize.h"
#include "common/quant/type_traits.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/decode_panels.h"
#include "kernels/cpu/int8_gemm.h"
#include "kernels/cpu/kernels_avx512.h"
#include "kernels/reference/matmul_ref.h"
#include "tests/unit/quant_test_util.h"

namespace tessera::cpu {
namespace {

using gguf::GgmlType;
using ::testing::HasSubstr;

constexpr double kU = 0x1p-24;  // float32 unit roundoff

struct Problem {
  GgmlType type;
  int64_t rows, cols, batch;
  std::vector<uint8_t> w;
  std::vector<float> w_dense;  // reference-dequantized
  std::vector<float> x;
  std::vector<double> want;  // float64 reference
};

Problem MakeProblem(GgmlType type, int64_t rows, int64_t cols, int64_t batch, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Problem p{type, rows, cols, batch, quant::testing::RandomBlocks(type, rows * cols, rng),
            {},   {},   {}};
  p.w_dense.resize(rows * cols);
  EXPECT_TRUE(quant::DequantizeToFloat(type, p.w, rows * cols, p.w_dense.data()).ok());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < batch * cols; ++i) p.x.push_back(normal(rng));
  auto want = kernels::reference::MatmulFloat64(type, p.w, rows, cols, p.x, batch);
  EXPECT_TRUE(want.ok()) << want.status();
  p.want = *want;
  return p;
}

// |y − want| bound for output (b, r): float32 accumulation over `cols` terms, plus, on the
// integer path, the activation rounding Σ|w_k|·e_k with e_k the Q8 rounding bound of x_k's
// block (activation_quant.h: amax/254·1.125 for Q8_0, amax/254 for Q8_K).
double Tolerance(const Problem& p, int64_t b, int64_t r, bool integer) {
  const float* w = p.w_dense.data() + r * p.cols;
  const float* x = p.x.data() + b * p.cols;
  const quant::QuantTraits* act =
      quant::FindQuantTraits(quant::FindQuantTraits(p.type)->activation_type);
  const int64_t block = integer ? act->block_elems : 1;
  double sum_abs = 0, act_err = 0;
  for (int64_t k0 = 0; k0 < p.cols; k0 += block) {
    double amax = 0;
    for (int64_t k = k0; k < k0 + block; ++k) amax = std::max(amax, std::fabs(double{x[k]}));
    const double e = !integer ? 0 : amax / 254 * (block == 32 ? 1.125 : 1 + 0x1p-20);
    for (int64_t k = k0; k < k0 + block; ++k) {
      sum_abs += std::fabs(double{w[k]}) * (std::fabs(double{x[k]}) + e);
      act_err += std::fabs(double{w[k]}) * e;
    }
  }
  return act_err + 2 * static_cast<double>(p.cols) * kU * sum_abs + 1e-30;
}

void Check(const Problem& p, MatmulPath path, Isa isa, int threads) {
  auto w = QuantMatrix::Make(p.type, p.rows, p.cols, p.w, "w");
  ASSERT_TRUE(w.ok()) << w.status();
  ThreadPool pool(threads);
  std::vector<float> y(p.batch * p.rows, NAN);
  MatmulOptions opt{path, isa};
  opt.min_parallel_macs = 0;  // these small products must still go through the pool
  ASSERT_TRUE(Matmul(*w, 0, p.rows, p.x.data(), p.batch, y.data(), p.rows, &pool, opt).ok());
  const bool integer = RoundsActivations(p.type, p.batch, opt);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t r = 0; r < p.rows; ++r) {
      const double want = p.want[b * p.rows + r];
      ASSERT_NEAR(y[b * p.rows + r], want, Tolerance(p, b, r, integer))
          << quant::FindQuantTraits(p.type)->name << " rows " << p.rows << " batch " << p.batch
          << " (b " << b << ", r " << r << ") isa " << IsaName(isa) << " threads " << threads
          << (integer ? " integer" : " float");
    }
  }
}

class MatmulTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatmulTest, MatchesFloat64Reference) {
  const int64_t cols = quant::FindQuantTraits(GetParam())->block_elems == 1 ? 37 : 512;
  uint64_t seed = 7;
  for (int64_t rows : {1, 3, 17}) {
    for (int64_t batch : {1, 7, 64}) {
      const Problem p = MakeProblem(GetParam(), rows, cols, batch, seed++);
      for (MatmulPath path : {MatmulPath::kAuto, MatmulPath::kFloat, MatmulPath::kInteger}) {
        for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
          if (IsaSupported(isa)) Check(p, path, isa, 2);
        }
        for (int threads : {1, 3}) Check(p, path, BestIsa(), threads);
      }
    }
  }
}

std::vector<GgmlType> AllTypes() {
  std::vector<GgmlType> out;
  for (const quant::QuantTraits& t : quant::SupportedQuantTypes()) out.push_back(t.type);
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulTest, ::testing::ValuesIn(AllTypes()),
                         [](const auto& info) {
                           return std::string(quant::FindQuantTraits(info.param)->name);
                         });

// Rows longer than the prefill column slice (1024) are multiplied slice by slice.
TEST(MatmulWideTest, LongRowsMatchFloat64Reference) {
  uint64_t seed = 99;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kF16, GgmlType::kQ8_0}) {
    for (int64_t rows : {7, 30}) {
      for (int64_t batch : {8, 64}) {
        const Problem p = MakeProblem(type, rows, 2560, batch, seed++);
        for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
          if (IsaSupported(isa)) Check(p, MatmulPath::kAuto, isa, 2);
        }
      }
    }
  }
}

// The int8 GEMM (batch ≥ kPrefillBatch, AVX-512 VNNI): rows and tokens that are not
// multiples of its 16-row panels, 32-row tiles and 4/8-token register tiles, on 1–3
// threads. Its error is the integer path's (Tolerance: activation rounding + float32).
TEST(MatmulInt8GemmTest, OddShapesMatchFloat64Reference) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "host has no AVX-512 VNNI";
  uint64_t seed = 300;
  for (GgmlType type :
       {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    for (int64_t rows : {1, 16, 17, 45}) {
      for (int64_t batch : {8, 13, 37}) {
        const Problem p = MakeProblem(type, rows, 768, batch, seed++);
        ASSERT_TRUE(RoundsActivations(type, batch, MatmulOptions{MatmulPath::kAuto, Isa::kAvx512}));
        for (int threads : {1, 2, 3}) Check(p, MatmulPath::kAuto, Isa::kAvx512, threads);
      }
    }
  }
}

// The exact path never rounds activations, whatever the batch.
TEST(MatmulInt8GemmTest, FloatPathStaysFloat) {
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0}) {
    EXPECT_FALSE(RoundsActivations(type, 512, MatmulOptions{MatmulPath::kFloat}));
    EXPECT_FALSE(RoundsActivations(type, 512, MatmulOptions{MatmulPath::kAuto, Isa::kScalar}));
  }
}

// A shard [begin, end) that starts inside a 16-row panel writes only its own outputs.
TEST(MatmulInt8GemmTest, ShardWritesItsOwnRows) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "host has no AVX-512 VNNI";
  const Problem p = MakeProblem(GgmlType::kQ6_K, 50, 512, 11, 77);
  auto w = QuantMatrix::Make(p.type, p.rows, p.cols, p.w, "w");
  ASSERT_TRUE(w.ok());
  ThreadPool pool(2);
  constexpr int64_t kBegin = 5, kEnd = 43, kLdy = 40;
  std::vector<float> y(p.batch * kLdy, -123.0f);
  MatmulOptions opt{MatmulPath::kAuto, Isa::kAvx512};
  opt.min_parallel_macs = 0;
  ASSERT_TRUE(Matmul(*w, kBegin, kEnd, p.x.data(), p.batch, y.data(), kLdy, &pool, opt).ok());
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t r = kBegin; r < kEnd; ++r) {
      EXPECT_NEAR(y[b * kLdy + r - kBegin], p.want[b * p.rows + r], Tolerance(p, b, r, true));
    }
    for (int64_t pad = kEnd - kBegin; pad < kLdy; ++pad) EXPECT_EQ(y[b * kLdy + pad], -123.0f);
  }
}

// F32 matrices with a prefill batch (attention) take the AVX-512 panel kernel: odd row
// counts, short and long rows, token counts across its 384-token blocks.
TEST(MatmulFloatPanelTest, OddShapesMatchFloat64Reference) {
  uint64_t seed = 500;
  for (int64_t cols : {37, 64, 512}) {
    for (int64_t rows : {5, 33, 70}) {
      for (int64_t batch : {8, 29, 400}) {
        const Problem p = MakeProblem(GgmlType::kF32, rows, cols, batch, seed++);
        for (int threads : {1, 3}) Check(p, MatmulPath::kFloat, BestIsa(), threads);
      }
    }
  }
}

TEST(MatmulRowRangeTest, ShardMultipliesItsOwnRows) {
  const Problem p = MakeProblem(GgmlType::kQ4_K, 17, 512, 3, 42);
  auto w = QuantMatrix::Make(p.type, p.rows, p.cols, p.w, "w");
  ASSERT_TRUE(w.ok());
  ThreadPool pool(2);
  constexpr int64_t kBegin = 5, kEnd = 12, kLdy = 10;
  std::vector<float> y(p.batch * kLdy, -123.0f);
  ASSERT_TRUE(Matmul(*w, kBegin, kEnd, p.x.data(), p.batch, y.data(), kLdy, &pool).ok());
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t r = kBegin; r < kEnd; ++r) {
      EXPECT_NEAR(y[b * kLdy + r - kBegin], p.want[b * p.rows + r], Tolerance(p, b, r, true));
    }
    for (int64_t pad = kEnd - kBegin; pad < kLdy; ++pad) EXPECT_EQ(y[b * kLdy + pad], -123.0f);
  }
}

TEST(MatmulErrorsTest, BadShapesAndRanges) {
  std::vector<uint8_t> bytes(144 * 2);
  auto bad_cols = QuantMatrix::Make(GgmlType::kQ4_K, 2, 100, bytes, "blk.0.ffn_up.weight");
  EXPECT_EQ(bad_cols.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_cols.status().message()), HasSubstr("blk.0.ffn_up.weight"));
  auto bad_size = QuantMatrix::Make(GgmlType::kQ4_K, 3, 256, bytes, "w");
  EXPECT_EQ(bad_size.status().code(), absl::StatusCode::kInvalidArgument);
  auto unsupported = QuantMatrix::Make(GgmlType::kIQ2_XXS, 1, 256, bytes, "blk.1.attn_v.weight");
  EXPECT_EQ(unsupported.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(unsupported.status().message()), HasSubstr("iq2_xxs"));

  auto w = QuantMatrix::Make(GgmlType::kQ4_K, 2, 256, bytes, "w");
  ASSERT_TRUE(w.ok());
  std::vector<float> x(256), y(4);
  EXPECT_FALSE(Matmul(*w, 1, 1, x.data(), 1, y.data(), 2, nullptr).ok());
  EXPECT_FALSE(Matmul(*w, 0, 3, x.data(), 1, y.data(), 3, nullptr).ok());
  EXPECT_FALSE(Matmul(*w, 0, 2, x.data(), 1, y.data(), 1, nullptr).ok());
  EXPECT_TRUE(Matmul(*w, 0, 2, x.data(), 1, y.data(), 2, nullptr).ok());
}

TEST(MatmulTest, HotTypesTakeTheIntegerPathWithAvx2) {
  if (!IsaSupported(Isa::kAvx2)) GTEST_SKIP() << "host has no AVX2";
  for (auto type : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    EXPECT_TRUE(HasIntegerKernel(type, Isa::kAvx2)) << static_cast<int>(type);
  }
  EXPECT_FALSE(HasIntegerKernel(GgmlType::kQ4_K, Isa::kScalar));
}

// Decode rows share a pass over each weight row (up to four vectors per weight-block decode,
// eight with the AVX-512 VNNI dots of q4_K, q5_K and q6_K; from 16 vectors on the int8 GEMM where
// the type has one), and each row's result must keep the bits it gets alone: batch-invariant
// serving depends on it. Also for the activations quantized once and shared (MatmulQuantized).
TEST(MatmulDotsTest, EachVectorGetsTheBitsItGetsAlone) {
  if (!IsaSupported(Isa::kAvx2)) GTEST_SKIP() << "host has no AVX2";
  uint64_t seed = 91;
  for (const quant::QuantTraits& t : quant::SupportedQuantTypes()) {
    if (!HasIntegerKernel(t.type)) continue;
    // Batches of two to eleven take the dots (q4_K's, q5_K's and q6_K's AVX-512 VNNI dots in
    // passes of up to eight vectors), 19 the int8 GEMM; rows of an even and an
    // odd number of 256-element blocks.
    for (const auto& [cols, batch] : {std::pair<int64_t, int64_t>{512, 19},
                                      {512, 2},
                                      {768, 3},
                                      {768, 4},
                                      {1280, 5},
                                      {768, 8},
                                      {1280, 11}}) {
      SCOPED_TRACE(testing::Message() << t.name << " cols " << cols << " batch " << batch);
      const int64_t rows = 5;
      const Problem p = MakeProblem(t.type, rows, cols, batch, seed++);
      auto w = QuantMatrix::Make(p.type, rows, cols, p.w, "w");
      ASSERT_TRUE(w.ok()) << w.status();
      ThreadPool pool(2);
      MatmulOptions opt;
      opt.path = MatmulPath::kDots;
      opt.min_parallel_macs = 0;
      std::vector<float> all(batch * rows), alone(rows);
      ASSERT_TRUE(Matmul(*w, 0, rows, p.x.data(), batch, all.data(), rows, &pool, opt).ok());
      for (int64_t b = 0; b < batch; ++b) {
        ASSERT_TRUE(
            Matmul(*w, 0, rows, p.x.data() + b * cols, 1, alone.data(), rows, nullptr, opt).ok());
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(std::bit_cast<uint32_t>(all[b * rows + r]), std::bit_cast<uint32_t>(alone[r]))
              << "vector " << b << " row " << r;
        }
      }
      QuantizedActivations xq;
      QuantizeActivations(ActivationFormat(t.type), p.x.data(), batch, cols, &xq);
      std::vector<float> shared(batch * rows);
      ASSERT_TRUE(MatmulQuantized(*w, 1, rows, xq, shared.data(), rows, &pool).ok());
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t r = 1; r < rows; ++r) {
          ASSERT_EQ(std::bit_cast<uint32_t>(shared[b * rows + r - 1]),
                    std::bit_cast<uint32_t>(all[b * rows + r]))
              << "shared activations, vector " << b << " row " << r;
        }
      }
    }
  }
}

// Float weights (F32, F16, BF16) under batch invariance: the kDots path keeps the dot-product
// kernel at every batch, and a product told the kernel of a prefill batch (kernel_batch) gives
// a row the same bits in a product of 1, 3 or 20 rows (prompt chunks of any length); rows
// longer than the prefill kernels' column slices (1,024) and shorter ones. The bits of both
// are checked against a float64 product too, so that neither can be a broken constant.
TEST(MatmulFloatTest, FixedKernelsGiveEachRowItsOwnBits) {
  uint64_t seed = 301;
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
    for (int64_t cols : {256, 1536}) {
      SCOPED_TRACE(testing::Message() << static_cast<int>(type) << " cols " << cols);
      const int64_t rows = 37, batch = 20;
      const Problem p = MakeProblem(type, rows, cols, batch, seed++);
      auto w = QuantMatrix::Make(p.type, rows, cols, p.w, "w");
      ASSERT_TRUE(w.ok()) << w.status();
      ThreadPool pool(2);
      MatmulOptions dots;
      dots.path = MatmulPath::kDots;
      dots.min_parallel_macs = 0;
      MatmulOptions prefill;
      prefill.kernel_batch = kPrefillBatch;
      prefill.min_parallel_macs = 0;
      for (const MatmulOptions& opt : {dots, prefill}) {
        std::vector<float> all(batch * rows);
        ASSERT_TRUE(Matmul(*w, 0, rows, p.x.data(), batch, all.data(), rows, &pool, opt).ok());
        for (int64_t b = 0; b < batch; ++b) {
          for (int64_t r = 0; r < rows; ++r) {
            EXPECT_NEAR(all[b * rows + r], p.want[b * rows + r], Tolerance(p, b, r, false));
          }
        }
        for (int64_t part : {1, 3}) {
          std::vector<float> y(part * rows);
          for (int64_t b0 = 0; b0 + part <= batch; b0 += part) {
            ASSERT_TRUE(
                Matmul(*w, 0, rows, p.x.data() + b0 * cols, part, y.data(), rows, nullptr, opt)
                    .ok());
            for (int64_t i = 0; i < part * rows; ++i) {
              ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(all[b0 * rows + i]))
                  << (opt.path == MatmulPath::kDots ? "dots" : "prefill") << " part " << part
                  << " vector " << b0 + i / rows << " row " << i % rows;
            }
          }
        }
      }
    }
  }
}

// The int8 GEMM (prefill batches, and decode batches of 8+ on the kDots path) and the
// integer dots form the same exact block sums and accumulate them in the same order: every
// (row, token) must get the same bits from both, also where block sums pass 2^24 (all
// activations at the top of their range, which float accumulation of the sums would round).
TEST(MatmulDotsTest, Int8GemmGivesTheBitsOfTheDots) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "host has no AVX-512 VNNI";
  uint64_t seed = 131;
  int types = 0;
  for (const quant::QuantTraits& t : quant::SupportedQuantTypes()) {
    if (!HasIntegerKernel(t.type) || !RoundsActivations(t.type, 64, {})) continue;
    ++types;
    for (bool extreme : {false, true}) {
      SCOPED_TRACE(testing::Message() << t.name << (extreme ? " extreme" : ""));
      const int64_t rows = 37, cols = 1024, batch = 24;
      Problem p = MakeProblem(t.type, rows, cols, batch, seed++);
      if (extreme) {
        for (size_t i = 0; i < p.x.size(); ++i) p.x[i] = (i / cols) % 2 == 0 ? 3.0f : -3.0f;
      }
      auto w = QuantMatrix::Make(p.type, rows, cols, p.w, "w");
      ASSERT_TRUE(w.ok()) << w.status();
      MatmulOptions auto_path;  // batch 24: the int8 GEMM where the type has one
      std::vector<float> gemm(batch * rows), alone(rows);
      ASSERT_TRUE(
          Matmul(*w, 0, rows, p.x.data(), batch, gemm.data(), rows, nullptr, auto_path).ok());
      for (int64_t b = 0; b < batch; ++b) {
        ASSERT_TRUE(
            Matmul(*w, 0, rows, p.x.data() + b * cols, 1, alone.data(), rows, nullptr, {}).ok());
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(std::bit_cast<uint32_t>(gemm[b * rows + r]), std::bit_cast<uint32_t>(alone[r]))
              << "token " << b << " row " << r << ": " << gemm[b * rows + r] << " vs " << alone[r];
        }
      }
    }
  }
  EXPECT_EQ(types, 5) << "q4_0, q8_0, q4_K, q5_K and q6_K have the int8 GEMM";
}

// Panels kept from load (PackedInt8Matrix) hold what the GEMM would unpack: a product over
// them gives every (row, vector) the bits of the one-vector dot, at every batch (packed
// matrices take the GEMM from 2 vectors when measured faster), for row ranges that start on
// a panel boundary (read packed) or not (unpacked as before), for a view of rows inside a
// larger packed matrix (an expert of a stacked tensor), on one thread or several.
TEST(MatmulPackedTest, PackedPanelsGiveTheBitsOfTheDots) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "host has no AVX-512 VNNI";
  uint64_t seed = 171;
  int types = 0;
  for (const quant::QuantTraits& t : quant::SupportedQuantTypes()) {
    const Int8GemmLayout* layout = FindInt8GemmLayout(t.type);
    if (layout == nullptr || !HasIntegerKernel(t.type)) continue;
    ++types;
    SCOPED_TRACE(t.name);
    const int64_t rows = 75, cols = 512, max_batch = 13;
    const Problem p = MakeProblem(t.type, rows, cols, max_batch, seed++);
    auto w = QuantMatrix::Make(p.type, rows, cols, p.w, "w");
    ASSERT_TRUE(w.ok()) << w.status();
    ThreadPool pool(3);
    auto packed =
        PackedInt8Matrix::Pack(*layout, w->data, w->row_bytes, rows, cols, Isa::kAvx512, &pool);
    ASSERT_EQ(packed->panels(), 5);
    EXPECT_EQ(packed->bytes(), PackedInt8Matrix::Bytes(*layout, rows, cols));
    QuantMatrix pw = *w;
    pw.packed = packed.get();
    // Expert-like view: rows [32, 75) of the packed matrix as a matrix of their own.
    QuantMatrix tail = pw;
    tail.rows = rows - 32;
    tail.data = w->data + 32 * w->row_bytes;
    tail.packed_row0 = 32;
    for (MatmulPath path : {MatmulPath::kAuto, MatmulPath::kDots}) {
      MatmulOptions opt;
      opt.path = path;
      opt.min_parallel_macs = 0;
      opt.packed_gemm_batch[static_cast<uint32_t>(t.type)] = 2;  // the GEMM from 2 vectors
      for (int64_t batch : {1, 2, 3, 5, 8, 13}) {
        for (auto [m, r0] : {std::pair<const QuantMatrix*, int64_t>{&pw, 0},
                             {&pw, 16},
                             {&pw, 7},
                             {&tail, 0},
                             {&tail, 5}}) {
          SCOPED_TRACE(testing::Message()
                       << "path " << static_cast<int>(path) << " batch " << batch << " rows from "
                       << r0 << " of a view at " << m->packed_row0);
          const int64_t n = m->rows - r0;
          std::vector<float> got(batch * n), alone(n);
          ASSERT_TRUE(Matmul(*m, r0, m->rows, p.x.data(), batch, got.data(), n, &pool, opt).ok());
          for (int64_t b = 0; b < batch; ++b) {
            ASSERT_TRUE(Matmul(*w, m->packed_row0 + r0, m->packed_row0 + m->rows,
                               p.x.data() + b * cols, 1, alone.data(), n, nullptr, {})
                            .ok());
            for (int64_t r = 0; r < n; ++r) {
              ASSERT_EQ(std::bit_cast<uint32_t>(got[b * n + r]), std::bit_cast<uint32_t>(alone[r]))
                  << "vector " << b << " row " << r << ": " << got[b * n + r] << " vs " << alone[r];
            }
          }
        }
      }
      // Small batches of a packed matrix take the GEMM (no integer dots) from 2 vectors.
      EXPECT_TRUE(UsesIntegerDots(pw, 1, opt));
      if (path == MatmulPath::kAuto) {
        EXPECT_FALSE(UsesIntegerDots(pw, 2, opt));
        EXPECT_TRUE(UsesIntegerDots(*w, 2, opt)) << "no panels: the dots below the prefill batch";
      }
    }
    // And they agree with the float64 reference within the integer path's bound.
    std::vector<float> y(max_batch * rows);
    ASSERT_TRUE(Matmul(pw, 0, rows, p.x.data(), max_batch, y.data(), rows, &pool, {}).ok());
    for (int64_t b = 0; b < max_batch; ++b) {
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_NEAR(y[b * rows + r], p.want[b * rows + r], Tolerance(p, b, r, true));
      }
    }
  }
  EXPECT_EQ(types, 5) << "q4_0, q8_0, q4_K, q5_K and q6_K have the int8 GEMM";
}

// Every q4_K / q5_K quant of `w` at its maximum (15 / 31), under the largest scales and mins.
template <class Block>
void MaximizeK4(std::vector<uint8_t>& w) {
  auto* blocks = reinterpret_cast<Block*>(w.data());
  for (size_t i = 0; i < w.size() / sizeof(Block); ++i) {
    std::fill(std::begin(blocks[i].scales), std::end(blocks[i].scales), 0xFF);
    std::fill(std::begin(blocks[i].qs), std::end(blocks[i].qs), 0xFF);
    if constexpr (std::is_same_v<Block, quant::BlockQ5_K>) {
      std::fill(std::begin(blocks[i].qh), std::end(blocks[i].qh), 0xFF);
    }
  }
}

// Every q6_K quant of `w` at its maximum (63) under scales of 127 and -128.
void MaximizeQ6K(std::vector<uint8_t>& w) {
  auto* blocks = reinterpret_cast<quant::BlockQ6_K*>(w.data());
  for (size_t i = 0; i < w.size() / sizeof(quant::BlockQ6_K); ++i) {
    std::fill(std::begin(blocks[i].ql), std::end(blocks[i].ql), 0xFF);
    std::fill(std::begin(blocks[i].qh), std::end(blocks[i].qh), 0xFF);
    for (int j = 0; j < 16; ++j) blocks[i].scales[j] = j % 2 == 0 ? 127 : -128;
  }
}

// The AVX-512 dots give the AVX2 dots' bits (the VNNI dots of q4_K, q5_K and q6_K, one to
// eight vectors per pass; q6_K's one-vector dot with two blocks per register), for even and
// odd block counts, every vector count a pass takes, and operands at the top of their
// range: activations that quantize to ±127 and -128 against blocks whose quants are all at
// their maximum (q4_K 15 and q5_K 31 under scales and mins of 63, q6_K 63 under scales of
// 127 and -128), where the VNNI form's 16-bit lanes come closest to their limit.
TEST(MatmulDotsTest, Avx512DotsGiveTheAvx2Bits) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "host has no AVX-512";
  uint64_t seed = 211;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    for (int64_t cols : {256, 512, 768, 1280}) {
      for (int64_t batch : {1, 2, 3, 5, 8}) {
        for (bool extreme : {false, true}) {
          SCOPED_TRACE(testing::Message() << quant::FindQuantTraits(type)->name << " cols " << cols
                                          << " batch " << batch << (extreme ? " extreme" : ""));
          const int64_t rows = 9;
          Problem p = MakeProblem(type, rows, cols, batch, seed++);
          if (extreme) {
            for (size_t i = 0; i < p.x.size(); ++i) p.x[i] = i % 3 == 0 ? -3.0f : 3.0f;
            if (type == GgmlType::kQ4_K) MaximizeK4<quant::BlockQ4_K>(p.w);
            if (type == GgmlType::kQ5_K) MaximizeK4<quant::BlockQ5_K>(p.w);
            if (type == GgmlType::kQ6_K) MaximizeQ6K(p.w);
          }
          auto w = QuantMatrix::Make(p.type, rows, cols, p.w, "w");
          ASSERT_TRUE(w.ok()) << w.status();
          std::vector<float> wide(rows * batch), narrow(rows * batch);
          ASSERT_TRUE(Matmul(*w, 0, rows, p.x.data(), batch, wide.data(), rows, nullptr,
                             MatmulOptions{MatmulPath::kDots, Isa::kAvx512})
                          .ok());
          ASSERT_TRUE(Matmul(*w, 0, rows, p.x.data(), batch, narrow.data(), rows, nullptr,
                             MatmulOptions{MatmulPath::kDots, Isa::kAvx2})
                          .ok());
          for (int64_t b = 0; b < batch; ++b) {
            for (int64_t r = 0; r < rows; ++r) {
              const int64_t i = b * rows + r;
              ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), std::bit_cast<uint32_t>(narrow[i]))
                  << "vector " << b << " row " << r << ": " << wide[i] << " vs " << narrow[i];
              if (!extreme) {
                ASSERT_NEAR(wide[i], p.want[i], Tolerance(p, b, r, true));
              }
            }
          }
        }
      }
    }
  }
}

// Decode panels kept from load (DecodePanelMatrix: 16 q4_K, q5_K, q6_K or q8_0 rows
// interleaved with their 4-, 5-, 6- and 8-bit quants) give every (row, vector) the bits of the AVX2
// dot, at every vector count a pass takes and past it (passes of eight), for row ranges that start
// and end inside a panel (the rows outside whole panels go row by row), for a view of rows inside a
// larger matrix (an expert of a stacked tensor, a tensor-parallel shard), on one thread or several,
// with random blocks and with operands at the top of their range.
TEST(MatmulDecodePanelsTest, PanelsGiveTheBitsOfTheDots) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "host has no AVX-512 VNNI";
  uint64_t seed = 331;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ8_0}) {
    ASSERT_TRUE(DecodePanelMatrix::Covers(type));
    ASSERT_NE(avx512::DecodePanelDots(type), nullptr) << "panels without a kernel";
    // q8_0: odd block counts too (the last pair of blocks half filled).
    const std::vector<int64_t> widths = type == GgmlType::kQ8_0
                                            ? std::vector<int64_t>{96, 256, 1312}
                                            : std::vector<int64_t>{256, 768, 1280};
    for (int64_t cols : widths) {
      for (bool extreme : {false, true}) {
        SCOPED_TRACE(testing::Message() << quant::FindQuantTraits(type)->name << " cols " << cols
                                        << (extreme ? " extreme" : ""));
        const int64_t rows = 71, max_batch = 31;
        Problem p = MakeProblem(type, rows, cols, max_batch, seed++);
        if (extreme) {
          for (size_t i = 0; i < p.x.size(); ++i) p.x[i] = i % 3 == 0 ? -3.0f : 3.0f;
          if (type == GgmlType::kQ4_K) MaximizeK4<quant::BlockQ4_K>(p.w);
          if (type == GgmlType::kQ5_K) MaximizeK4<quant::BlockQ5_K>(p.w);
          if (type == GgmlType::kQ6_K) MaximizeQ6K(p.w);
          if (type == GgmlType::kQ8_0) {  // quants at both ends of their range
            auto* blocks = reinterpret_cast<quant::BlockQ8_0*>(p.w.data());
            for (size_t i = 0; i < p.w.size() / sizeof(quant::BlockQ8_0); ++i) {
              for (int k = 0; k < quant::kQK; ++k) blocks[i].qs[k] = k % 2 == 0 ? 127 : -128;
            }
          }
        }
        auto w = QuantMatrix::Make(p.type, rows, cols, p.w, "w");
        ASSERT_TRUE(w.ok()) << w.status();
        ThreadPool pool(3);
        auto panels = DecodePanelMatrix::Pack(type, w->data, w->row_bytes, rows, cols, &pool);
        ASSERT_EQ(panels->panels(), 4) << "whole panels only";
        EXPECT_EQ(panels->bytes(), DecodePanelMatrix::Bytes(type, rows, cols));
        size_t panel_bytes = (cols / 32 + 1) / 2 * kQ8_0PanelPairBytes;
        if (type == GgmlType::kQ4_K) panel_bytes = cols / 256 * kQ4KPanelBlockBytes;
        if (type == GgmlType::kQ5_K) panel_bytes = cols / 256 * kQ5KPanelBlockBytes;
        if (type == GgmlType::kQ6_K) panel_bytes = cols / 256 * kQ6KPanelBlockBytes;
        EXPECT_EQ(panels->bytes(), 4 * panel_bytes);
        QuantMatrix pw = *w;
        pw.decode_panels = panels.get();
        QuantMatrix tail = pw;  // rows [21, 71) as a matrix of their own
        tail.rows = rows - 21;
        tail.data = w->data + 21 * w->row_bytes;
        tail.decode_panels_row0 = 21;
        for (int64_t batch : {1, 2, 3, 4, 5, 8, 9, 19, 31}) {
          for (auto [m, r0, r1] : {std::tuple<const QuantMatrix*, int64_t, int64_t>{&pw, 0, 71},
                                   {&pw, 16, 48},
                                   {&pw, 7, 70},
                                   {&pw, 3, 12},
                                   {&tail, 0, 50},
                                   {&tail, 5, 43}}) {
            for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
              SCOPED_TRACE(testing::Message() << "batch " << batch << " rows [" << r0 << ", " << r1
                                              << ") of a view at " << m->decode_panels_row0
                                              << (threads ? " 3 threads" : " 1 thread"));
              const int64_t n = r1 - r0;
              MatmulOptions opt;
              opt.path = MatmulPath::kDots;
              // Panels up to 31 vectors (passes of eight), as CalibrateDecodePanelGemm may
              // choose; the GEMM from 32.
              opt.dots_gemm_batch[static_cast<uint32_t>(type)] = 32;
              opt.min_parallel_macs = 0;
              std::vector<float> got(batch * n), alone(n);
              ASSERT_TRUE(Matmul(*m, r0, r1, p.x.data(), batch, got.data(), n, threads, opt).ok());
              for (int64_t b = 0; b < batch; ++b) {
                ASSERT_TRUE(Matmul(*w, m->decode_panels_row0 + r0, m->decode_panels_row0 + r1,
                                   p.x.data() + b * cols, 1, alone.data(), n, nullptr,
                                   MatmulOptions{MatmulPath::kDots, Isa::kAvx2})
                                .ok());
                for (int64_t r = 0; r < n; ++r) {
                  ASSERT_EQ(std::bit_cast<uint32_t>(got[b * n + r]),
                            std::bit_cast<uint32_t>(alone[r]))
                      << "vector " << b << " row " << r << ": " << got[b * n + r] << " vs "
                      << alone[r];
                }
              }
            }
          }
        }
        if (!extreme) {  // and the float64 reference, within the integer path's bound
          std::vector<float> y(3 * rows);
          ASSERT_TRUE(Matmul(pw, 0, rows, p.x.data(), 3, y.data(), rows, &pool, {}).ok());
          for (int64_t b = 0; b < 3; ++b) {
            for (int64_t r = 0; r < rows; ++r) {
              ASSERT_NEAR(y[b * rows + r], p.want[b * rows + r], Tolerance(p, b, r, true));
            }
          }
        }
      }
    }
  }
  EXPECT_FALSE(DecodePanelMatrix::Covers(GgmlType::kQ4_0));
  EXPECT_EQ(DecodePanelMatrix::Bytes(GgmlType::kQ4_K, 15, 256), 0u) << "no whole panel";
}

// Bytes() is what a packed matrix keeps: the GEMM's quants (one byte each), the group and
// block scales per lane, padded to whole panels of 16 rows.
TEST(MatmulPackedTest, BytesCountWholePanels) {
  const Int8GemmLayout* q4k = FindInt8GemmLayout(GgmlType::kQ4_K);
  const Int8GemmLayout* q8 = FindInt8GemmLayout(GgmlType::kQ8_0);
  ASSERT_NE(q4k, nullptr);
  ASSERT_NE(q8, nullptr);
  // q4_K, 256 cols: per panel 16·256 quants, 8 group scales, 1 d, 1 dmin, 4 min pairs (×16
  // lanes × 4 bytes).
  EXPECT_EQ(PackedInt8Matrix::Bytes(*q4k, 16, 256), 16u * 256 + (8 + 1 + 1 + 4) * 16 * 4);
  EXPECT_EQ(PackedInt8Matrix::Bytes(*q4k, 17, 256), 2 * PackedInt8Matrix::Bytes(*q4k, 16, 256));
  // q8_0, 64 cols: 2 groups = 2 blocks, no mins.
  EXPECT_EQ(PackedInt8Matrix::Bytes(*q8, 16, 64), 16u * 64 + (2 + 2) * 16 * 4);
}

TEST(MatmulDotsTest, SharedActivationsMustFitTheMatrix) {
  if (!IsaSupported(Isa::kAvx2)) GTEST_SKIP() << "host has no AVX2";
  std::vector<uint8_t> bytes(34 * 16);  // 2 rows of 8 Q8_0 blocks
  auto w = QuantMatrix::Make(GgmlType::kQ8_0, 2, 256, bytes, "w");
  ASSERT_TRUE(w.ok());
  std::vector<float> x(256, 0.5f), y(2);
  QuantizedActivations k_format;
  QuantizeActivations(GgmlType::kQ8_K, x.data(), 1, 256, &k_format);
  auto s = MatmulQuantized(*w, 0, 2, k_format, y.data(), 2, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("q8_K"));
  QuantizedActivations ok;
  QuantizeActivations(ActivationFormat(GgmlType::kQ8_0), x.data(), 1, 256, &ok);
  EXPECT_EQ(ActivationFormat(GgmlType::kQ8_0), GgmlType::kQ8_0);
  EXPECT_FALSE(MatmulQuantized(*w, 0, 3, ok, y.data(), 3, nullptr).ok());
  EXPECT_TRUE(MatmulQuantized(*w, 0, 2, ok, y.data(), 2, nullptr).ok());
}

}  // namespace
}  // namespace tessera::cpu
