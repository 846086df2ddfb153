#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>
#include <random>
#include <regex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/gguf/writer.h"
#include "common/model/synthetic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/isa.h"
#include "kernels/reference/model_ref.h"
#include "worker/executor/executor.h"

namespace tessera::executor {
namespace {

std::string Synthetic(const std::string& arch, const std::string& quant, int layers = -1) {
  model::SyntheticOptions o;
  o.arch = arch;
  o.quant = quant;
  o.layers = layers;
  o.seed = 11;
  auto w = model::BuildSyntheticModel(o);
  EXPECT_TRUE(w.ok()) << w.status();
  std::string path = absl::StrCat(::testing::TempDir(), "/exec-", arch, "-", quant, ".gguf");
  EXPECT_TRUE(w->WriteFile(path).ok());
  return path;
}

std::unique_ptr<Executor> Make(const std::string& path, ExecutorOptions o = {}) {
  if (o.kv_tokens == 0) o.kv_tokens = 256;
  auto ex = Executor::Create(path, o);
  EXPECT_TRUE(ex.ok()) << ex.status();
  return ex.ok() ? *std::move(ex) : nullptr;
}

ExecutorOptions Exact() {
  ExecutorOptions o;
  o.exact = true;
  return o;
}

std::vector<int32_t> Tokens(int n, int offset = 0) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (37 * i + 11 + offset) % 300;
  return t;
}

std::vector<int32_t> Iota(int n, int from = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

double MaxAbs(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

TEST(Executor, MatchesTheFloat64ForwardOnGeneratedModels) {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    for (const char* quant : {"F32", "Q8_0", "Q4_K_M"}) {
      SCOPED_TRACE(absl::StrCat(arch, " ", quant));
      std::string path = Synthetic(arch, quant);
      auto ex = Make(path, Exact());
      SequenceInput s;
      s.tokens = Tokens(24);
      s.all_logits = true;
      s.block_table = Iota(ex->n_blocks());
      auto got = ex->Step({&s, 1});
      ASSERT_TRUE(got.ok()) << got.status();
      auto want = reference::ForwardRef(ex->file(), s.tokens);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_EQ((*got)[0].size(), want->size());
      double max_diff = 0;
      for (size_t i = 0; i < want->size(); ++i) {
        max_diff = std::max(max_diff, std::fabs((*got)[0][i] - (*want)[i]));
      }
      EXPECT_LT(max_diff, 1e-3);
    }
  }
}

// Exact path vs the float64 reference on MoE / MLA / DSA models, with the same experts and
// (glm-dsa) the same kept keys at every layer and position.
TEST(Executor, RoutedArchitecturesMatchTheFloat64Forward) {
  for (const char* arch : {"qwen3moe", "glm4moe", "deepseek2", "glm-dsa"}) {
    for (const char* quant : {"F32", "Q8_0"}) {
      SCOPED_TRACE(absl::StrCat(arch, " ", quant));
      auto ex = Make(Synthetic(arch, quant), Exact());
      SequenceInput s;
      s.tokens = Tokens(24);  // longer than glm-dsa tiny's indexer top-k of 16
      s.all_logits = true;
      s.block_table = Iota(ex->n_blocks());
      StepTrace trace;
      auto got = ex->Step({&s, 1}, &trace);
      ASSERT_TRUE(got.ok()) << got.status();
      reference::RefTrace ref_trace;
      auto want = reference::ForwardRef(ex->file(), s.tokens, &ref_trace);
      ASSERT_TRUE(want.ok()) << want.status();
      double max_diff = 0;
      for (size_t i = 0; i < want->size(); ++i) {
        max_diff = std::max(max_diff, std::fabs((*got)[0][i] - (*want)[i]));
      }
      EXPECT_LT(max_diff, 1e-3);
      ASSERT_EQ(trace.experts.size(), ref_trace.experts.size());
      for (auto& [layer, tokens] : trace.experts) {
        for (size_t t = 0; t < tokens.size(); ++t) {
          std::vector<int32_t> e = tokens[t];
          std::sort(e.begin(), e.end());
          EXPECT_EQ(e, ref_trace.experts[layer][t]) << "layer " << layer << " token " << t;
        }
      }
      EXPECT_EQ(trace.dsa_keys, ref_trace.dsa_keys);
      if (std::string(arch) == "glm-dsa") {
        // The indexer really prunes: late queries see 16 of their 24 keys.
        ASSERT_FALSE(trace.dsa_keys.empty());
        EXPECT_EQ(trace.dsa_keys.begin()->second[23].size(), 16u);
        EXPECT_EQ(trace.dsa_keys.begin()->second[10].size(), 11u);
      }
    }
  }
}

TEST(Executor, SparseAttentionDiffersFromDense) {
  // The same glm-dsa weights with indexer.top_k raised above the prompt length attend
  // densely; the logits of positions beyond the top-k must move (spec 12.4).
  std::string sparse_path = Synthetic("glm-dsa", "F32");
  auto in = gguf::GgufModel::Open(sparse_path);
  ASSERT_TRUE(in.ok());
  gguf::GgufWriter w;
  w.metadata() = in->metadata();
  w.metadata().Set("glm-dsa.attention.indexer.top_k", gguf::Value::U32(4096));
  for (const auto& t : in->tensors())
    ASSERT_TRUE(w.AddTensor(t.name, t.dims, t.type, in->TensorData(t)).ok());
  std::string dense_path = ::testing::TempDir() + "/glm-dsa-dense.gguf";
  ASSERT_TRUE(w.WriteFile(dense_path).ok());
  auto run = [&](const std::string& path) {
    auto ex = Make(path, Exact());
    SequenceInput s;
    s.tokens = Tokens(24);
    s.all_logits = true;
    s.block_table = Iota(ex->n_blocks());
    return (*ex->Step({&s, 1}))[0];
  };
  std::vector<float> a = run(sparse_path), b = run(dense_path);
  const size_t V = a.size() / 24;
  double early = 0, late = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double diff = std::fabs(a[i] - b[i]);
    (i / V < 16 ? early : late) = std::max(i / V < 16 ? early : late, diff);
  }
  EXPECT_LT(early, 1e-4);  // at most top-k keys visible: identical
  EXPECT_GT(late, 1e-2);   // beyond: the indexer changed the attention
}

TEST(Executor, LegacyKvBFileEqualsSplitFile) {
  // Rewrite the deepseek2 tiny model in the pre-2025 form (spec 10.4): one attn_kv_b per
  // block built here from attn_k_b / attn_v_b, no *_mla keys, per-head key/value lengths.
  std::string split_path = Synthetic("deepseek2", "F32");
  auto in = gguf::GgufModel::Open(split_path);
  ASSERT_TRUE(in.ok());
  const int64_t H = 4, n = 64, v = 64, c = 256;
  gguf::GgufWriter w;
  w.metadata() = in->metadata();
  w.metadata().Erase("deepseek2.attention.key_length_mla");
  w.metadata().Erase("deepseek2.attention.value_length_mla");
  w.metadata().Set("deepseek2.attention.key_length", gguf::Value::U32(96));
  w.metadata().Set("deepseek2.attention.value_length", gguf::Value::U32(64));
  w.metadata().Set("deepseek2.attention.head_count_kv", gguf::Value::U32(4));
  for (const auto& t : in->tensors()) {
    if (t.name.find("attn_v_b") != std::string::npos) continue;
    if (t.name.find("attn_k_b") == std::string::npos) {
      ASSERT_TRUE(w.AddTensor(t.name, t.dims, t.type, in->TensorData(t)).ok());
      continue;
    }
    const float* kb = reinterpret_cast<const float*>(in->TensorData(t).data());
    const gguf::TensorInfo* vt =
        in->FindTensor(std::string(t.name).replace(t.name.find("attn_k_b"), 8, "attn_v_b"));
    const float* vb = reinterpret_cast<const float*>(in->TensorData(*vt).data());
    std::vector<float> kv(H * (n + v) * c);
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t j = 0; j < c; ++j) {
        for (int64_t i = 0; i < n; ++i) kv[(h * (n + v) + i) * c + j] = kb[(h * c + j) * n + i];
        for (int64_t e = 0; e < v; ++e) kv[(h * (n + v) + n + e) * c + j] = vb[(h * v + e) * c + j];
      }
    }
    std::string name = t.name;
    name.replace(name.find("attn_k_b"), 8, "attn_kv_b");
    ASSERT_TRUE(w.AddF32Tensor(name, {c, H * (n + v)}, kv).ok());
  }
  std::string legacy_path = ::testing::TempDir() + "/deepseek2-legacy.gguf";
  ASSERT_TRUE(w.WriteFile(legacy_path).ok());
  auto run = [&](const std::string& path) {
    auto ex = Make(path, Exact());
    SequenceInput s;
    s.tokens = Tokens(20);
    s.all_logits = true;
    s.block_table = Iota(ex->n_blocks());
    return (*ex->Step({&s, 1}))[0];
  };
  std::vector<float> legacy = run(legacy_path);
  EXPECT_LT(MaxAbs(legacy, run(split_path)), 1e-4);
  auto ref = reference::ForwardRef(*gguf::GgufModel::Open(legacy_path), Tokens(20));
  ASSERT_TRUE(ref.ok()) << ref.status();
  double max_diff = 0;
  for (size_t i = 0; i < ref->size(); ++i)
    max_diff = std::max(max_diff, std::fabs(legacy[i] - (*ref)[i]));
  EXPECT_LT(max_diff, 1e-3);
}

