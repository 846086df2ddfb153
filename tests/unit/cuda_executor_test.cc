// The GPU executor (ExecutorOptions::device = kCuda) against the CPU executor on generated
// models of every architecture: whole-model logits, routing and DSA choices, CUDA graphs on
// vs off, batch invariance, and its errors. Label `gpu`: skips without a CUDA device.
//
// Each architecture prints one grep-able line per activation dtype for tests/gpu/run.sh:
//   logits_vs_cpu arch=llama quant=Q4_K_M dtype=f16 max_abs=... max_logit=... rel=... ...
//
// TESSERA_GPU_TEST_ON_CPU=1 runs the same harness with the "GPU" executor on the CPU (same
// exact/dtype options, fast path): a dry run of the scripts, block tables and comparisons on
// machines without a GPU. Its figures are the CPU fast path's, not the GPU's.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/model/synthetic.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "tests/support/synthetic_model.h"
#include "worker/executor/executor.h"

namespace tessera::executor {
namespace {

bool OnCpu() {
  const char* v = std::getenv("TESSERA_GPU_TEST_ON_CPU");
  return v != nullptr && std::string(v) == "1";
}

#define TESSERA_REQUIRE_GPU()                                                                  \
  if (!OnCpu() && cuda::ListDevices().empty()) {                                               \
    GTEST_SKIP() << "no CUDA device visible (tessera::cuda::ListDevices() is empty): the GPU " \
                    "executor is checked on a GPU machine by tests/gpu/run.sh";                \
  }

struct Model {
  std::string arch, quant;
  bool moe = false, dsa = false;
};

// One per architecture, with a spread of weight types the GPU kernels decode (K-quant mixes,
// Q8_0, F16). "small" preset: hidden 512, 4 blocks, 8 experts top-2 for MoE, DSA top-k 16.
const std::vector<Model>& Models() {
  static const std::vector<Model> models = {{"llama", "Q4_K_M"},
                                            {"qwen2", "F16"},
                                            {"qwen3", "Q4_K_M"},
                                            {"qwen3moe", "Q8_0", true},
                                            {"deepseek2", "Q4_K_M", true},
                                            {"glm4moe", "Q8_0", true},
                                            {"glm-dsa", "Q8_0", true, true}};
  return models;
}

const Model& FindModel(const std::string& arch) {
  for (const Model& m : Models()) {
    if (m.arch == arch) return m;
  }
  std::abort();
}

// Generated once per process.
std::string ModelPath(const Model& m) {
  static std::map<std::string, std::string>* paths = new std::map<std::string, std::string>;
  const std::string key = m.arch + "-" + m.quant;
  if (auto it = paths->find(key); it != paths->end()) return it->second;
  const std::string path = testing::WriteSmallModel(m.arch, m.quant, 23, "cuda-exec");
  (*paths)[key] = path;
  return path;
}

constexpr int kBlock = 16;

// The GPU configurations compared with the CPU's exact path.
struct GpuDtype {
  const char* name;
  bool exact;
  ComputeDtype dtype;
};
constexpr GpuDtype kF32{"f32", true, ComputeDtype::kFloat32};
constexpr GpuDtype kF16{"f16", false, ComputeDtype::kFloat16};
constexpr GpuDtype kBf16{"bf16", false, ComputeDtype::kBFloat16};

ExecutorOptions CpuExact() {
  ExecutorOptions o;
  o.exact = true;
  o.kv_block_size = kBlock;
  o.kv_tokens = 512;
  return o;
}

ExecutorOptions Gpu(const GpuDtype& d) {
  ExecutorOptions o;
  o.device = OnCpu() ? Device::kCpu : Device::kCuda;
  o.gpu = 0;
  o.exact = d.exact;
  o.dtype = d.dtype;
  o.kv_block_size = kBlock;
  o.kv_tokens = 512;
  o.max_step_tokens = 256;
  return o;
}

std::unique_ptr<Executor> Make(const std::string& path, const ExecutorOptions& o,
                               const std::string& what) {
  auto ex = Executor::Create(path, o);
  EXPECT_TRUE(ex.ok()) << what << ": Executor::Create: " << ex.status();
  if (!ex.ok()) return nullptr;
  // A GPU comparison must not silently run on the CPU.
  const std::string device = (*ex)->device_name();
  const std::string expected = o.device == Device::kCuda ? absl::StrCat("cuda:", o.gpu) : "cpu";
  EXPECT_EQ(device.substr(0, expected.size()), expected) << what << ": device_name() " << device;
  return *std::move(ex);
}

// A sequence the scripts drive: its whole token list, and how much of it is in the cache.
struct Seq {
  std::vector<int32_t> tokens;
  int first_block = 0;  // blocks first_block, first_block + 1, ... in order
  std::string name;
};

std::vector<int32_t> Tokens(int n, int salt, int vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (37 * i + 101 * salt + 11) % vocab;
  return t;
}

// Exactly the blocks positions [0, end) need: the table grows across block boundaries, as
// a scheduler hands them out (so captured graphs see several table widths).
std::vector<int32_t> Table(const Seq& s, int64_t end) {
  std::vector<int32_t> t((end + kBlock - 1) / kBlock);
  for (size_t i = 0; i < t.size(); ++i) t[i] = s.first_block + static_cast<int32_t>(i);
  return t;
}

// The rows of every step, labelled for failure messages.
struct Row {
  std::string where;  // "step 2 seq B pos 15"
  std::string seq;
  int64_t pos = 0;
  std::vector<float> logits;
};
struct Outcome {
  std::vector<Row> rows;
  std::vector<StepTrace> traces;
  // Per traced step, the (sequence, position) of each token, in the trace's numbering.
  std::vector<std::vector<std::pair<std::string, int64_t>>> token_of;
  std::string error;
};

// Runs one step of `seqs` (each: n new tokens starting at `pos`), appending the rows. With
// `trace`, the step records its StepTrace (the GPU executor then runs it without a CUDA
// graph: decode graphs are for untraced steps).
void RunStep(Executor& ex, const std::vector<const Seq*>& seqs, const std::vector<int64_t>& pos,
             const std::vector<int>& n, bool all_logits, int step, Outcome& out,
             bool trace = false) {
  if (!out.error.empty()) return;
  std::vector<SequenceInput> in(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    in[i].tokens.assign(seqs[i]->tokens.begin() + pos[i], seqs[i]->tokens.begin() + pos[i] + n[i]);
    in[i].start_pos = pos[i];
    in[i].block_table = Table(*seqs[i], pos[i] + n[i]);
    in[i].all_logits = all_logits;
  }
  StepTrace st;
  auto r = ex.Step(in, trace ? &st : nullptr);
  if (!r.ok()) {
    out.error = absl::StrCat("step ", step, ": ", r.status().ToString());
    return;
  }
  const size_t vocab = ex.hparams().n_vocab;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::vector<float>& v = (*r)[i];
    const size_t rows = v.size() / vocab;
    if (rows * vocab != v.size() || rows != (all_logits ? static_cast<size_t>(n[i]) : 1u)) {
      out.error = absl::StrCat("step ", step, " seq ", seqs[i]->name, ": ", v.size(),
                               " logits, not a whole number of the expected rows of ", vocab);
      return;
    }
    for (size_t k = 0; k < rows; ++k) {
      const int64_t p = pos[i] + (all_logits ? static_cast<int64_t>(k) : n[i] - 1);
      out.rows.push_back({absl::StrCat("step ", step, " seq ", seqs[i]->name, " pos ", p),
                          seqs[i]->name, p,
                          std::vector<float>(v.begin() + k * vocab, v.begin() + (k + 1) * vocab)});
    }
  }
  if (trace) {
    out.traces.push_back(std::move(st));
    auto& tokens = out.token_of.emplace_back();
    for (size_t i = 0; i < seqs.size(); ++i) {
      for (int k = 0; k < n[i]; ++k) tokens.emplace_back(seqs[i]->name, pos[i] + k);
    }
  }
}

// Prefills every sequence's first `prompt[i]` tokens in one step (all logits), then decodes
// the rest one token per step, all sequences together (teacher-forced: both executors see
// the same tokens).
Outcome RunScript(Executor& ex, const std::vector<Seq>& seqs, const std::vector<int>& prompt,
                  bool trace) {
  Outcome out;
  std::vector<const Seq*> all;
  for (const Seq& s : seqs) all.push_back(&s);
  std::vector<int64_t> pos(seqs.size(), 0);
  RunStep(ex, all, pos, prompt, true, 0, out, trace);
  for (size_t i = 0; i < seqs.size(); ++i) pos[i] = prompt[i];
  const std::vector<int> one(seqs.size(), 1);
  for (int step = 1;; ++step) {
    bool more = true;
    for (size_t i = 0; i < seqs.size(); ++i)
      more &= pos[i] < static_cast<int64_t>(seqs[i].tokens.size());
    if (!more) break;
    RunStep(ex, all, pos, one, false, step, out, trace);
    for (int64_t& p : pos) ++p;
  }
  return out;
}

// Two sequences of different lengths in one prefill step, then four decode steps. A's 80
// prompt tokens (five blocks) exceed the GPU's GEMV limit (64 rows), so its products take
// the dequantize + cuBLAS GEMM path; B's 14 take GEMV, and its decode crosses its first
// block boundary at 16. Past DSA's top-k (16), so the indexer's choice matters.
std::vector<Seq> TwoSequences(int vocab) {
  return {{Tokens(84, 1, vocab), 0, "A"}, {Tokens(18, 2, vocab), 6, "B"}};
}
const std::vector<int> kTwoPrompts = {80, 14};

double MaxAbsLogit(const Outcome& o) {
  double m = 0;
  for (const Row& r : o.rows) {
    for (float v : r.logits) m = std::max(m, static_cast<double>(std::fabs(v)));
  }
  return m;
}

struct Diff {
  int compared = 0;  // rows compared
  double max_abs = 0;
  std::string where = "-";
  int worst_index = -1;
  float got = 0, want = 0;
  bool nonfinite = false;
  int argmax_checked = 0, argmax_equal = 0;
  std::string first_argmax_miss;
  std::string Describe() const {
    return absl::StrFormat("max_abs=%.3g at %s logit %d (got %.6g, want %.6g)%s", max_abs, where,
                           worst_index, got, want, nonfinite ? " NON-FINITE VALUES" : "");
  }
};

int Argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Top-1 minus top-2 of a row.
double Margin(const std::vector<float>& v) {
  float a = -INFINITY, b = -INFINITY;
  for (float x : v) {
    if (x > a) {
      b = a;
      a = x;
    } else if (x > b) {
      b = x;
    }
  }
  return static_cast<double>(a) - b;
}

// Per sequence, the first position from which rows are not comparable (see GpuVsCpu).
using Cutoff = std::map<std::string, int64_t>;

// `got` against `want` row by row (rows of a sequence at or past its `cutoff` skipped);
// argmax compared where want's top-2 margin is ≥ `margin`.
Diff Compare(const Outcome& got, const Outcome& want, double margin, const Cutoff& cutoff = {}) {
  Diff d;
  EXPECT_EQ(got.rows.size(), want.rows.size());
  for (size_t r = 0; r < got.rows.size() && r < want.rows.size(); ++r) {
    const std::vector<float>& g = got.rows[r].logits;
    const std::vector<float>& w = want.rows[r].logits;
    EXPECT_EQ(got.rows[r].where, want.rows[r].where);
    if (auto it = cutoff.find(want.rows[r].seq);
        it != cutoff.end() && want.rows[r].pos >= it->second) {
      continue;
    }
    ++d.compared;
    for (size_t i = 0; i < g.size() && i < w.size(); ++i) {
      if (!std::isfinite(g[i])) d.nonfinite = true;
      const double e = std::fabs(static_cast<double>(g[i]) - w[i]);
      if (!(e <= d.max_abs)) {  // NaN counts as worst
        d.max_abs = std::isnan(e) ? INFINITY : e;
        d.where = want.rows[r].where;
        d.worst_index = static_cast<int>(i);
        d.got = g[i];
        d.want = w[i];
      }
    }
    if (Margin(w) >= margin) {
      ++d.argmax_checked;
      if (Argmax(g) == Argmax(w)) {
        ++d.argmax_equal;
      } else if (d.first_argmax_miss.empty()) {
        d.first_argmax_miss = absl::StrCat(want.rows[r].where, ": argmax ", Argmax(g), " vs ",
                                           Argmax(w), " (margin ", Margin(w), ")");
      }
    }
  }
  return d;
}

// How many (layer, token) choices of `want` `got` made as a set, per kind of trace.
struct Agreement {
  int equal = 0, total = 0;
  double overlap = 0;  // sum over choices of |got ∩ want| / |want|
  std::string first_miss;
  double Fraction() const { return total ? static_cast<double>(equal) / total : 1.0; }
  double MeanOverlap() const { return total ? overlap / total : 1.0; }
};

// Counts the choices `got` made like `want` (as sets), and lowers `cutoff` to the first
// position of each sequence where they differ.
void Agree(const std::map<int, std::vector<std::vector<int32_t>>>& got,
           const std::map<int, std::vector<std::vector<int32_t>>>& want, int step,
           const std::vector<std::pair<std::string, int64_t>>& token_of, Agreement& a,
           Cutoff& cutoff) {
  for (const auto& [layer, tokens] : want) {
    auto it = got.find(layer);
    for (size_t t = 0; t < tokens.size(); ++t) {
      std::set<int32_t> w(tokens[t].begin(), tokens[t].end()), g;
      if (it != got.end() && t < it->second.size())
        g.insert(it->second[t].begin(), it->second[t].end());
      int common = 0;
      for (int32_t x : g) common += w.count(x);
      ++a.total;
      a.overlap += w.empty() ? 1.0 : static_cast<double>(common) / w.size();
      if (g == w) {
        ++a.equal;
        continue;
      }
      if (t < token_of.size()) {
        auto [seq, pos] = token_of[t];
        auto [it_c, fresh] = cutoff.emplace(seq, pos);
        if (!fresh) it_c->second = std::min(it_c->second, pos);
      }
      if (a.first_miss.empty()) {
        a.first_miss = absl::StrCat("step ", step, " layer ", layer, " token ", t, ": ", g.size(),
                                    " chosen, ", common, " of the CPU's ", w.size(),
                                    it == got.end() ? " (layer missing from the GPU trace)" : "");
      }
    }
  }
}

Agreement Experts(const Outcome& got, const Outcome& want, Cutoff& cutoff) {
  Agreement a;
  EXPECT_EQ(got.traces.size(), want.traces.size());
  for (size_t s = 0; s < want.traces.size() && s < got.traces.size(); ++s) {
    Agree(got.traces[s].experts, want.traces[s].experts, static_cast<int>(s), want.token_of[s], a,
          cutoff);
  }
  return a;
}

Agreement DsaKeys(const Outcome& got, const Outcome& want, Cutoff& cutoff) {
  Agreement a;
  for (size_t s = 0; s < want.traces.size() && s < got.traces.size(); ++s) {
    Agree(got.traces[s].dsa_keys, want.traces[s].dsa_keys, static_cast<int>(s), want.token_of[s], a,
          cutoff);
  }
  return a;
}

bool BitwiseEqual(const Outcome& a, const Outcome& b, std::string* where) {
  if (a.rows.size() != b.rows.size()) {
    *where = absl::StrCat(a.rows.size(), " rows vs ", b.rows.size());
    return false;
  }
  for (size_t r = 0; r < a.rows.size(); ++r) {
    const auto& x = a.rows[r].logits;
    const auto& y = b.rows[r].logits;
    if (x.size() != y.size() || std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) != 0) {
      *where = a.rows[r].where;
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// a, b: whole-model logits, expert choices and DSA keys, GPU vs CPU, every architecture.
//
// Logits (max |logit| of these models is about 11-14):
//  - f32 (exact on both): the same float32 math in another order (warp reductions, cuBLAS
//    tiles, fused kernels) and the GPU's own expf/rsqrt: each sum is off by a few ulps
//    (~1e-6 relative), which 4 blocks and the LM head amplify to ~1e-5 absolute (llama.cpp
//    is within 1.1e-5 of float64 on the conformance models; their Tier 1 allows 1e-3).
//    2e-4 · max|logit| + 1e-3 (~3.6e-3) leaves a margin of ~300x, and stays 5x below the
//    subtlest deliberate error of the conformance README (one weight matrix scaled by 1%:
//    1.7e-2 at logit std 3); a real kernel bug is O(1).
//  - f16 / bf16 activations and KV cache vs the CPU's exact float32: each stored activation
//    is rounded to 11 / 8 significant bits (unit roundoff 2^-11 / 2^-8), about 12 roundings
//    per block, 4 blocks: ~sqrt(48) · 2.8e-4 ≈ 2e-3 relative (f16) on the hidden state,
//    ~1e-2 on the worst of the ~30k logits compared, i.e. ~2.5e-3 of max|logit|; MLA
//    models are about twice as sensitive. (The conformance README measures an F16 KV cache
//    alone at 6e-3 - 1.5e-2 absolute at logit std 3.) Bounds: f16 3e-2 · max|logit|, bf16
//    (8x the roundoff) 1.2e-1 · max|logit|: 6-12x the estimates, while a dropped term,
//    wrong scale or layout error moves logits by O(max|logit|). (The CPU's fast path, which
//    TESSERA_GPU_TEST_ON_CPU=1 runs, also quantizes activations to 8 bits and lands at
//    2-4e-2 in both dtypes; the dry run doubles the bounds.)
//  - Routing and DSA: a rounding can flip a close expert or top-k key choice; the flipped
//    token's logits then move by O(1), and so do the later positions of its sequence (they
//    attend to its keys and values). So the logit bound applies to every row computed with
//    the CPU's discrete choices: a sequence's rows are compared up to its first position
//    where any layer's expert set or DSA key set differs from the CPU's. In f32 such flips
//    need a selection gap within ~1e-6 of a tie (the conformance models' smallest relative
//    gap is 1.1e-3), so at least half of the rows must be compared there.
//  - argmax equal on the compared rows where the CPU's top-2 margin exceeds 2x the bound
//    (a row within the bound cannot change its argmax then).
//  - Choices as sets per (layer, token). f32: ≥ 95% equal, and DSA key sets too. f16 / bf16:
//    one flip changes the later tokens' hidden states, so their choices drift as well (the
//    CPU's 8-bit fast path keeps 85-99% of expert sets and a key overlap of 0.92 over these
//    84 tokens): ≥ 60% of expert sets equal and a mean key-set overlap ≥ 0.8, where a broken
//    router matches ~1 set in 28 (2 of 8 experts) and a broken indexer overlaps about
//    top_k / positions (~0.3 at 50 positions).
// ---------------------------------------------------------------------------------------
struct Bounds {
  double rel, min_compared, choices, dsa_overlap;
};

Bounds BoundsFor(const GpuDtype& d) {
  if (d.exact) return {2e-4, 0.5, 0.95, 0.95};
  // The dry run's CPU fast path adds its 8-bit activation quantization: twice the bound.
  const double cpu = OnCpu() ? 2.0 : 1.0;
  if (d.dtype == ComputeDtype::kBFloat16) return {cpu * 1.2e-1, 0.0, 0.6, 0.8};
  return {cpu * 3e-2, 0.0, 0.6, 0.8};
}

class GpuVsCpu : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuVsCpu, LogitsRoutingAndKeysMatchTheCpu) {
  TESSERA_REQUIRE_GPU();
  const Model& m = FindModel(GetParam());
  const std::string path = ModelPath(m);
  auto cpu = Make(path, CpuExact(), m.arch + " cpu exact");
  ASSERT_NE(cpu, nullptr);
  const int vocab = static_cast<int>(cpu->hparams().n_vocab);
  const std::vector<Seq> seqs = TwoSequences(vocab);
  const Outcome want = RunScript(*cpu, seqs, kTwoPrompts, /*trace=*/true);
  ASSERT_EQ(want.error, "") << m.arch << " cpu";
  cpu.reset();
  const double scale = MaxAbsLogit(want);
  ASSERT_EQ(want.traces.size(), want.token_of.size());
  if (m.moe) {
    ASSERT_FALSE(want.traces.empty() || want.traces[0].experts.empty())
        << m.arch << ": the CPU trace has no expert choices";
  }
  if (m.dsa) {
    ASSERT_FALSE(want.traces[0].dsa_keys.empty()) << m.arch << ": the CPU trace has no DSA keys";
  }

  for (const GpuDtype& d : {kF32, kF16, kBf16}) {
    const std::string what = absl::StrCat(m.arch, " ", m.quant, " gpu ", d.name, " vs cpu exact");
    SCOPED_TRACE(what);
    auto gpu = Make(path, Gpu(d), what);
    ASSERT_NE(gpu, nullptr);
    const Outcome got = RunScript(*gpu, seqs, kTwoPrompts, /*trace=*/true);
    ASSERT_EQ(got.error, "") << what;
    gpu.reset();
    const Bounds b = BoundsFor(d);
    const double bound = b.rel * scale + 1e-3;
    Cutoff cutoff;
    const Agreement ex = Experts(got, want, cutoff);
    const Agreement keys = DsaKeys(got, want, cutoff);
    const Diff all = Compare(got, want, INFINITY);
    const Diff diff = Compare(got, want, 2 * bound, cutoff);
    const size_t rows = want.rows.size();
    std::printf(
        "logits_vs_cpu arch=%s quant=%s dtype=%s max_abs=%.3g max_logit=%.3g rel=%.3g "
        "bound_rel=%.3g rows_compared=%d/%zu all_rows_max_abs=%.3g argmax=%d/%d experts=%d/%d "
        "dsa_keys=%d/%d dsa_overlap=%.3f\n",
        m.arch.c_str(), m.quant.c_str(), d.name, diff.max_abs, scale, diff.max_abs / scale, b.rel,
        diff.compared, rows, all.max_abs, diff.argmax_equal, diff.argmax_checked, ex.equal,
        ex.total, keys.equal, keys.total, keys.MeanOverlap());
    std::fflush(stdout);

    EXPECT_FALSE(all.nonfinite) << what << ": " << all.Describe();
    EXPECT_LE(diff.max_abs, bound)
        << what << ": beyond |Δ| ≤ " << bound << " (" << b.rel << " · max|logit| " << scale
        << " + 1e-3) over the " << diff.compared << " of " << rows
        << " rows made with the CPU's routing / keys; worst " << diff.Describe();
    EXPECT_GE(diff.compared, b.min_compared * rows)
        << what << ": only " << diff.compared << " of " << rows
        << " rows precede a routing or DSA difference; first expert difference: " << ex.first_miss
        << "; first key difference: " << keys.first_miss;
    EXPECT_EQ(diff.argmax_equal, diff.argmax_checked)
        << what << ": argmax differs where the CPU's top-2 margin is ≥ " << 2 * bound
        << "; first: " << diff.first_argmax_miss;
    if (d.exact) {
      EXPECT_GT(diff.argmax_checked, 0) << what << ": no row had a clear top-2 margin";
    }
    if (m.moe) {
      EXPECT_GT(ex.total, 0) << what;
      EXPECT_GE(ex.Fraction(), b.choices)
          << what << ": expert sets equal for " << ex.equal << " of " << ex.total
          << " (layer, token) choices; first difference: " << ex.first_miss
          << " (the GPU must fill StepTrace::experts like the CPU)";
    }
    if (m.dsa) {
      EXPECT_GT(keys.total, 0) << what;
      EXPECT_GE(keys.MeanOverlap(), b.dsa_overlap)
          << what << ": DSA key sets equal for " << keys.equal << " of " << keys.total
          << ", mean overlap " << keys.MeanOverlap() << "; first difference: " << keys.first_miss
          << " (the GPU must fill StepTrace::dsa_keys like the CPU)";
      if (d.exact) {
        EXPECT_GE(keys.Fraction(), b.choices)
            << what << ": DSA key sets equal for " << keys.equal << " of " << keys.total
            << "; first difference: " << keys.first_miss;
      }
    }
  }
}

// In one prefill step, prompts longer than 64 tokens attend with the tiled kernel (GQA in bf16:
// the tensor-core kernel) and the others per query, in runs around them: short sequences
// before, between and after two long prompts (GQA and MLA), then three decode steps, against
// the CPU's exact path.
TEST(CudaExecutor, TiledPrefillBetweenShortSequencesMatchesTheCpu) {
  TESSERA_REQUIRE_GPU();
  const std::vector<std::pair<const char*, GpuDtype>> runs = {
      {"llama", kF32}, {"deepseek2", kF32}, {"llama", kBf16}};
  for (const auto& [arch, dtype] : runs) {
    const Model& m = FindModel(arch);
    SCOPED_TRACE(::testing::Message() << arch << " " << dtype.name);
    const std::string path = ModelPath(m);
    auto cpu = Make(path, CpuExact(), m.arch + " cpu exact");
    ASSERT_NE(cpu, nullptr);
    const int vocab = static_cast<int>(cpu->hparams().n_vocab);
    const std::vector<Seq> seqs = {{Tokens(15, 3, vocab), 0, "S1"},
                                   {Tokens(93, 4, vocab), 1, "L1"},
                                   {Tokens(12, 5, vocab), 8, "S2"},
                                   {Tokens(73, 6, vocab), 10, "L2"},
                                   {Tokens(9, 7, vocab), 16, "S3"}};
    const std::vector<int> prompts = {12, 90, 9, 70, 6};
    const Outcome want = RunScript(*cpu, seqs, prompts, /*trace=*/true);
    ASSERT_EQ(want.error, "");
    cpu.reset();
    auto gpu = Make(path, Gpu(dtype), m.arch + " gpu");
    ASSERT_NE(gpu, nullptr);
    const Outcome got = RunScript(*gpu, seqs, prompts, /*trace=*/true);
    ASSERT_EQ(got.error, "");
    Cutoff cutoff;
    const Agreement ex = Experts(got, want, cutoff);
    const Diff diff = Compare(got, want, INFINITY, cutoff);
    const double bound = BoundsFor(dtype).rel * MaxAbsLogit(want) + 1e-3;
    EXPECT_LE(diff.max_abs, bound) << diff.Describe();
    EXPECT_GE(diff.compared, static_cast<int>(want.rows.size() / 2))
        << "routing differed early: " << ex.first_miss;
  }
}

// MoE prefill on tensor cores (GroupedGemmTiles) keeps batch invariance: with 16-bit
// activations a prompt of more than 64 tokens takes its expert products as a product of its
// own, short prompts keep GEMV, so every sequence's prefill rows are the same bits alone and
// beside the others in one step.
TEST(CudaExecutor, MoePrefillRowsDoNotDependOnBatchMates) {
  TESSERA_REQUIRE_GPU();
  for (const char* arch : {"qwen3moe", "deepseek2"}) {
    const Model& m = FindModel(arch);
    SCOPED_TRACE(arch);
    auto gpu = Make(ModelPath(m), Gpu(kBf16), m.arch + " gpu bf16");
    ASSERT_NE(gpu, nullptr);
    const int vocab = static_cast<int>(gpu->hparams().n_vocab);
    const std::vector<Seq> seqs = {{Tokens(15, 3, vocab), 0, "S1"},
                                   {Tokens(93, 4, vocab), 1, "L1"},
                                   {Tokens(12, 5, vocab), 8, "S2"},
                                   {Tokens(73, 6, vocab), 10, "L2"}};
    const std::vector<int> prompts = {12, 90, 9, 70};
    Outcome alone, mixed;
    for (size_t i = 0; i < seqs.size(); ++i) {
      RunStep(*gpu, {&seqs[i]}, {0}, {prompts[i]}, true, 0, alone);
    }
    RunStep(*gpu, {&seqs[0], &seqs[1], &seqs[2], &seqs[3]}, {0, 0, 0, 0}, prompts, true, 0, mixed);
    ASSERT_EQ(alone.error, "");
    ASSERT_EQ(mixed.error, "");
    ASSERT_EQ(alone.rows.size(), mixed.rows.size());
    int differ = 0;
    for (const Row& a : alone.rows) {
      const auto b = std::find_if(mixed.rows.begin(), mixed.rows.end(),
                                  [&](const Row& r) { return r.seq == a.seq && r.pos == a.pos; });
      ASSERT_NE(b, mixed.rows.end()) << a.where;
      if (a.logits != b->logits && differ++ < 3) {
        ADD_FAILURE() << a.seq << " pos " << a.pos << ": alone and in the batch differ";
      }
    }
    EXPECT_EQ(differ, 0);
  }
}

// The head in chunks (TESSERA_CUDA_HEAD_CHUNK_ROWS, read when an executor is created): an
// all-logits step of more rows than the planned head buffer computes and copies them a chunk
// at a time; logits and hidden rows equal the one-pass head's bit for bit (GEMV rows are the
// same whatever their batch-mates).
TEST(CudaExecutor, HeadInChunksGivesTheOnePassLogits) {
  TESSERA_REQUIRE_GPU();
  if (OnCpu()) GTEST_SKIP() << "the dry run's CPU executor has no head chunks";
  const Model& m = FindModel("qwen3");
  const std::string path = ModelPath(m);
  auto whole = Make(path, Gpu(kF32), "gpu one pass");
  ASSERT_EQ(setenv("TESSERA_CUDA_HEAD_CHUNK_ROWS", "6", 1), 0);
  auto chunked = Make(path, Gpu(kF32), "gpu head chunks of 6");
  unsetenv("TESSERA_CUDA_HEAD_CHUNK_ROWS");
  ASSERT_TRUE(whole != nullptr && chunked != nullptr);
  const int vocab = static_cast<int>(whole->hparams().n_vocab);
  std::vector<SequenceInput> in(2);
  const Seq a{Tokens(23, 1, vocab), 0, "A"}, b{Tokens(9, 2, vocab), 3, "B"};
  in[0].tokens = a.tokens;
  in[0].block_table = Table(a, 23);
  in[0].all_logits = true;
  in[1].tokens = b.tokens;
  in[1].block_table = Table(b, 9);
  in[1].device_sample = DeviceSampling{.temperature = 0.0f};  // a chunked step samples on the host
  std::vector<std::vector<float>> hidden_whole, hidden_chunked;
  std::vector<SampledToken> sampled;
  absl::StatusOr<std::vector<std::vector<float>>> want = whole->Step(in, nullptr, &hidden_whole);
  absl::StatusOr<std::vector<std::vector<float>>> got =
      chunked->Step(in, nullptr, &hidden_chunked, &sampled);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].size(), static_cast<size_t>(23 * vocab));
  EXPECT_TRUE(*got == *want) << "chunked head logits differ";
  EXPECT_TRUE(hidden_chunked == hidden_whole) << "chunked head hidden rows differ";
  EXPECT_EQ(sampled[1].token, -1) << "a chunked step keeps only its last chunk on the device";
}

