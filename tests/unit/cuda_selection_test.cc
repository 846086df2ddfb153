// GPU top-k, MoE routing and sampling against float64 / exact computations of the rules in
// kernels/cuda/selection_kernels.h (spec 5.6, 12.4). Label `gpu`.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/selection_kernels.h"
#include "tests/unit/cuda_test_util.h"

namespace tessera::cuda {
namespace {

using testing::DeviceBuffer;

// Indices of the k best (higher value, then lower index), ascending.
std::vector<int32_t> BestIndices(const float* x, int n, int k) {
  std::vector<int32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return x[a] > x[b]; });
  idx.resize(std::min(k, n));
  std::sort(idx.begin(), idx.end());
  return idx;
}

class CudaSelection : public testing::GpuTest {};

TEST_F(CudaSelection, TopKWithTiesAndLengths) {
  std::mt19937_64 rng(30);
  const int rows = 4, n = 5000, k = 300;
  std::vector<float> x(rows * n);
  std::uniform_int_distribution<int> coarse(-50, 50);  // many ties
  for (float& v : x) v = static_cast<float>(coarse(rng)) * 0.25f;
  x[7] = -INFINITY;
  const std::vector<int32_t> lengths = {n, 100, 4999, 250};
  DeviceBuffer dx(x), dlen(lengths), dout(rows * k * 4);
  ASSERT_TRUE(
      TopK(dx.as<float>(), rows, n, k, dlen.as<int32_t>(), dout.as<int32_t>(), nullptr).ok());
  Sync();
  const std::vector<int32_t> got = dout.Download<int32_t>(rows * k);
  for (int r = 0; r < rows; ++r) {
    SCOPED_TRACE(r);
    std::vector<int32_t> want = BestIndices(&x[r * n], lengths[r], k);
    want.resize(k, -1);
    EXPECT_EQ(std::vector<int32_t>(got.begin() + r * k, got.begin() + (r + 1) * k), want);
  }
}

// Spec 5.6 in float64.
struct Route {
  std::vector<int> ids;  // in selection order
  std::vector<double> weights;
};
Route RouteRef(const float* z, const float* bias, const MoeRoutingArgs& a) {
  const int E = a.experts;
  std::vector<double> p(E), q(E);
  if (a.gating == MoeGating::kSoftmax) {
    const double m = *std::max_element(z, z + E);
    double s = 0;
    for (int e = 0; e < E; ++e) s += std::exp(z[e] - m);
    for (int e = 0; e < E; ++e) p[e] = std::exp(z[e] - m) / s;
  } else {
    for (int e = 0; e < E; ++e) p[e] = 1 / (1 + std::exp(-static_cast<double>(z[e])));
  }
  for (int e = 0; e < E; ++e) q[e] = p[e] + (bias ? bias[e] : 0.0);
  if (a.groups > 1) {
    const int size = E / a.groups;
    std::vector<std::pair<double, int>> g;
    for (int gi = 0; gi < a.groups; ++gi) {
      std::vector<double> s(q.begin() + gi * size, q.begin() + (gi + 1) * size);
      std::sort(s.rbegin(), s.rend());
      g.push_back({-(s[0] + s[1]), gi});
    }
    std::sort(g.begin(), g.end());
    std::vector<bool> keep(a.groups, false);
    for (int i = 0; i < a.topk_groups; ++i) keep[g[i].second] = true;
    for (int e = 0; e < E; ++e) {
      if (!keep[e / size]) q[e] = -INFINITY;
    }
  }
  std::vector<int> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return q[x] > q[y]; });
  Route r;
  double sum = 0;
  for (int j = 0; j < a.used; ++j) {
    r.ids.push_back(order[j]);
    r.weights.push_back(p[order[j]]);
    sum += p[order[j]];
  }
  for (double& w : r.weights) {
    if (a.norm_weights) w /= std::max(sum, 6.103515625e-5);
    if (a.weights_scale != 0 && a.weights_scale != 1) w *= a.weights_scale;
  }
  return r;
}