TEST(Executor, BatchedStepEqualsEachSequenceAlone) {
  std::string path = Synthetic("qwen2", "Q8_0");
  for (bool exact : {true, false}) {
    ExecutorOptions o;
    o.exact = exact;
    auto ex = Make(path, o);
    const int bs = ex->block_size();
    // Three sequences of different lengths; each owns its own blocks.
    std::vector<SequenceInput> seqs(3);
    int next_block = 0;
    for (int i = 0; i < 3; ++i) {
      seqs[i].tokens = Tokens(5 + 9 * i, i);
      seqs[i].all_logits = true;
      int blocks = (static_cast<int>(seqs[i].tokens.size()) + bs - 1) / bs;
      for (int b = 0; b < blocks; ++b) seqs[i].block_table.push_back(next_block++);
    }
    auto together = ex->Step(seqs);
    ASSERT_TRUE(together.ok()) << together.status();
    for (int i = 0; i < 3; ++i) {
      auto alone_ex = Make(path, o);
      auto alone = alone_ex->Step({&seqs[i], 1});
      ASSERT_TRUE(alone.ok());
      const auto& a = (*together)[i];
      const auto& b = (*alone)[0];
      if (exact) {
        EXPECT_LT(MaxAbs(a, b), 1e-4) << "sequence " << i;
      } else {
        // The fast path picks integer kernels for small batches and float ones for large,
        // so a sequence's logits move within the activation-quantization noise.
        EXPECT_LT(MaxAbs(a, b), 0.5) << "sequence " << i;
        const int64_t V = static_cast<int64_t>(a.size() / seqs[i].tokens.size());
        for (size_t r = 0; r < seqs[i].tokens.size(); ++r) {
          auto ra = a.begin() + r * V, rb = b.begin() + r * V;
          EXPECT_EQ(std::max_element(ra, ra + V) - ra, std::max_element(rb, rb + V) - rb);
        }
      }
    }
  }
}