// The sampling rule of cuda::Sample without top-k (selection_kernels.h) in float64: top-p over
// the row at temperature 1, then the first survivor in id order whose running weight
// exp((l − max) / t) exceeds u·total.
int32_t DeviceRule(const std::vector<float>& x, const DeviceSampling& p) {
  const int n = static_cast<int>(x.size());
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
  if (p.temperature < 1e-5f) return order[0];
  const double max = x[order[0]];
  std::vector<bool> alive(n, true);
  double z = 0, cum = 0;
  for (int i = 0; i < n; ++i) z += std::exp(x[i] - max);
  bool reached = false;
  for (int i : order) {
    if (reached) alive[i] = false;
    cum += std::exp(x[i] - max);
    reached = reached || cum >= p.top_p * z;
  }
  double total = 0, run = 0;
  for (int i = 0; i < n; ++i) total += alive[i] ? std::exp((x[i] - max) / p.temperature) : 0.0;
  for (int i = 0; i < n; ++i) {
    if (!alive[i]) continue;
    run += std::exp((x[i] - max) / p.temperature);
    if (run > p.uniform * total) return i;
  }
  return order[0];
}

double LogSoftmaxAt(const std::vector<float>& x, int32_t t) {
  double m = -INFINITY, z = 0;
  for (float v : x) m = std::max<double>(m, v);
  for (float v : x) z += std::exp(v - m);
  return x[t] - m - std::log(z);
}