TEST_F(CudaSelection, MoeRoutingEveryVariant) {
  std::mt19937_64 rng(31);
  std::normal_distribution<float> d(0.0f, 2.0f);
  struct Case {
    const char* name;
    int experts, used, groups, topk_groups;
    MoeGating gating;
    bool bias, norm;
    float scale;
  };
  const Case cases[] = {
      {"qwen3moe: softmax, norm", 128, 8, 1, 1, MoeGating::kSoftmax, false, true, 1.0f},
      {"mixtral-like: softmax, no norm", 8, 2, 1, 1, MoeGating::kSoftmax, false, false, 0.0f},
      {"deepseek-v3: sigmoid, bias, groups", 256, 8, 8, 4, MoeGating::kSigmoid, true, true, 2.5f},
      {"glm4moe: sigmoid, bias, one group", 160, 8, 1, 1, MoeGating::kSigmoid, true, true, 1.0f},
      {"deepseek-v2: softmax, groups, scale", 160, 6, 8, 3, MoeGating::kSoftmax, false, false,
       16.0f},
  };
  const int tokens = 13;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<float> z(tokens * c.experts), bias(c.experts);
    for (float& v : z) v = d(rng);
    for (float& v : bias) v = 0.1f * d(rng);
    DeviceBuffer dz(z), dbias(bias), dids(tokens * c.used * 4), dw(tokens * c.used * 4);
    MoeRoutingArgs a;
    a.tokens = tokens;
    a.experts = c.experts;
    a.used = c.used;
    a.groups = c.groups;
    a.topk_groups = c.topk_groups;
    a.gating = c.gating;
    a.norm_weights = c.norm;
    a.weights_scale = c.scale;
    a.logits = dz.as<float>();
    a.bias = c.bias ? dbias.as<float>() : nullptr;
    a.ids = dids.as<int32_t>();
    a.weights = dw.as<float>();
    ASSERT_TRUE(MoeRoute(a, nullptr).ok());
    Sync();
    const std::vector<int32_t> ids = dids.Download<int32_t>(tokens * c.used);
    const std::vector<float> w = dw.Download<float>(tokens * c.used);
    for (int t = 0; t < tokens; ++t) {
      const Route want = RouteRef(&z[t * c.experts], c.bias ? bias.data() : nullptr, a);
      for (int j = 0; j < c.used; ++j) {
        EXPECT_EQ(ids[t * c.used + j], want.ids[j]) << "token " << t << " choice " << j;
        EXPECT_NEAR(w[t * c.used + j], want.weights[j], 1e-6 * std::max(1.0, want.weights[j]));
      }
    }
  }
}

// The documented sampling rule in float64 (top-k, top-p over its survivors at temperature 1,
// min-p, then the first survivor in id order whose running weight exceeds u·total).
int SampleRef(const std::vector<float>& x, const GpuSamplingParams& p) {
  const int n = static_cast<int>(x.size());
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
  if (p.temperature < 1e-5f) return order[0];
  std::vector<bool> alive(n, true);
  if (p.top_k > 0 && p.top_k < n) {
    for (int i = p.top_k; i < n; ++i) alive[order[i]] = false;
  }
  const double max = x[order[0]];
  if (p.top_p < 1.0f) {
    double z = 0;
    for (int i = 0; i < n; ++i) z += alive[i] ? std::exp(x[i] - max) : 0.0;
    double cum = 0;
    bool reached = false;
    for (int i : order) {
      if (!alive[i]) continue;
      if (reached) {
        alive[i] = false;
        continue;
      }
      cum += std::exp(x[i] - max);
      reached = cum >= p.top_p * z;
    }
  }
  for (int i = 0; i < n; ++i) {
    if (p.min_p > 0 && std::exp(x[i] - max) < p.min_p) alive[i] = false;
  }
  double total = 0;
  for (int i = 0; i < n; ++i) total += alive[i] ? std::exp((x[i] - max) / p.temperature) : 0.0;
  double run = 0;
  int last = order[0];
  for (int i = 0; i < n; ++i) {
    if (!alive[i]) continue;
    last = i;
    run += std::exp((x[i] - max) / p.temperature);
    if (run > p.uniform * total) return i;
  }
  return last;
}