// On the fast path a prompt's rows get the same bits wherever its chunks fall (batch
// invariance: the scheduler cuts prompts by what else the step holds): one chunk of 13
// tokens against chunks of 5, 1, 6 and 1, the one-token ones marked `prefill`; then a decode
// step after each, equal too. Float and integer weights; GQA, MLA and DSA attention, dense
// and routed feed-forwards; on every instruction set (TESSERA_ISA=avx2 runs the others). A
// one-token chunk without the mark is computed as a decode.
TEST(Executor, PromptChunksGiveTheBitsOfOneChunkOnTheFastPath) {
  for (const auto& [arch, quant] : {std::pair<std::string, std::string>{"llama", "F32"},
                                    {"llama", "Q8_0"},
                                    {"deepseek2", "F32"},
                                    {"glm-dsa", "Q8_0"},
                                    {"qwen2", "F16"},
                                    {"qwen3moe", "Q8_0"}}) {
    SCOPED_TRACE(arch + " " + quant);
    ExecutorOptions o;
    o.threads = 2;
    const std::string path = Synthetic(arch, quant);
    const std::vector<int32_t> prompt = Tokens(13, 3);
    auto run = [&](const std::vector<int>& cuts) {
      auto ex = Make(path, o);
      SequenceInput s;
      s.block_table = Iota(ex->n_blocks());
      std::vector<float> last;
      int begin = 0;
      for (int n : cuts) {
        s.tokens.assign(prompt.begin() + begin, prompt.begin() + begin + n);
        s.start_pos = begin;
        s.prefill = n == 1;
        auto l = ex->Step({&s, 1});
        EXPECT_TRUE(l.ok()) << l.status();
        if (l.ok()) last = (*l)[0];
        begin += n;
      }
      EXPECT_EQ(begin, 13);
      s.tokens = {42};
      s.start_pos = 13;
      s.prefill = false;
      auto decode = ex->Step({&s, 1});
      EXPECT_TRUE(decode.ok()) << decode.status();
      if (decode.ok()) last.insert(last.end(), (*decode)[0].begin(), (*decode)[0].end());
      return last;
    };
    const std::vector<float> whole = run({13}), cut = run({5, 1, 6, 1});
    ASSERT_EQ(whole.size(), cut.size());
    for (size_t i = 0; i < whole.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(whole[i]), std::bit_cast<uint32_t>(cut[i]))
          << (i < whole.size() / 2 ? "prompt" : "decode") << " logit " << i % (whole.size() / 2);
    }
  }
}

