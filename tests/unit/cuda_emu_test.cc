// The CUDA emulator's kernels (kernels/cuda/emu/emu_kernels.cc) against hand-derived values:
// each kernel's contract in kernels/cuda/*.h on inputs small enough to work out on paper,
// its edge cases (ids out of range, skipped slots, queries without keys, ties, NaN), the
// dtype rounding (round to nearest even), the argument checks, and graph capture: a captured
// launch computes nothing until replayed, and then reads the buffers as they are at replay.
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/quant/blocks.h"
#include "common/util/half.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/emu/emu_runtime.h"
#include "kernels/cuda/glue_kernels.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/nn_kernels.h"
#include "kernels/cuda/selection_kernels.h"

namespace tessera::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// Device memory is host memory in the emulator, and the default stream runs work at once.
constexpr cudaStream_t kStream = nullptr;

DeviceMatrix F32Matrix(const std::vector<float>& w, int64_t rows, int64_t cols) {
  return {.type = gguf::GgmlType::kF32,
          .rows = rows,
          .cols = cols,
          .row_bytes = static_cast<size_t>(cols) * 4,
          .data = w.data()};
}

TEST(CudaEmuTest, ListsOneEmulatedDevice) {
  const std::vector<DeviceInfo> devices = ListDevices();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].index, 0);
  EXPECT_EQ(devices[0].name, "CUDA emulator (CPU)");
  EXPECT_EQ(devices[0].compute_major, 9);
  EXPECT_EQ(devices[0].total_memory, emu::kEmulatedDeviceBytes);
  std::vector<float> y = {1, 2};
  ASSERT_TRUE(Saxpy(0, 2.0f, {10, 20}, y).ok());
  EXPECT_THAT(y, ElementsAre(21.0f, 42.0f));
}

TEST(CudaEmuTest, GemvF32AndBatch) {
  // W = [[1, 2, 3], [-1, 0, 4]]; x0 = (1, 1, 1), x1 = (2, 0, -1).
  const std::vector<float> w = {1, 2, 3, -1, 0, 4};
  const std::vector<float> x = {1, 1, 1, 2, 0, -1};
  std::vector<float> y(4, -7.0f);
  ASSERT_TRUE(Gemv(F32Matrix(w, 2, 3), x.data(), DType::kF32, 2, y.data(), kStream).ok());
  EXPECT_THAT(y, ElementsAre(6.0f, 3.0f, -1.0f, -6.0f));  // y[b·rows + r]
}

TEST(CudaEmuTest, GemvDecodesQ8_0) {
  // One Q8_0 block: d = 0.5, q_i = i − 16, so W·1 = 0.5 · Σ(i − 16) = 0.5 · (496 − 512) = −8.
  quant::BlockQ8_0 block;
  block.d = FloatToFp16(0.5f);
  for (int i = 0; i < quant::kQK; ++i) block.qs[i] = static_cast<int8_t>(i - 16);
  const DeviceMatrix w{.type = gguf::GgmlType::kQ8_0,
                       .rows = 1,
                       .cols = quant::kQK,
                       .row_bytes = sizeof block,
                       .data = &block};
  const std::vector<float> x(quant::kQK, 1.0f);
  float y = 0.0f;
  ASSERT_TRUE(Gemv(w, x.data(), DType::kF32, 1, &y, kStream).ok());
  EXPECT_EQ(y, -8.0f);
  // Dequantize: element 31 is 0.5 · 15, in bf16 exactly.
  std::vector<uint16_t> d(quant::kQK);
  ASSERT_TRUE(
      Dequantize(gguf::GgmlType::kQ8_0, &block, quant::kQK, DType::kBF16, d.data(), kStream).ok());
  EXPECT_EQ(Bf16ToFloat(d[31]), 7.5f);
  EXPECT_EQ(Bf16ToFloat(d[0]), -8.0f);
}