// Sampling where the logits are: the sequences that ask get their token and its
// log-probability from the device (greedy: the argmax of the logits the same step gives
// without it; sampled: the device rule with the given u; the log-softmax), the others their
// logits, bit for bit; a step where every sequence asks copies no logits at all. The CPU
// executor does not sample and returns the rows.
TEST(CudaExecutor, SamplesOnTheDevice) {
  TESSERA_REQUIRE_GPU();
  const Model& m = FindModel("llama");
  const std::string path = ModelPath(m);
  auto plain = Make(path, Gpu(kF32), "gpu plain");
  auto dev = Make(path, Gpu(kF32), "gpu sampling");
  ASSERT_TRUE(plain != nullptr && dev != nullptr);
  EXPECT_EQ(dev->samples_on_device(), !OnCpu());
  if (OnCpu()) GTEST_SKIP() << "the dry run's CPU executor does not sample on a device";
  const int vocab = static_cast<int>(dev->hparams().n_vocab);
  const std::vector<Seq> seqs = {
      {Tokens(12, 1, vocab), 0, "A"}, {Tokens(9, 2, vocab), 2, "B"}, {Tokens(9, 3, vocab), 4, "C"}};
  const std::vector<DeviceSampling> how = {{.temperature = 0.0f},
                                           {.temperature = 0.9f, .top_p = 0.9f, .uniform = 0.37},
                                           {.temperature = 1.3f, .uniform = 0.81}};
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    std::vector<SequenceInput> in(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int64_t pos = step == 0 ? 0 : 5 + step;
      const int64_t n = step == 0 ? 6 : 1;
      in[i].tokens.assign(seqs[i].tokens.begin() + pos, seqs[i].tokens.begin() + pos + n);
      in[i].start_pos = pos;
      in[i].block_table = Table(seqs[i], pos + n);
    }
    absl::StatusOr<std::vector<std::vector<float>>> want = plain->Step(in);
    ASSERT_TRUE(want.ok()) << want.status();
    // Step 0: C keeps its logits; then every sequence samples on the device.
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (step > 0 || i < 2) in[i].device_sample = how[i];
    }
    std::vector<SampledToken> sampled;
    absl::StatusOr<std::vector<std::vector<float>>> got = dev->Step(in, nullptr, nullptr, &sampled);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(sampled.size(), seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      SCOPED_TRACE(seqs[i].name);
      if (!in[i].device_sample.has_value()) {
        EXPECT_EQ(sampled[i].token, -1);
        EXPECT_EQ((*got)[i], (*want)[i]) << "a sequence that did not ask lost its logits";
        continue;
      }
      EXPECT_TRUE((*got)[i].empty()) << "the sampled row came back";
      EXPECT_EQ(sampled[i].token, DeviceRule((*want)[i], how[i]));
      ASSERT_GE(sampled[i].token, 0);
      EXPECT_NEAR(sampled[i].logprob, LogSoftmaxAt((*want)[i], sampled[i].token), 1e-5);
    }
  }
  auto cpu = Make(path, CpuExact(), "cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_FALSE(cpu->samples_on_device());
  std::vector<SequenceInput> in(1);
  in[0].tokens = {1, 2, 3};
  in[0].block_table = {0};
  in[0].device_sample = how[0];
  std::vector<SampledToken> sampled;
  absl::StatusOr<std::vector<std::vector<float>>> rows = cpu->Step(in, nullptr, nullptr, &sampled);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(sampled[0].token, -1);
  EXPECT_EQ((*rows)[0].size(), static_cast<size_t>(vocab));
}