// SequenceInput::all_hidden: Step's hidden holds every new token's final-norm state (what an
// MTP block pairs with the next token over a prompt) with the logits of the last row only;
// the rows equal those of a step that computes every row's logits (whose hidden rows are
// its head rows), bit for bit, and the logits equal a plain step's.
TEST(Executor, AllHiddenRowsWithoutEveryRowsLogits) {
  for (const std::string quant : {"F32", "Q8_0"}) {
    SCOPED_TRACE(quant);
    const std::string path = Synthetic("deepseek2", quant);
    auto run = [&](bool all_hidden, bool all_logits, std::vector<std::vector<float>>* hidden) {
      auto ex = Make(path);
      std::vector<SequenceInput> seqs(2);
      seqs[0].tokens = Tokens(7, 1);
      seqs[1].tokens = Tokens(3, 2);
      const int half = static_cast<int>(ex->n_blocks() / 2);
      seqs[0].block_table = Iota(half);
      seqs[1].block_table = Iota(half, half);
      for (SequenceInput& s : seqs) {
        s.all_hidden = all_hidden;
        s.all_logits = all_logits;
      }
      auto l = ex->Step(seqs, nullptr, hidden);
      EXPECT_TRUE(l.ok()) << l.status();
      return l.ok() ? *l : std::vector<std::vector<float>>{};
    };
    std::vector<std::vector<float>> all, every_logit, plain;
    const auto logits = run(true, false, &all);
    const auto every = run(false, true, &every_logit);
    const auto last = run(false, false, &plain);
    ASSERT_EQ(all.size(), 2u);
    const int64_t d = Make(path)->hparams().n_embd;
    for (int s = 0; s < 2; ++s) {
      ASSERT_EQ(all[s].size(), (s == 0 ? 7u : 3u) * d);
      ASSERT_EQ(all[s].size(), every_logit[s].size());
      EXPECT_EQ(0, std::memcmp(all[s].data(), every_logit[s].data(), all[s].size() * 4));
      EXPECT_EQ(0, std::memcmp(all[s].data() + all[s].size() - d, plain[s].data(), d * 4));
      EXPECT_EQ(logits[s], last[s]);
    }
  }
}