TEST_F(CudaSelection, SamplingMatchesTheRule) {
  std::mt19937_64 rng(32);
  const int vocab = 32000;
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<GpuSamplingParams> params;
  for (float temperature : {0.0f, 0.7f, 1.0f}) {
    for (int top_k : {0, 1, 40}) {
      for (float top_p : {1.0f, 0.9f, 0.3f}) {
        for (float min_p : {0.0f, 0.05f}) {
          params.push_back({temperature, top_k, top_p, min_p, u(rng)});
        }
      }
    }
  }
  const int seqs = static_cast<int>(params.size());
  std::vector<float> logits(static_cast<size_t>(seqs) * vocab);
  for (float& v : logits) v = d(rng);
  DeviceBuffer dl(logits), dp(params), dt(seqs * 4);
  ASSERT_TRUE(
      Sample(dl.as<float>(), seqs, vocab, dp.as<GpuSamplingParams>(), dt.as<int32_t>(), nullptr)
          .ok());
  Sync();
  const std::vector<int32_t> got = dt.Download<int32_t>(seqs);
  int mismatches = 0;
  for (int s = 0; s < seqs; ++s) {
    const std::vector<float> row(logits.begin() + static_cast<int64_t>(s) * vocab,
                                 logits.begin() + static_cast<int64_t>(s + 1) * vocab);
    const int want = SampleRef(row, params[s]);
    if (got[s] != want) {
      ++mismatches;
      ADD_FAILURE() << "sequence " << s << " (t " << params[s].temperature << ", k "
                    << params[s].top_k << ", p " << params[s].top_p << ", min_p " << params[s].min_p
                    << ", u " << params[s].uniform << "): gpu " << got[s] << ", reference " << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// The sampled token's log-probability: log-softmax in float64 over the row, NaN and +inf read
// as the sampler reads them, NaN for a token outside the vocabulary.
TEST_F(CudaSelection, ChosenLogprobsAreTheLogSoftmax) {
  std::mt19937_64 rng(33);
  const int vocab = 50000, seqs = 5;
  std::normal_distribution<float> d(0.0f, 4.0f);
  std::vector<float> logits(static_cast<size_t>(seqs) * vocab);
  for (float& v : logits) v = d(rng);
  logits[1 * vocab + 7] = NAN;       // reads as −inf: its log-probability is −inf
  logits[2 * vocab + 9] = INFINITY;  // reads as the largest float: probability 1
  const std::vector<int32_t> tokens = {123, 7, 9, 49999, vocab};  // the last: out of range
  DeviceBuffer dl(logits), dt(tokens), dout(seqs * 4);
  ASSERT_TRUE(
      ChosenLogprobs(dl.as<float>(), seqs, vocab, dt.as<int32_t>(), dout.as<float>(), nullptr)
          .ok());
  Sync();
  const std::vector<float> got = dout.Download<float>(seqs);
  for (int s : {0, 3}) {
    const float* x = logits.data() + static_cast<int64_t>(s) * vocab;
    double m = -INFINITY, z = 0;
    for (int i = 0; i < vocab; ++i) m = std::max<double>(m, x[i]);
    for (int i = 0; i < vocab; ++i) z += std::exp(x[i] - m);
    const double want = x[tokens[s]] - m - std::log(z);
    EXPECT_NEAR(got[s], want, 1e-5 * (1 + std::fabs(want))) << "sequence " << s;
  }
  EXPECT_EQ(got[1], -INFINITY);
  EXPECT_EQ(got[2], 0.0f);
  EXPECT_TRUE(std::isnan(got[4]));
  EXPECT_FALSE(ChosenLogprobs(nullptr, 1, vocab, dt.as<int32_t>(), dout.as<float>(), nullptr).ok());
}

}  // namespace
}  // namespace tessera::cuda