std::string ArchName(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(AllArchitectures, GpuVsCpu,
                         ::testing::Values("llama", "qwen2", "qwen3", "qwen3moe", "deepseek2",
                                           "glm4moe", "glm-dsa"),
                         ArchName);

// `batch` sequences of different lengths (prompts 3 + 5i tokens, 5 decode steps); the first
// crosses a block boundary while decoding (prompt 14 → positions 14..18).
std::vector<Seq> Batch(int batch, int vocab, std::vector<int>* prompts) {
  std::vector<Seq> seqs;
  prompts->clear();
  for (int i = 0; i < batch; ++i) {
    const int prompt = i == 0 ? 14 : 3 + 5 * i;
    prompts->push_back(prompt);
    seqs.push_back({Tokens(prompt + 5, 10 + i, vocab), 4 * i, absl::StrCat("S", i)});
  }
  return seqs;
}

// c: decode steps replayed from captured CUDA graphs give the logits of plain launches, bit
// for bit: the same kernels on the same buffers (padding a batch for a graph must not change
// a real row's arithmetic).
class CudaGraphs : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGraphs, SameBitsAsPlainLaunches) {
  TESSERA_REQUIRE_GPU();
  const Model& m = FindModel(GetParam());
  const std::string path = ModelPath(m);
  ExecutorOptions on = Gpu(kF16), off = Gpu(kF16);
  on.dtype = off.dtype = ComputeDtype::kAuto;
  on.cuda_graphs = true;
  off.cuda_graphs = false;
  auto with = Make(path, on, m.arch + " graphs on");
  auto without = Make(path, off, m.arch + " graphs off");
  ASSERT_TRUE(with && without);
  const int vocab = static_cast<int>(with->hparams().n_vocab);
  for (int batch : {1, 3, 8}) {
    std::vector<int> prompts;
    const std::vector<Seq> seqs = Batch(batch, vocab, &prompts);
    const Outcome a = RunScript(*with, seqs, prompts, /*trace=*/false);
    const Outcome b = RunScript(*without, seqs, prompts, /*trace=*/false);
    ASSERT_EQ(a.error, "") << m.arch << " graphs on, batch " << batch;
    ASSERT_EQ(b.error, "") << m.arch << " graphs off, batch " << batch;
    std::string where;
    const bool same = BitwiseEqual(a, b, &where);
    const Diff d = Compare(a, b, INFINITY);
    std::printf("cuda_graphs arch=%s batch=%d bitwise_equal=%d max_abs=%.3g\n", m.arch.c_str(),
                batch, same ? 1 : 0, d.max_abs);
    EXPECT_TRUE(same) << m.arch << " batch " << batch << ": graphs on vs off differ first at "
                      << where << "; " << d.Describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, CudaGraphs,
                         ::testing::Values("llama", "qwen3moe", "glm-dsa"), ArchName);

// d: a sequence's decode logits do not depend on what shares the step. Its prompt is
// prefilled alone in both runs (so its cache is the same), then it decodes alone, or as the
// 4th of 8 sequences. Expected bitwise (ExecutorOptions::batch_invariant, on by default:
// decode rows use per-row kernels, GEMV one warp per row whatever the batch, attention per
// sequence). A prefill in a batch may use other GEMM tiles than alone (cuBLAS picks them by
// shape), so its rows are only held to the bf16 bound of GpuVsCpu (dense models). Activations
// bf16 (the GPU's auto).
class BatchInvariance : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchInvariance, DecodeAloneEqualsDecodeInABatch) {
  TESSERA_REQUIRE_GPU();
  const Model& m = FindModel(GetParam());
  const std::string path = ModelPath(m);
  auto ex = Make(path, Gpu(kBf16), m.arch + " bf16");
  ASSERT_NE(ex, nullptr);
  const int vocab = static_cast<int>(ex->hparams().n_vocab);
  std::vector<int> prompts;
  const std::vector<Seq> seqs = Batch(8, vocab, &prompts);
  const int x = 3;
  const std::vector<const Seq*> alone = {&seqs[x]};