// Weight panels kept from load (int8 panels for the GEMM, decode panels for q4_K's dots)
// change where the kernels read their weights, never what they compute: a prefill step of
// three sequences and decode steps of all three give the same bits with packing on as off,
// for a dense model and an MoE + MLA one.
TEST(Executor, PackedWeightsGiveTheSameBits) {
  for (auto [arch, quant] :
       {std::pair<const char*, const char*>{"llama", "Q4_K_M"}, {"deepseek2", "Q8_0"}}) {
    SCOPED_TRACE(arch);
    const std::string path = Synthetic(arch, quant);
    std::vector<std::vector<std::vector<float>>> runs;
    for (WeightPacking packing : {WeightPacking::kOff, WeightPacking::kOn}) {
      ExecutorOptions o;
      o.threads = 2;
      o.weight_packing = packing;
      auto ex = Make(path, o);
      ASSERT_NE(ex, nullptr);
      if (packing == WeightPacking::kOff) {
        EXPECT_EQ(ex->packed_weight_bytes(), 0u);
      } else if (cpu::IsaSupported(cpu::Isa::kAvx512)) {
        EXPECT_GT(ex->packed_weight_bytes(), 0u) << ex->kernel_summary();
        EXPECT_THAT(ex->kernel_summary(), ::testing::HasSubstr("int8 panels for"));
        if (std::string(quant) == "Q4_K_M") {
          EXPECT_THAT(ex->kernel_summary(), ::testing::HasSubstr("decode panels kept for"));
          EXPECT_THAT(ex->kernel_summary(), ::testing::Not(::testing::HasSubstr("kept for 0 of")));
        }
      }
      const int bs = ex->block_size();
      std::vector<SequenceInput> seqs(3);
      for (int i = 0; i < 3; ++i) {
        seqs[i].tokens = Tokens(5 + 9 * i, i);
        seqs[i].all_logits = true;
        for (int b = 0; b < 64 / bs; ++b) seqs[i].block_table.push_back(i * (64 / bs) + b);
      }
      std::vector<std::vector<float>> out;
      for (int step = 0; step < 4; ++step) {
        auto r = ex->Step(seqs);
        ASSERT_TRUE(r.ok()) << r.status();
        for (auto& v : *r) out.push_back(std::move(v));
        for (int i = 0; i < 3; ++i) {
          seqs[i].start_pos += static_cast<int64_t>(seqs[i].tokens.size());
          seqs[i].tokens = {static_cast<int32_t>((step * 31 + i * 7) % 300)};
        }
      }
      runs.push_back(std::move(out));
    }
    ASSERT_EQ(runs[0].size(), runs[1].size());
    for (size_t i = 0; i < runs[0].size(); ++i) {
      ASSERT_EQ(runs[0][i].size(), runs[1][i].size());
      for (size_t j = 0; j < runs[0][i].size(); ++j) {
        ASSERT_EQ(std::bit_cast<uint32_t>(runs[0][i][j]), std::bit_cast<uint32_t>(runs[1][i][j]))
            << "result " << i << " logit " << j;
      }
    }
  }
}

