// The GPU traffic model (bench/gpu_traffic.h) against figures worked out by hand from its
// stated access patterns, and its reading of a generated model's shapes against the file's
// own tensor sizes.
#include "bench/gpu_traffic.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/gguf/split.h"
#include "common/model/synthetic.h"
#include "gtest/gtest.h"

namespace tessera::bench {
namespace {

TrafficShape Small() {
  TrafficShape s;
  s.dense_bytes = 100;
  s.dense_elements = 50;
  s.expert_bytes = 800;  // 8 experts of 100 bytes
  s.head_bytes = 30;
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.kv_row_bytes = 10;
  s.vocab = 100;
  return s;
}

TEST(GpuTraffic, DecodeFiguresWorkedOutByHand) {
  const StepTraffic t = DecodeTraffic(Small(), /*batch=*/9, /*context=*/5, Kernels::kBefore);
  // GEMV passes of up to 8 tokens: 9 tokens read every weight twice.
  EXPECT_DOUBLE_EQ(t.dense.current, 200);
  EXPECT_DOUBLE_EQ(t.dense.ideal, 100);
  // 9 tokens x 2 choices x 100 bytes; ideal: 8 (1 - 0.75^9) distinct experts of 100 bytes.
  EXPECT_DOUBLE_EQ(t.experts.current, 1800);
  EXPECT_NEAR(t.experts.ideal, 800 * (1 - std::pow(0.75, 9)), 1e-9);
  // 2 layers x 9 queries x 5 keys x 10 bytes, per query head (4) vs per KV head (2).
  EXPECT_DOUBLE_EQ(t.attention.current, 3600);
  EXPECT_DOUBLE_EQ(t.attention.ideal, 1800);
  EXPECT_DOUBLE_EQ(t.head.current, 60);
  EXPECT_DOUBLE_EQ(t.head.ideal, 30);
  EXPECT_DOUBLE_EQ(t.logits.current, 9 * 100 * 4);
  EXPECT_DOUBLE_EQ(t.logits.ideal, 9 * 8);
}

TEST(GpuTraffic, PrefillFiguresWorkedOutByHand) {
  TrafficShape s = Small();
  StepTraffic t = PrefillTraffic(s, 3, Kernels::kBefore);
  EXPECT_DOUBLE_EQ(t.dense.current, 100);  // one GEMV pass
  EXPECT_DOUBLE_EQ(t.experts.current, 600);
  EXPECT_NEAR(t.experts.ideal, 800 * (1 - std::pow(0.75, 3)), 1e-9);
  // Keys 1 + 2 + 3 per query head; ideal: one tile reading 3 keys per KV head.
  EXPECT_DOUBLE_EQ(t.attention.current, 2 * 10 * 6 * 4);
  EXPECT_DOUBLE_EQ(t.attention.ideal, 2 * 10 * 3 * 2);
  EXPECT_DOUBLE_EQ(t.head.current, 30);
  EXPECT_DOUBLE_EQ(t.logits.current, 400);

  t = PrefillTraffic(s, 100, Kernels::kBefore);
  // Above 64 tokens: the matrix, plus its 16-bit copy written and read (50 elements).
  EXPECT_DOUBLE_EQ(t.dense.current, 100 + 4 * 50);
  EXPECT_DOUBLE_EQ(t.attention.current, 2 * 10 * (100 * 101 / 2) * 4);
  EXPECT_DOUBLE_EQ(t.attention.ideal, 2 * 10 * (64 + 100) * 2);  // tiles ending at 64, 100

  s.dsa_top_k = 2;  // each query reads at most 2 selected keys: 1 + 2 + 2
  t = PrefillTraffic(s, 3, Kernels::kBefore);
  EXPECT_DOUBLE_EQ(t.attention.current, 2 * 10 * 5 * 4);
  EXPECT_DOUBLE_EQ(t.attention.ideal, 2 * 10 * 5 * 2);
  EXPECT_DOUBLE_EQ(DecodeTraffic(s, 1, 50, Kernels::kBefore).attention.current, 2 * 1 * 2 * 10 * 4);
}

// Today's kernels: GEMV passes of 64 tokens, grouped products sorted by member from two
// choices per member on average, each member read once per 32 of its choices.
TEST(GpuTraffic, CurrentKernelsWorkedOutByHand) {
  TrafficShape s = Small();
  // 9 tokens: one GEMV pass; 18 choices over 8 experts (≥ 16): sorted, each of the
  // 8 (1 − 0.75^9) expected distinct experts read ceil(18 / distinct / 32) = 1 time.
  StepTraffic t = DecodeTraffic(s, 9, 5, Kernels::kNow);
  EXPECT_DOUBLE_EQ(t.dense.current, 100);
  EXPECT_DOUBLE_EQ(t.head.current, 30);
  EXPECT_NEAR(t.experts.current, 800 * (1 - std::pow(0.75, 9)), 1e-9);
  EXPECT_DOUBLE_EQ(t.experts.current, t.experts.ideal);
  EXPECT_DOUBLE_EQ(t.logits.current, 9 * 8);  // sampled on the device: id and log-probability
  // 7 tokens: 14 choices < 16, per choice as before.
  EXPECT_DOUBLE_EQ(DecodeTraffic(s, 7, 5, Kernels::kNow).experts.current, 1400);
  // 65 tokens: two GEMV passes; 130 choices over ~8 distinct experts: 17 each, one pass.
  t = DecodeTraffic(s, 65, 5, Kernels::kNow);
  EXPECT_DOUBLE_EQ(t.dense.current, 200);
  EXPECT_NEAR(t.experts.current, 800 * (1 - std::pow(0.75, 65)), 1e-9);
  // A prompt of 1,000 tokens: 2,000 choices, ~250 per expert: 2 tensor-core tiles of 128.
  t = PrefillTraffic(s, 1000, Kernels::kNow);
  EXPECT_NEAR(t.experts.current, 2 * 800 * (1 - std::pow(0.75, 1000)), 1e-6);
  // 40 tokens (GEMV): 80 choices, ~10 per expert: one pass of 32; 65 tokens (tiles): 130
  // choices, ~16 per expert: one tile.
  EXPECT_NEAR(PrefillTraffic(s, 40, Kernels::kNow).experts.current, 800 * (1 - std::pow(0.75, 40)),
              1e-9);
  EXPECT_NEAR(PrefillTraffic(s, 65, Kernels::kNow).experts.current, 800 * (1 - std::pow(0.75, 65)),
              1e-9);
  EXPECT_DOUBLE_EQ(PrefillTraffic(s, 1000, Kernels::kBefore).experts.current, 2000 * 100);
  // MLA's per-head products (40 of the 100 dense bytes, 4 heads of 10): per token before;
  // sorted now (9 tokens per head: one pass), the other 60 bytes in one GEMV pass.
  s.head_product_bytes = 40;
  EXPECT_DOUBLE_EQ(DecodeTraffic(s, 9, 5, Kernels::kBefore).dense.current, 2 * 60 + 9 * 40);
  EXPECT_DOUBLE_EQ(DecodeTraffic(s, 9, 5, Kernels::kNow).dense.current, 60 + 40);
  EXPECT_DOUBLE_EQ(DecodeTraffic(s, 1, 5, Kernels::kNow).dense.current, 100);
  // A prompt of 100: the GEMM path for the 60 (plus the 16-bit copy of 50 elements), the
  // per-head products in ceil(100 / 32) = 4 passes.
  EXPECT_DOUBLE_EQ(PrefillTraffic(s, 100, Kernels::kNow).dense.current, 60 + 4 * 50 + 4 * 40);
}

// Tiled prefill attention: above 64 tokens, per query head and tile of 16 queries, the keys
// the tile's last query sees: tiles ending at 16, 32, ..., 96, 100 read 436 keys.
TEST(GpuTraffic, TiledAttentionWorkedOutByHand) {
  TrafficShape s = Small();
  StepTraffic t = PrefillTraffic(s, 100, Kernels::kNow);
  EXPECT_DOUBLE_EQ(t.attention.current, 2 * 10 * 436 * 4);
  EXPECT_DOUBLE_EQ(t.attention.ideal, 2 * 10 * (64 + 100) * 2);
  // 64 tokens: per query (1 + ... + 64 keys), once per KV head (the decode kernel's blocks).
  EXPECT_DOUBLE_EQ(PrefillTraffic(s, 64, Kernels::kNow).attention.current, 2 * 10 * 2080 * 2);
  EXPECT_DOUBLE_EQ(PrefillTraffic(s, 64, Kernels::kBefore).attention.current, 2 * 10 * 2080 * 4);
  // DSA: within the top-k every visible key is selected and tiles apply; beyond it each
  // query reads its own selection (at most 80 keys).
  s.dsa_top_k = 200;
  EXPECT_DOUBLE_EQ(PrefillTraffic(s, 100, Kernels::kNow).attention.current, 2 * 10 * 436 * 4);
  s.dsa_top_k = 80;
  const double selected = 80 * 81 / 2 + 20 * 80;
  t = PrefillTraffic(s, 100, Kernels::kNow);
  EXPECT_DOUBLE_EQ(t.attention.current, 2 * 10 * selected * 2);  // per query, per KV head
  EXPECT_DOUBLE_EQ(t.attention.ideal, 2 * 10 * selected * 2);
  // GQA on tensor cores: rows of (query, head) per KV head in tiles of 32. 2 heads per KV head:
  // 16 queries a tile, the same tiles' 436 keys, once per KV head (2) instead of per head (4).
  s.dsa_top_k = 0;
  s.mma_attention = true;
  t = PrefillTraffic(s, 100, Kernels::kNow);
  EXPECT_DOUBLE_EQ(t.attention.current, 2 * 10 * 436 * 2);
  // 40 heads over 2 KV heads: 20 rows a query, tiles of 32 rows end in queries 2, 4, 5, 7, 8,
  // ..., i.e. row 32j − 1 in query ⌊(32j − 1) / 20⌋ + 1, the last at 100: 62.5 tiles → 63.
  s.heads = 40;
  double keys = 0;
  for (int j = 1; j <= 63; ++j) {
    const int end = std::min(32 * j, 2000);  // rows before the tile's end: ⌈end / 20⌉ queries
    keys += end / 20 + (end % 20 != 0);
  }
  t = PrefillTraffic(s, 100, Kernels::kNow);
  EXPECT_DOUBLE_EQ(t.attention.current, 2 * 10 * keys * 2);
  EXPECT_DOUBLE_EQ(PrefillTraffic(s, 64, Kernels::kNow).attention.current,  // not above 64
                   2 * 10 * 2080 * 2 * 2);
  s.heads = 4;
  s.mma_attention = false;
  s.dsa_top_k = 80;
  // Decode: per KV head; 40 heads over 2 KV heads read each one twice (blocks of 16 heads).
  EXPECT_DOUBLE_EQ(DecodeTraffic(s, 3, 50, Kernels::kNow).attention.current, 2 * 3 * 50 * 10 * 2);
  s.heads = 40;
  EXPECT_DOUBLE_EQ(DecodeTraffic(s, 3, 50, Kernels::kNow).attention.current,
                   2 * 3 * 50 * 10 * 2 * 2);
}

// The shapes read from a generated MoE + MLA model: the routed experts, the head and the
// rest add up to every trunk matrix of the file; the latent cache row is c + rope dims.
TEST(GpuTraffic, ReadsTheShapesOfAModelFile) {
  model::SyntheticOptions o;
  o.arch = "deepseek2";
  o.quant = "Q8_0";
  o.seed = 3;
  auto w = model::BuildSyntheticModel(o);
  ASSERT_TRUE(w.ok()) << w.status();
  const std::string path = absl::StrCat(::testing::TempDir(), "/traffic-deepseek2.gguf");
  ASSERT_TRUE(w->WriteFile(path).ok());
  auto s = TrafficShapeOf(path);
  ASSERT_TRUE(s.ok()) << s.status();
  auto file = gguf::GgufModel::Open(path);
  ASSERT_TRUE(file.ok());
  double matrices = 0, experts = 0, head = 0;
  int64_t vocab = 0;
  for (const gguf::TensorInfo& t : file->tensors()) {
    if (t.name == "output.weight") {
      head = static_cast<double>(t.n_bytes);
      vocab = t.dims[1];
    }
    if (t.name.rfind("blk.", 0) != 0 || t.dims.size() < 2) continue;
    matrices += static_cast<double>(t.n_bytes);
    if (t.name.find("_exps") != std::string::npos) experts += static_cast<double>(t.n_bytes);
  }
  EXPECT_GT(experts, 0);
  EXPECT_DOUBLE_EQ(s->expert_bytes, experts);
  EXPECT_DOUBLE_EQ(s->dense_bytes + s->expert_bytes, matrices);
  EXPECT_DOUBLE_EQ(s->head_bytes, head);
  auto hp = model::SyntheticHyperParams(o);
  ASSERT_TRUE(hp.ok()) << hp.status();
  EXPECT_EQ(s->n_expert, hp->n_expert);
  EXPECT_EQ(s->n_expert_used, hp->n_expert_used);
  EXPECT_EQ(s->layers, hp->n_layer);
  EXPECT_EQ(s->heads, hp->n_head[0]);
  EXPECT_EQ(s->kv_heads, 1);  // MLA: one latent
  EXPECT_EQ(s->kv_row_bytes, 2 * (hp->kv_lora_rank + hp->n_rot));
  EXPECT_EQ(s->mma_attention,  // on an H100
            (hp->kv_lora_rank + hp->n_rot) % 16 == 0 && hp->kv_lora_rank % 16 == 0)
      << hp->kv_lora_rank << " + " << hp->n_rot;
  EXPECT_EQ(s->vocab, vocab);
  EXPECT_GT(s->head_product_bytes, 0);  // attn_k_b and attn_v_b
  EXPECT_LT(s->head_product_bytes, s->dense_bytes);
  EXPECT_FALSE(TrafficTable(*s, 128).empty());
  EXPECT_FALSE(TrafficShapeOf(path + ".missing").ok());
}

}  // namespace
}  // namespace tessera::bench