  // Alone: prefill x, then decode it alone.
  Outcome solo, mixed;
  RunStep(*ex, alone, {0}, {prompts[x]}, true, 0, solo);
  for (int k = 0; k < 5; ++k) RunStep(*ex, alone, {prompts[x] + k}, {1}, false, k + 1, solo);
  ASSERT_EQ(solo.error, "");

  // Together: x's prefill alone again (same cache contents), the others' prefill in one
  // step, then all eight decode together.
  RunStep(*ex, alone, {0}, {prompts[x]}, true, 0, mixed);
  std::vector<const Seq*> others, all;
  std::vector<int64_t> zeros;
  std::vector<int> other_prompts;
  for (int i = 0; i < 8; ++i) {
    all.push_back(&seqs[i]);
    if (i == x) continue;
    others.push_back(&seqs[i]);
    zeros.push_back(0);
    other_prompts.push_back(prompts[i]);
  }
  Outcome discard;
  RunStep(*ex, others, zeros, other_prompts, false, 0, discard);
  ASSERT_EQ(discard.error, "");
  for (int k = 0; k < 5; ++k) {
    std::vector<int64_t> pos;
    for (int i = 0; i < 8; ++i) pos.push_back(prompts[i] + k);
    Outcome step;
    RunStep(*ex, all, pos, std::vector<int>(8, 1), false, k + 1, step);
    ASSERT_EQ(step.error, "");
    mixed.rows.push_back(step.rows[x]);
  }
  std::string where;
  const bool same = BitwiseEqual(solo, mixed, &where);
  const Diff d = Compare(mixed, solo, INFINITY);
  std::printf("batch_invariance arch=%s decode_bitwise_equal=%d max_abs=%.3g\n", m.arch.c_str(),
              same ? 1 : 0, d.max_abs);
  EXPECT_TRUE(same) << m.arch << ": sequence " << seqs[x].name
                    << " decoded alone vs with 7 others differs first at " << where << "; "
                    << d.Describe();