// auto packs matrices while their panels fit its budget (a quarter of the available memory,
// or the one set), in the order the layers hold them, and says what it left out.
TEST(Executor, AutoPackingStopsAtItsBudget) {
  if (!cpu::IsaSupported(cpu::Isa::kAvx512)) GTEST_SKIP() << "host has no AVX-512 VNNI";
  const std::string path = Synthetic("llama", "Q8_0");
  ExecutorOptions all;
  all.weight_packing = WeightPacking::kOn;
  auto full = Make(path, all);
  ASSERT_NE(full, nullptr);
  const uint64_t everything = full->packed_weight_bytes();
  ASSERT_GT(everything, 0u);
  ExecutorOptions some;
  some.weight_packing = WeightPacking::kAuto;
  some.weight_packing_budget = everything / 2;
  auto half = Make(path, some);
  ASSERT_NE(half, nullptr);
  EXPECT_GT(half->packed_weight_bytes(), 0u);
  EXPECT_LE(half->packed_weight_bytes(), everything / 2);
  EXPECT_THAT(half->kernel_summary(), ::testing::HasSubstr("the budget is"));
  EXPECT_THAT(half->kernel_summary(), ::testing::HasSubstr("as set"));
  // Decode panels come first: all of them fit, and the matrices left without int8 panels
  // have the kDots path's GEMM measured against their decode panels.
  EXPECT_TRUE(std::regex_search(half->kernel_summary(),
                                std::regex("decode panels kept for ([1-9][0-9]*) of \\1 ")))
      << half->kernel_summary();
  EXPECT_THAT(half->kernel_summary(), ::testing::HasSubstr("q8_0 decode panels: decode GEMM from"));
  // Packed or not, the same bits.
  std::vector<SequenceInput> seqs(1);
  seqs[0].tokens = Tokens(12);
  seqs[0].all_logits = true;
  seqs[0].block_table = {0};
  auto a = full->Step(seqs);
  auto b = half->Step(seqs);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*a)[0].size(), (*b)[0].size());
  for (size_t j = 0; j < (*a)[0].size(); ++j) {
    ASSERT_EQ(std::bit_cast<uint32_t>((*a)[0][j]), std::bit_cast<uint32_t>((*b)[0][j])) << j;
  }
}

TEST(Executor, PagedCacheWithShuffledBlocksEqualsContiguous) {
  // GQA (per-head K/V) and MLA + DSA (latent and indexer caches).
  for (const char* arch : {"llama", "glm-dsa"}) {
    SCOPED_TRACE(arch);
    std::string path = Synthetic(arch, "Q4_K_M");
    auto run = [&](std::vector<int32_t> table) {
      auto ex = Make(path, Exact());
      std::vector<int32_t> tokens = Tokens(40);
      SequenceInput s;
      s.block_table = table;
      // Prefill in chunks of 7, then 5 single-token decode steps.
      std::vector<float> last;
      size_t at = 0;
      while (at < tokens.size()) {
        size_t n = at < 25 ? std::min<size_t>(7, 25 - at) : 1;
        s.tokens.assign(tokens.begin() + at, tokens.begin() + at + n);
        s.start_pos = static_cast<int64_t>(at);
        auto l = ex->Step({&s, 1});
        EXPECT_TRUE(l.ok()) << l.status();
        last = (*l)[0];
        at += n;
      }
      return last;
    };
    auto ex = Make(path, Exact());
    std::vector<int32_t> contiguous = Iota(ex->n_blocks());
    std::vector<int32_t> shuffled = contiguous;
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(5));
    std::vector<float> a = run(contiguous), b = run(shuffled);
    EXPECT_LT(MaxAbs(a, b), 1e-5);
    // And equal to one batch of all 40 tokens.
    auto one = Make(path, Exact());
    SequenceInput s;
    s.tokens = Tokens(40);
    s.block_table = contiguous;
    auto l = one->Step({&s, 1});
    ASSERT_TRUE(l.ok());
    EXPECT_LT(MaxAbs(a, (*l)[0]), 1e-4);
  }
}