TEST(CudaEmuTest, ShapeErrorsAreTheLaunchersOwn) {
  quant::BlockQ8_0 block{};
  const DeviceMatrix w{.type = gguf::GgmlType::kQ8_0,
                       .rows = 1,
                       .cols = 33,
                       .row_bytes = sizeof block,
                       .data = &block};
  float x[33] = {}, y = 0;
  const absl::Status s = Gemv(w, x, DType::kF32, 1, &y, kStream);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s, GemvLaunch(w.type, 1, 33, 1).status());
  EXPECT_THAT(std::string(s.message()), HasSubstr("not a multiple of its block (32)"));
  const DeviceMatrix bad_bytes{
      .type = gguf::GgmlType::kQ8_0, .rows = 1, .cols = 32, .row_bytes = 33, .data = &block};
  EXPECT_EQ(Gemv(bad_bytes, x, DType::kF32, 1, &y, kStream),
            CheckRowBytes(gguf::GgmlType::kQ8_0, 32, 33, "gemv"));
  EXPECT_EQ(GemmTiles(bad_bytes, x, DType::kF32, 1, &y, kStream).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RmsNorm(x, nullptr, 0, 4, 1e-5f, DType::kF32, x, kStream).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CudaEmuTest, GemmRoundsWeightsToTheActivationTypeGemvDoesNot) {
  // W = 3 × (1 + 2^-11), x = (1, 1, 1) in f16. Gemv keeps the weights in float: 3 + 3·2^-11,
  // which f16 (spacing 2^-9 at 3) rounds up to 3 + 2^-9. The GEMMs round each weight to f16
  // first (1 + 2^-11 is a tie between 1 and 1 + 2^-10: even, 1), so the product is exactly 3.
  const float wv = 1.0f + std::ldexp(1.0f, -11);
  const std::vector<float> w = {wv, wv, wv};
  const std::vector<uint16_t> x(3, FloatToFp16(1.0f));
  uint16_t y_gemv = 0, y_gemm = 0, y_tiles = 0;
  std::vector<uint8_t> scratch(64);
  ASSERT_TRUE(Gemv(F32Matrix(w, 1, 3), x.data(), DType::kF16, 1, &y_gemv, kStream).ok());
  ASSERT_TRUE(GemmDequantized(nullptr, F32Matrix(w, 1, 3), x.data(), DType::kF16, 1, &y_gemm,
                              scratch.data(), scratch.size(), kStream)
                  .ok());
  ASSERT_TRUE(GemmTiles(F32Matrix(w, 1, 3), x.data(), DType::kF16, 1, &y_tiles, kStream).ok());
  EXPECT_EQ(Fp16ToFloat(y_gemv), 3.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(Fp16ToFloat(y_gemm), 3.0f);
  EXPECT_EQ(Fp16ToFloat(y_tiles), 3.0f);
  EXPECT_EQ(GemmDequantized(nullptr, F32Matrix(w, 1, 3), x.data(), DType::kF16, 1, &y_gemm,
                            scratch.data(), 4, kStream)
                .code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(CudaEmuTest, GroupedGemvZerosForIdsOutOfRange) {
  // Two members of 1 × 2: M0 = [1, 2], M1 = [10, 20]; one token, three choices sharing x.
  const std::vector<float> stack = {1, 2, 10, 20};
  const std::vector<int32_t> ids = {1, 0, 2};
  const std::vector<float> x = {1, -1};
  std::vector<float> y(3, 99.0f);
  GroupedGemvArgs g{.w = F32Matrix(stack, 1, 2),
                    .member_bytes = 8,
                    .members = 2,
                    .ids = ids.data(),
                    .tokens = 1,
                    .used = 3,
                    .x = x.data(),
                    .y = y.data()};
  ASSERT_TRUE(GroupedGemv(g, DType::kF32, kStream).ok());
  EXPECT_THAT(y, ElementsAre(-10.0f, -1.0f, 0.0f));
  // MoE combine of those three outputs with weights (0.5, 2, 7): −5 − 2 + 0.
  const std::vector<float> weights = {0.5f, 2.0f, 7.0f};
  float out = 0;
  ASSERT_TRUE(MoeCombine(y.data(), weights.data(), 1, 3, 1, DType::kF32, &out, kStream).ok());
  EXPECT_EQ(out, -7.0f);
}

TEST(CudaEmuTest, RoundsToNearestEven) {
  // f16 near 1 has spacing 2^-10: 1 + 2^-11 ties to 1 (even), 1 + 3·2^-11 ties to 1 + 2^-9.
  std::vector<uint16_t> y = {FloatToFp16(1.0f), FloatToFp16(1.0f)};
  const std::vector<float> bias = {std::ldexp(1.0f, -11), 3 * std::ldexp(1.0f, -11)};
  ASSERT_TRUE(AddBias(y.data(), bias.data(), 1, 2, DType::kF16, kStream).ok());
  EXPECT_EQ(Fp16ToFloat(y[0]), 1.0f);
  EXPECT_EQ(Fp16ToFloat(y[1]), 1.0f + std::ldexp(1.0f, -9));
  // bf16 near 1 has spacing 2^-7; 65520 overflows f16 to infinity.
  const std::vector<float> src = {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8),
                                  65520.0f};
  std::vector<uint16_t> bf(3), h(3);
  ASSERT_TRUE(Convert(src.data(), DType::kF32, bf.data(), DType::kBF16, 3, kStream).ok());
  ASSERT_TRUE(Convert(src.data(), DType::kF32, h.data(), DType::kF16, 3, kStream).ok());
  EXPECT_EQ(Bf16ToFloat(bf[0]), 1.0f);
  EXPECT_EQ(Bf16ToFloat(bf[1]), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isinf(Fp16ToFloat(h[2])));
  EXPECT_EQ(
      Convert(src.data(), DType::kF32, const_cast<float*>(src.data()) + 1, DType::kBF16, 2, kStream)
          .code(),
      absl::StatusCode::kInvalidArgument);  // overlap
}

TEST(CudaEmuTest, NormsSoftmaxSiluRope) {
  // RMSNorm of (3, 4): mean square 12.5.
  std::vector<float> x = {3, 4};
  const std::vector<float> w = {1, 2};
  std::vector<float> y(2);
  ASSERT_TRUE(RmsNorm(x.data(), w.data(), 1, 2, 0.0f, DType::kF32, y.data(), kStream).ok());
  EXPECT_NEAR(y[0], 3 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(y[1], 8 / std::sqrt(12.5), 1e-6);
  // LayerNorm of (1, 2, 3): mean 2, biased variance 2/3, bias 1.
  const std::vector<float> ln = {1, 2, 3}, b = {1, 1, 1};
  std::vector<float> lo(3);
  ASSERT_TRUE(LayerNormF32(ln.data(), nullptr, b.data(), 1, 3, 0.0f, lo.data(), kStream).ok());
  EXPECT_NEAR(lo[0], 1 - 1 / std::sqrt(2.0 / 3), 1e-6);
  EXPECT_NEAR(lo[1], 1.0, 1e-6);
  // Softmax of (0, ln 3): (1/4, 3/4).
  std::vector<float> s = {0.0f, std::log(3.0f)};
  ASSERT_TRUE(Softmax(s.data(), 1, 2, DType::kF32, kStream).ok());
  EXPECT_NEAR(s[0], 0.25, 1e-6);
  EXPECT_NEAR(s[1], 0.75, 1e-6);
  // silu(1) · 2 = 2 / (1 + e^-1).
  const std::vector<float> gate = {0, 1}, up = {5, 2};
  std::vector<float> o(2);
  ASSERT_TRUE(SiluMul(gate.data(), up.data(), 2, DType::kF32, o.data(), kStream).ok());
  EXPECT_EQ(o[0], 0.0f);
  EXPECT_NEAR(o[1], 2 / (1 + std::exp(-1.0)), 1e-6);
  // RoPE at position 1 with θ scale π/2 (a quarter turn) and magnitude 2, head_dim 4, n_rot 2:
  // NORM rotates (x0, x1) = (1, 2) to 2·(−2, 1); NEOX pairs (x0, x1) with n_rot 2 the same way;
  // components ≥ n_rot pass through.
  const int32_t pos = 1;
  const double scale = M_PI / 2;
  for (bool neox : {false, true}) {
    std::vector<float> head = {1, 2, 7, 8};
    RopeArgs r{.tokens = 1,
               .heads = 1,
               .head_dim = 4,
               .token_stride = 4,
               .n_rot = 2,
               .neox = neox,
               .magnitude = 2.0f,
               .positions = &pos,
               .theta_scales = &scale};
    ASSERT_TRUE(Rope(r, DType::kF32, head.data(), kStream).ok());
    EXPECT_NEAR(head[0], -4.0, 1e-6);
    EXPECT_NEAR(head[1], 2.0, 1e-6);
    EXPECT_EQ(head[2], 7.0f);
    EXPECT_EQ(head[3], 8.0f);
  }
}

TEST(CudaEmuTest, PagedAttentionAndKvWrites) {
  // One block of 2 tokens, 1 KV head of width 2, written through the slot mapping (token 1's
  // slot −1 is padding: skipped).
  std::vector<float> cache(4, 0.0f);
  const std::vector<float> keys = {0, 0, 9, 9, std::log(3.0f), 0};
  const std::vector<int64_t> slots = {0, -1, 1};
  KvWriteArgs kw{.tokens = 3,
                 .kv_heads = 1,
                 .width = 2,
                 .block_size = 2,
                 .src = keys.data(),
                 .src_token_stride = 2,
                 .cache = cache.data(),
                 .block_stride = 4,
                 .token_stride = 2,
                 .head_stride = 2,
                 .slot_mapping = slots.data()};
  ASSERT_TRUE(WriteKvCache(kw, DType::kF32, kStream).ok());
  EXPECT_THAT(cache, ElementsAre(0.0f, 0.0f, std::log(3.0f), 0.0f));
  // Values v0 = (4, 0), v1 = (0, 8). Query (1, 0), scale 1: scores (0, ln 3), weights
  // (1/4, 3/4), output (1, 6). Query 2 sees no key: zeros.
  const std::vector<float> values = {4, 0, 0, 8};
  const std::vector<float> q = {1, 0, 1, 0};
  std::vector<float> out(4, 99.0f);
  const std::vector<int32_t> table = {0}, seq = {0, 0}, len = {2, 0};
  PagedAttentionArgs a;
  a.queries = 2;
  a.heads = 1;
  a.kv_heads = 1;
  a.d_k = 2;
  a.d_v = 2;
  a.block_size = 2;
  a.scale = 1.0f;
  a.q = q.data();
  a.q_token_stride = 2;
  a.out = out.data();
  a.out_token_stride = 2;
  a.k = {cache.data(), 4, 2, 2};
  a.v = {values.data(), 4, 2, 2};
  a.block_table = table.data();
  a.max_blocks = 1;
  a.query_seq = seq.data();
  a.query_kv_len = len.data();
  ASSERT_TRUE(PagedAttention(a, DType::kF32, kStream).ok());
  EXPECT_NEAR(out[0], 1.0, 1e-5);
  EXPECT_NEAR(out[1], 6.0, 1e-5);
  EXPECT_THAT(std::vector<float>(out.begin() + 2, out.end()), ElementsAre(0.0f, 0.0f));
  // A selection of key 1 only (and −1, unused): the output is v1.
  const std::vector<int32_t> selected = {1, -1, 0, -1};
  a.selected = selected.data();
  a.selected_per_query = 2;
  ASSERT_TRUE(PagedAttention(a, DType::kF32, kStream).ok());
  EXPECT_NEAR(out[0], 0.0, 1e-6);
  EXPECT_NEAR(out[1], 8.0, 1e-6);
  a.selected_per_query = 0;
  EXPECT_EQ(PagedAttention(a, DType::kF32, kStream).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaEmuTest, IndexerScores) {
  // Heads q0 = (1, 0), q1 = (0, 1) with weights (1, 2); key (3, −1): 1·3 + 2·ReLU(−1) = 3.
  const std::vector<float> q = {1, 0, 0, 1}, weights = {1, 2}, keys = {3, -1};
  const std::vector<int32_t> table = {0}, seq = {0}, len = {1};
  std::vector<float> scores(2, 5.0f);
  IndexerScoreArgs s{.queries = 1,
                     .heads = 2,
                     .dim = 2,
                     .n_keys = 2,
                     .block_size = 2,
                     .q = q.data(),
                     .weights = weights.data(),
                     .keys = {keys.data(), 4, 2, 0},
                     .block_table = table.data(),
                     .max_blocks = 1,
                     .query_seq = seq.data(),
                     .query_kv_len = len.data(),
                     .scores = scores.data()};
  ASSERT_TRUE(IndexerScores(s, kStream).ok());
  EXPECT_EQ(scores[0], 3.0f);
  EXPECT_EQ(scores[1], -INFINITY);
}

TEST(CudaEmuTest, TopKTiesNaNAndLengths) {
  // Row 0: (1, 3, 3, NaN, 2); NaN ranks lowest. Row 1: ties at the cut go to lower indices,
  // −0 equals +0. Row 2: length 1 leaves the other slots −1.
  const std::vector<float> scores = {1,    3, 3,     NAN, 2,  //
                                     0.0f, 5, -0.0f, 5,   0.0f, 1, 0, 0, 0, 0};
  const std::vector<int32_t> lengths = {5, 5, 1};
  std::vector<int32_t> out(9, 42);
  ASSERT_TRUE(TopK(scores.data(), 3, 5, 3, lengths.data(), out.data(), kStream).ok());
  EXPECT_THAT(out, ElementsAre(1, 2, 4,  // ascending indices of 3, 3, 2
                               0, 1, 3,  // 5, 5 and the first of the zeros
                               0, -1, -1));
  EXPECT_EQ(TopK(scores.data(), 1, 5, 0, nullptr, out.data(), kStream),
            TopKLaunch(1, 5, 0).status());
}

TEST(CudaEmuTest, MoeRouteSoftmaxAndGroups) {
  // Logits (0, 0, ln 2, ln 4): probabilities (1, 1, 2, 4)/8; k = 2 picks experts 3 and 2 with
  // weights 1/2, 1/4, normalized to 2/3, 1/3, then scaled by 3.
  const std::vector<float> logits = {0, 0, std::log(2.0f), std::log(4.0f)};
  std::vector<int32_t> ids(2);
  std::vector<float> weights(2);
  MoeRoutingArgs a{.tokens = 1,
                   .experts = 4,
                   .used = 2,
                   .norm_weights = true,
                   .weights_scale = 3.0f,
                   .logits = logits.data(),
                   .ids = ids.data(),
                   .weights = weights.data()};
  ASSERT_TRUE(MoeRoute(a, kStream).ok());
  EXPECT_THAT(ids, ElementsAre(3, 2));
  EXPECT_NEAR(weights[0], 2.0, 1e-6);
  EXPECT_NEAR(weights[1], 1.0, 1e-6);
  // Sigmoid with a bias that chooses but never weighs, in two groups of two, one kept: group 0
  // scores (σ(0) + 1) + σ(0) = 2, group 1 σ(0) + σ(0) = 1, so experts 0 and 1 are chosen
  // (0 first: the bias), with weights σ(0) = 1/2 each.
  const std::vector<float> zeros(4, 0.0f), bias = {1, 0, 0, 0};
  a.gating = MoeGating::kSigmoid;
  a.groups = 2;
  a.topk_groups = 1;
  a.norm_weights = false;
  a.weights_scale = 1.0f;
  a.logits = zeros.data();
  a.bias = bias.data();
  ASSERT_TRUE(MoeRoute(a, kStream).ok());
  EXPECT_THAT(ids, ElementsAre(0, 1));
  EXPECT_THAT(weights, ElementsAre(0.5f, 0.5f));
  a.used = 5;
  EXPECT_EQ(MoeRoute(a, kStream).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaEmuTest, Sampling) {
  // Greedy: NaN counts as −inf, ties to the lower id, +inf as the largest float.
  const std::vector<float> logits = {NAN, 2, 7,      7,      1,  //
                                     0,   0, -1e30f, -1e30f, -1e30f};
  std::vector<GpuSamplingParams> p(2);
  p[0].temperature = 0.0f;
  p[1].temperature = 1.0f;
  p[1].uniform = 0.49;  // weights (1, 1, ~0, ~0, ~0): the draw splits at one half
  std::vector<int32_t> tokens(2, -1);
  ASSERT_TRUE(Sample(logits.data(), 2, 5, p.data(), tokens.data(), kStream).ok());
  EXPECT_THAT(tokens, ElementsAre(2, 0));
  p[1].uniform = 0.51;
  ASSERT_TRUE(Sample(logits.data(), 2, 5, p.data(), tokens.data(), kStream).ok());
  EXPECT_EQ(tokens[1], 1);
  // top-k 1 keeps the best (lower id on ties) whatever the draw; so does top-p 0.
  p[0].temperature = 1.0f;
  p[0].top_k = 1;
  p[0].uniform = 0.99;
  p[1].top_p = 0.0f;
  ASSERT_TRUE(Sample(logits.data(), 2, 5, p.data(), tokens.data(), kStream).ok());
  EXPECT_THAT(tokens, ElementsAre(2, 0));
  // min-p 0.5 drops token 1 of (2, 7, 7): exp(2 − 7) < 0.5; the draw 0.99 lands on token 3.
  p[0].top_k = 0;
  p[0].min_p = 0.5f;
  ASSERT_TRUE(Sample(logits.data(), 2, 5, p.data(), tokens.data(), kStream).ok());
  EXPECT_EQ(tokens[0], 3);
}

TEST(CudaEmuTest, SelectionEdgeCases) {
  // Top-k: NaN ranks below −inf.
  const std::vector<float> scores = {-INFINITY, NAN, -1};
  std::vector<int32_t> top(2);
  ASSERT_TRUE(TopK(scores.data(), 1, 3, 2, nullptr, top.data(), kStream).ok());
  EXPECT_THAT(top, ElementsAre(0, 2));
  // Sampling: +inf counts as the largest float, so it ties with FLT_MAX (greedy: lower id;
  // at temperature 1 both weigh 1 and the draw 0.99 of a total of 2 lands on the second).
  const std::vector<float> logits = {INFINITY, FLT_MAX, 0};
  GpuSamplingParams p;
  p.temperature = 0.0f;
  int32_t token = -1;
  ASSERT_TRUE(Sample(logits.data(), 1, 3, &p, &token, kStream).ok());
  EXPECT_EQ(token, 0);
  p.temperature = 1.0f;
  p.uniform = 0.99;
  ASSERT_TRUE(Sample(logits.data(), 1, 3, &p, &token, kStream).ok());
  EXPECT_EQ(token, 1);
  // MoE routing of a NaN logit under softmax: every probability is NaN, no expert can be
  // chosen (the GPU kernel reads out of bounds there); the emulator answers −1 with weight 0.
  const std::vector<float> nan_logits = {NAN, 0, 0, 0};
  std::vector<int32_t> ids(2, 7);
  std::vector<float> weights(2, 7.0f);
  MoeRoutingArgs a{.tokens = 1,
                   .experts = 4,
                   .used = 2,
                   .logits = nan_logits.data(),
                   .ids = ids.data(),
                   .weights = weights.data()};
  ASSERT_TRUE(MoeRoute(a, kStream).ok());
  EXPECT_THAT(ids, ElementsAre(-1, -1));
  EXPECT_THAT(weights, ElementsAre(0.0f, 0.0f));
}

TEST(CudaEmuTest, RopeAnglesInDouble) {
  // Position 200000 at θ scale 1e-4: θ = 20 rad. Rounding θ through float would move it by
  // ~1e-6 rad, several float ulps of cos 20 ≈ 0.408.
  const int32_t pos = 200000;
  const double scale = 1e-4;
  std::vector<float> head = {1, 0};
  RopeArgs r{.tokens = 1,
             .heads = 1,
             .head_dim = 2,
             .token_stride = 2,
             .n_rot = 2,
             .positions = &pos,
             .theta_scales = &scale};
  ASSERT_TRUE(Rope(r, DType::kF32, head.data(), kStream).ok());
  EXPECT_EQ(head[0], static_cast<float>(std::cos(200000 * 1e-4)));
  EXPECT_EQ(head[1], static_cast<float>(std::sin(200000 * 1e-4)));
  r.n_rot = 3;
  EXPECT_EQ(Rope(r, DType::kF32, head.data(), kStream), RopeLaunch(1, 1, 2, 3).status());
}

TEST(CudaEmuTest, GatherAndCopyKernels) {
  // Embedding rows of a 2 × 2 f32 table into bf16; id 5 is out of range: zeros.
  const std::vector<float> table = {1, 2, 3, 4};
  const std::vector<int32_t> ids = {1, 5, 0};
  std::vector<uint16_t> rows(6, 0xFFFF);
  ASSERT_TRUE(
      GatherRows(F32Matrix(table, 2, 2), ids.data(), 3, DType::kBF16, rows.data(), kStream).ok());
  std::vector<float> got;
  for (uint16_t v : rows) got.push_back(Bf16ToFloat(v));
  EXPECT_THAT(got, ElementsAre(3.0f, 4.0f, 0.0f, 0.0f, 1.0f, 2.0f));
  // By index (−1: zeros), strided copies, scale, head ids.
  const std::vector<int32_t> index = {1, -1};
  std::vector<float> dst(4, 9.0f);
  ASSERT_TRUE(
      GatherRowsByIndex(table.data(), index.data(), 2, 2, DType::kF32, dst.data(), kStream).ok());
  EXPECT_THAT(dst, ElementsAre(3.0f, 4.0f, 0.0f, 0.0f));
  std::vector<float> copy(6, 0.0f);
  ASSERT_TRUE(CopyRows(table.data(), 2, copy.data(), 3, 2, 1, DType::kF32, kStream).ok());
  EXPECT_THAT(copy, ElementsAre(1.0f, 0.0f, 0.0f, 3.0f, 0.0f, 0.0f));
  EXPECT_EQ(CopyRows(table.data(), 1, copy.data(), 3, 2, 2, DType::kF32, kStream).code(),
            absl::StatusCode::kInvalidArgument);  // stride shorter than the row
  ASSERT_TRUE(Scale(copy.data(), 6, -2.0f, kStream).ok());
  EXPECT_EQ(copy[3], -6.0f);
  std::vector<int32_t> heads(6);
  ASSERT_TRUE(FillHeadIds(heads.data(), 2, 3, kStream).ok());
  EXPECT_THAT(heads, ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_TRUE(FillHeadIds(nullptr, 0, 3, kStream).ok());  // nothing to do, even with null
}

TEST(CudaEmuTest, CapturedLaunchesReadTheBuffersAtReplay) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  std::vector<float> y = {1, 1}, x = {10, 20};
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_TRUE(AddInPlace(y.data(), x.data(), 2, DType::kF32, stream).ok());
  // Errors still come back at call time while capturing.
  EXPECT_EQ(AddInPlace(y.data(), x.data(), -1, DType::kF32, stream).code(),
            absl::StatusCode::kInvalidArgument);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_THAT(y, ElementsAre(1.0f, 1.0f));  // captured, not run
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  x = {100, 200};  // same storage, new contents
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_THAT(y, ElementsAreArray({201.0f, 401.0f}));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace tessera::cuda