  // Prefill of x alongside the others vs alone (rows of step 0 only).
  Outcome batch_prefill;
  std::vector<int64_t> pos0(8, 0);
  RunStep(*ex, all, pos0, prompts, true, 0, batch_prefill);
  ASSERT_EQ(batch_prefill.error, "");
  Outcome x_rows, solo_prefill;
  for (const Row& r : batch_prefill.rows) {
    if (r.where.find("seq " + seqs[x].name + " ") != std::string::npos) x_rows.rows.push_back(r);
  }
  solo_prefill.rows.assign(solo.rows.begin(), solo.rows.begin() + prompts[x]);
  const Diff p = Compare(x_rows, solo_prefill, INFINITY);
  const double bound = BoundsFor(kBf16).rel * MaxAbsLogit(solo_prefill) + 1e-3;
  std::printf("batch_invariance arch=%s prefill_max_abs=%.3g bound=%.3g\n", m.arch.c_str(),
              p.max_abs, bound);
  // MoE: a reordered sum may legitimately flip a close routing choice (O(1) on that row and
  // the later ones), so only dense models are held to the bound; MoE's figure is printed.
  if (!m.moe) {
    EXPECT_LE(p.max_abs, bound) << m.arch << ": prefill in a batch of 8 vs alone: " << p.Describe();
  }
}