TEST(Executor, EveryQuantTypeWorksWithEveryDtype) {
  for (const char* quant : {"F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K",
                            "Q4_K", "Q5_K", "Q6_K"}) {
    std::string path = Synthetic("llama", quant, 1);
    auto exact = Make(path, Exact());
    SequenceInput s;
    s.tokens = Tokens(12);
    s.all_logits = true;
    s.block_table = Iota(exact->n_blocks());
    auto want = exact->Step({&s, 1});
    ASSERT_TRUE(want.ok());
    for (ComputeDtype dt : {ComputeDtype::kAuto, ComputeDtype::kFloat32, ComputeDtype::kBFloat16,
                            ComputeDtype::kFloat16}) {
      SCOPED_TRACE(absl::StrCat(quant, " dtype ", static_cast<int>(dt)));
      ExecutorOptions o;
      o.dtype = dt;
      auto fast = Make(path, o);
      // Decode-sized steps take the integer path where one exists.
      SequenceInput d = s;
      d.all_logits = false;
      std::vector<float> last;
      for (size_t i = 0; i < s.tokens.size(); ++i) {
        d.tokens = {s.tokens[i]};
        d.start_pos = static_cast<int64_t>(i);
        auto l = fast->Step({&d, 1});
        ASSERT_TRUE(l.ok()) << l.status();
        last = (*l)[0];
      }
      std::vector<float> ref((*want)[0].end() - last.size(), (*want)[0].end());
      // Same argmax and logits within the activation-rounding noise of 16-bit dtypes.
      EXPECT_EQ(std::max_element(last.begin(), last.end()) - last.begin(),
                std::max_element(ref.begin(), ref.end()) - ref.begin());
      EXPECT_LT(MaxAbs(last, ref), 0.5);
    }
  }
}

TEST(Executor, BadInputsAreErrors) {
  std::string path = Synthetic("llama", "F32");
  auto ex = Make(path, Exact());
  SequenceInput s;
  s.tokens = {5, 100000};
  s.block_table = Iota(ex->n_blocks());
  auto r = ex->Step({&s, 1});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("token id 100000 is outside"));
  s.tokens = {5};
  s.block_table = {};
  r = ex->Step({&s, 1});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("has no cache slot"));
  s.tokens = {};
  EXPECT_FALSE(ex->Step({&s, 1}).ok());
  // A cache beyond the context length (tiny models: 4096) is refused before allocating.
  ExecutorOptions big = Exact();
  big.kv_tokens = 1 << 20;
  auto too_big = Executor::Create(path, big);
  ASSERT_FALSE(too_big.ok());
  EXPECT_THAT(std::string(too_big.status().message()),
              ::testing::HasSubstr("exceeds the model's context length 4096"));

  gguf::GgufWriter w;
  w.metadata().Set("general.architecture", gguf::Value::String("mystery"));
  std::string mystery = ::testing::TempDir() + "/mystery.gguf";
  ASSERT_TRUE(w.WriteFile(mystery).ok());
  auto unknown = Executor::Create(mystery, Exact());
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()),
              ::testing::HasSubstr("unknown architecture 'mystery'"));
}

// Asking for a GPU where there is none (or in a build without the CUDA backend) is an error
// that says which, at Create, not a crash at the first step. On a GPU machine the request
// succeeds and cuda_executor_test (label gpu) covers the device.
TEST(Executor, GpuWithoutADeviceIsAClearError) {
  std::string path = Synthetic("llama", "Q8_0");
  ExecutorOptions o;
  o.device = Device::kCuda;
  o.kv_tokens = 256;
  auto ex = Executor::Create(path, o);
  if (ex.ok()) GTEST_SKIP() << "a GPU is present: " << (*ex)->device_name();
  EXPECT_EQ(ex.status().code(), absl::StatusCode::kFailedPrecondition) << ex.status();
  EXPECT_THAT(std::string(ex.status().message()),
              ::testing::AnyOf(::testing::HasSubstr("no CUDA device is visible"),
                               ::testing::HasSubstr("this build has no CUDA backend")));
  // The CPU executor is unaffected and says where it runs.
  auto cpu = Make(path, Exact());
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->device_name(), "cpu");
}

}  // namespace
}  // namespace tessera::executor