// Speculative verification: a step that feeds a decode token and three drafts
// (SequenceInput::rows_as_decodes, the logits of every row) gives each row the bits of the
// one-token decode step at its position, so a speculating server's output equals a plain
// one's bit for bit on the GPU as on the CPU.
TEST_P(BatchInvariance, VerifiedRowsEqualOneTokenSteps) {
  TESSERA_REQUIRE_GPU();
  const Model& m = FindModel(GetParam());
  auto ex = Make(ModelPath(m), Gpu(kBf16), m.arch + " bf16");
  ASSERT_NE(ex, nullptr);
  const int vocab = static_cast<int>(ex->hparams().n_vocab);
  std::vector<int> prompts;
  const std::vector<Seq> seqs = Batch(8, vocab, &prompts);
  const Seq& x = seqs[3];
  const int p = prompts[3];
  Outcome steps;
  RunStep(*ex, {&x}, {0}, {p}, false, 0, steps);
  for (int k = 0; k < 4; ++k) RunStep(*ex, {&x}, {p + k}, {1}, false, k + 1, steps);
  ASSERT_EQ(steps.error, "");
  ASSERT_EQ(steps.rows.size(), 5u);

  Outcome again;
  RunStep(*ex, {&x}, {0}, {p}, false, 0, again);  // the same cache contents
  ASSERT_EQ(again.error, "");
  SequenceInput verify;
  verify.tokens.assign(x.tokens.begin() + p, x.tokens.begin() + p + 4);
  verify.start_pos = p;
  verify.block_table = Table(x, p + 4);
  verify.all_logits = true;
  verify.rows_as_decodes = true;
  auto r = ex->Step({&verify, 1});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ((*r)[0].size(), 4u * vocab);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(
        std::memcmp(&(*r)[0][k * vocab], steps.rows[k + 1].logits.data(), vocab * sizeof(float)), 0)
        << m.arch << ": verified row " << k << " differs from the one-token step at position "
        << p + k;
  }
}

// MTP drafting on the GPU executor (--speculative mtp at TP 1): every row's final-norm state
// (SequenceInput::all_hidden) and the MTP block's logits over (state, next token) pairs
// match the CPU's exact path within the float32 bound (the small glm-dsa preset carries a
// NextN block), the drafts (argmax) are the same, and the last row's state is the one a
// step without all_hidden returns, bit for bit.
TEST(CudaExecutor, MtpRowsMatchTheCpu) {
  TESSERA_REQUIRE_GPU();
  const Model& m = FindModel("glm-dsa");
  const std::string path = ModelPath(m);
  ExecutorOptions go = Gpu(kF32), co = CpuExact();
  go.load_mtp = co.load_mtp = true;
  auto gpu = Make(path, go, "glm-dsa f32 MTP");
  auto cpu = Make(path, co, "glm-dsa cpu MTP");
  ASSERT_NE(gpu, nullptr);
  ASSERT_NE(cpu, nullptr);
  const int64_t V = gpu->hparams().n_vocab, d = gpu->hparams().n_embd;
  const Seq seq{Tokens(13, 4, static_cast<int>(V)), 0, "M"};
  SequenceInput in;
  in.tokens.assign(seq.tokens.begin(), seq.tokens.begin() + 12);
  in.block_table = Table(seq, 14);
  in.all_hidden = true;
  std::vector<std::vector<float>> hg, hc, plain;
  auto lg = gpu->Step({&in, 1}, nullptr, &hg);
  auto lc = cpu->Step({&in, 1}, nullptr, &hc);
  ASSERT_TRUE(lg.ok()) << lg.status();
  ASSERT_TRUE(lc.ok()) << lc.status();
  ASSERT_EQ(hg[0].size(), static_cast<size_t>(12 * d));
  ASSERT_EQ(hc[0].size(), hg[0].size());
  double worst = 0;
  for (size_t i = 0; i < hg[0].size(); ++i)
    worst = std::max(worst, std::fabs(double{hg[0][i]} - hc[0][i]));
  EXPECT_LT(worst, 1e-3) << "every row's hidden state, GPU vs CPU";
  auto again = Make(path, go, "glm-dsa f32 MTP again");
  SequenceInput last = in;
  last.all_hidden = false;
  ASSERT_TRUE(again->Step({&last, 1}, nullptr, &plain).ok());
  ASSERT_EQ(plain[0].size(), static_cast<size_t>(d));
  EXPECT_EQ(0, std::memcmp(plain[0].data(), hg[0].data() + 11 * d, d * sizeof(float)));

  // The MTP block over positions 0..11, each with the token after it (the 13th token last).
  auto mtp = [&](Executor& ex, const std::vector<float>& hidden) {
    SequenceInput r;
    r.tokens.assign(seq.tokens.begin() + 1, seq.tokens.begin() + 13);
    r.block_table = in.block_table;
    r.mtp_hidden = hidden;
    auto l = ex.MtpStep({&r, 1});
    EXPECT_TRUE(l.ok()) << l.status();
    return l.ok() ? (*l)[0] : std::vector<float>{};
  };
  const std::vector<float> mg = mtp(*gpu, hg[0]), mc = mtp(*cpu, hc[0]);
  ASSERT_EQ(mg.size(), static_cast<size_t>(V));
  ASSERT_EQ(mc.size(), mg.size());
  double max_logit = 0, diff = 0;
  for (int64_t i = 0; i < V; ++i) {
    max_logit = std::max(max_logit, std::fabs(double{mc[i]}));
    diff = std::max(diff, std::fabs(double{mg[i]} - mc[i]));
  }
  EXPECT_LE(diff, 2e-4 * max_logit + 1e-3) << "MTP logits, GPU vs CPU";
  EXPECT_EQ(std::max_element(mg.begin(), mg.end()) - mg.begin(),
            std::max_element(mc.begin(), mc.end()) - mc.begin())
      << "the draft";
}

INSTANTIATE_TEST_SUITE_P(Architectures, BatchInvariance,
                         ::testing::Values("llama", "qwen3moe", "deepseek2"), ArchName);

// f: a device ordinal that does not exist is refused, naming it.
// The DSA indexer takes its query rows in pieces when the scores would exceed their budget
// (long contexts); each row's scores and top-k depend on that row alone, so pieces of one row
// give the logits of one pass, bit for bit. The budget comes from the environment at Create.
TEST(CudaExecutor, IndexerInPiecesEqualsOnePass) {
  TESSERA_REQUIRE_GPU();
  const Model& m = FindModel("glm-dsa");
  const std::string path = ModelPath(m);
  auto whole = Make(path, Gpu(kF16), "glm-dsa, indexer in one pass");
  setenv("TESSERA_CUDA_INDEXER_SCORE_BYTES", "256", 1);  // one query row per pass
  auto pieces = Make(path, Gpu(kF16), "glm-dsa, indexer row by row");
  unsetenv("TESSERA_CUDA_INDEXER_SCORE_BYTES");
  ASSERT_TRUE(whole && pieces);
  const int vocab = static_cast<int>(whole->hparams().n_vocab);
  std::vector<int> prompts;
  const std::vector<Seq> seqs = Batch(3, vocab, &prompts);
  const Outcome a = RunScript(*whole, seqs, prompts, /*trace=*/true);
  const Outcome b = RunScript(*pieces, seqs, prompts, /*trace=*/true);
  ASSERT_EQ(a.error, "");
  ASSERT_EQ(b.error, "");
  std::string where;
  EXPECT_TRUE(BitwiseEqual(a, b, &where)) << "first difference at " << where;
}

TEST(CudaExecutor, RefusesADeviceThatDoesNotExist) {
  TESSERA_REQUIRE_GPU();
  if (OnCpu()) GTEST_SKIP() << "dry run on the CPU: no device ordinal to check";
  const int count = static_cast<int>(cuda::ListDevices().size());
  ExecutorOptions o = Gpu(kF16);
  o.gpu = count;  // one past the last
  auto ex = Executor::Create(ModelPath(FindModel("llama")), o);
  ASSERT_FALSE(ex.ok()) << "Create with gpu = " << count << " (" << count
                        << " devices visible) succeeded; expected an error naming the ordinal";
  const std::string msg = absl::AsciiStrToLower(std::string(ex.status().message()));
  EXPECT_NE(msg.find(std::to_string(count)), std::string::npos) << ex.status();
  EXPECT_TRUE(msg.find("gpu") != std::string::npos || msg.find("cuda") != std::string::npos ||
              msg.find("device") != std::string::npos)
      << ex.status();
}

// f: kv_tokens 0 sizes the cache from the device's memory, and all of it is usable: a
// sequence cached in its first two blocks and one cached in its last two give the logits of
// a small cache, bit for bit (same kernels and step buffers; only the addresses differ, and
// at this size offsets pass 2^31 elements: 32-bit index arithmetic would show here).
TEST(CudaExecutor, PlansTheCacheFromDeviceMemory) {
  TESSERA_REQUIRE_GPU();
  const std::string path = ModelPath(FindModel("llama"));
  auto small = Make(path, Gpu(kF16), "llama kv_tokens 512");
  ASSERT_NE(small, nullptr);
  const int vocab = static_cast<int>(small->hparams().n_vocab);
  const std::vector<int> prompt = {12};  // then 6 decode steps, across a block boundary
  const Outcome want = RunScript(*small, {{Tokens(18, 5, vocab), 0, "S"}}, prompt, false);
  ASSERT_EQ(want.error, "");
  small.reset();

  ExecutorOptions o = Gpu(kF16);
  o.kv_tokens = 0;
  o.gpu_memory_utilization = 0.5;
  auto ex = Make(path, o, "llama kv_tokens 0");
  ASSERT_NE(ex, nullptr);
  const int n_blocks = ex->n_blocks();
  std::printf("kv_plan n_blocks=%d block_size=%d tokens=%lld\n", n_blocks, ex->block_size(),
              static_cast<long long>(n_blocks) * ex->block_size());
  ASSERT_GT(n_blocks, 512 / kBlock) << "kv_tokens 0 planned fewer blocks than a 512-token cache";
  for (int first : {0, n_blocks - 2}) {
    const Outcome got = RunScript(*ex, {{Tokens(18, 5, vocab), first, "S"}}, prompt, false);
    ASSERT_EQ(got.error, "") << "blocks from " << first;
    std::string where;
    EXPECT_TRUE(BitwiseEqual(got, want, &where))
        << "a sequence in blocks " << first << ", " << first + 1 << " of " << n_blocks
        << " differs from a small cache's at " << where << "; "
        << Compare(got, want, INFINITY).Describe();
  }
}

// The weights live on the device: Create takes at least the shard's size of device memory.
TEST(CudaExecutor, HoldsItsWeightsOnTheDevice) {
  TESSERA_REQUIRE_GPU();
  if (OnCpu()) GTEST_SKIP() << "dry run on the CPU";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  auto ex = Make(ModelPath(FindModel("llama")), Gpu(kF16), "llama f16");
  ASSERT_NE(ex, nullptr);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  const double used = static_cast<double>(free_before) - static_cast<double>(free_after);
  std::printf("device_memory model_bytes=%llu used_by_create=%.0f device=\"%s\"\n",
              static_cast<unsigned long long>(ex->planned_read_bytes()), used,
              ex->device_name().c_str());
  EXPECT_GE(used, 0.5 * static_cast<double>(ex->planned_read_bytes()))
      << "device memory fell by " << used << " bytes for a " << ex->planned_read_bytes()
      << "-byte shard: is the forward pass on the GPU?";
}

}  // namespace
}  // namespace tessera::executor
