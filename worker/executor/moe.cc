// Mixture of experts (spec 5.6): routing per token, then experts evaluated grouped by expert
// across the batch (one matmul per expert over all tokens routed to it), plus the shared
// experts as one dense SwiGLU.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/model/constants.h"
#include "worker/executor/executor_impl.h"

namespace tessera::executor {
namespace {

struct Route {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

// Steps 2-8 of spec 5.6 for one token's router logits z.
Route RouteToken(const float* z, const model::HyperParams& hp, const std::vector<float>& bias,
                 bool always_norm) {
  const int64_t E = hp.n_expert, k = hp.n_expert_used;
  std::vector<float> p(z, z + E), q(E);
  if (hp.gating == model::GatingFunc::kSigmoid) {
    for (float& x : p) x = 1.0f / (1.0f + std::exp(-x));
  } else {
    cpu::Softmax(p.data(), E);
  }
  for (int64_t e = 0; e < E; ++e) q[e] = p[e] + (bias.empty() ? 0.0f : bias[e]);
  if (hp.n_expert_groups > 1) {
    // Group score = sum of its two largest selection scores; keep the best groups.
    const int64_t G = hp.n_expert_groups, per = E / G;
    std::vector<std::pair<float, int64_t>> groups(G);
    for (int64_t g = 0; g < G; ++g) {
      std::vector<float> s(q.begin() + g * per, q.begin() + (g + 1) * per);
      std::partial_sort(s.begin(), s.begin() + std::min<int64_t>(2, per), s.end(),
                        std::greater<>());
      groups[g] = {s[0] + (per > 1 ? s[1] : 0.0f), g};
    }
    std::sort(groups.begin(), groups.end(), [](auto& a, auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    for (int64_t i = hp.n_group_used; i < G; ++i) {
      const int64_t g = groups[i].second;
      for (int64_t e = g * per; e < (g + 1) * per; ++e)
        q[e] = -std::numeric_limits<float>::infinity();
    }
  }
  std::vector<int32_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return q[a] != q[b] ? q[a] > q[b] : a < b; });
  Route r;
  r.experts.assign(order.begin(), order.begin() + k);
  double sum = 0;
  for (int32_t e : r.experts) {
    r.weights.push_back(p[e]);  // the bias chooses, never weighs
    sum += p[e];
  }
  if (always_norm || hp.expert_weights_norm) {
    const float denom = static_cast<float>(std::max(sum, model::kExpertWeightSumFloor));
    for (float& w : r.weights) w /= denom;
  }
  if (hp.expert_weights_scale != 0.0f && hp.expert_weights_scale != 1.0f) {
    for (float& w : r.weights) w *= hp.expert_weights_scale;
  }
  return r;
}

}  // namespace

absl::Status Executor::Impl::MoeFfn(int layer, const Batch& b, const std::vector<float>& h,
                                    std::vector<float>& out) {
  const LayerWeights& L = layers[layer];
  // F: this rank's slice of every expert's hidden dim (all of it at tp 1).
  const int64_t T = b.size(), d = hp.n_embd, E = hp.n_expert, F = L.gate_exps.rows / E;
  std::vector<float> z(T * E);
  std::vector<Route> routes(T);
  std::vector<std::vector<int64_t>> tokens_of(E);
  {
    PhaseTimer timer(profile["router"]);
    if (auto s = MatMulPerVector(L.router, h.data(), T, z.data()); !s.ok()) return s;
    for (int64_t t = 0; t < T; ++t) {
      routes[t] = RouteToken(&z[t * E], hp, L.exp_probs_b, config.moe_always_norm);
      for (int32_t e : routes[t].experts) tokens_of[e].push_back(t);
    }
  }
  PhaseTimer timer(profile["experts"]);
  if (b.trace != nullptr) {
    auto& ex = b.trace->experts[layer];
    auto& wt = b.trace->expert_weights[layer];
    ex.clear();
    wt.clear();
    for (const Route& r : routes) {
      ex.push_back(r.experts);
      wt.push_back(r.weights);
    }
  }
  out.assign(T * d, 0.0f);
  // Adds expert e's output rows (down, n x d) for its tokens, weighted by their routes.
  auto combine = [&](int64_t e, const float* down) {
    const std::vector<int64_t>& ts = tokens_of[e];
    for (size_t i = 0; i < ts.size(); ++i) {
      const Route& r = routes[ts[i]];
      const float w =
          r.weights[std::find(r.experts.begin(), r.experts.end(), e) - r.experts.begin()];
      for (int64_t j = 0; j < d; ++j) out[ts[i] * d + j] += w * down[i * d + j];
    }
  };
  if (T < cpu::kPrefillBatch) {
    // Decode-sized steps: every chosen expert's gate and up products in one hand-off to the
    // threads, then every down product in another (per-vector kernels, as MatMulRows
    // takes below the prefill batch), instead of three hand-offs per expert. A token's row
    // of h is read in place, so its quantized form is shared by all its experts.
    std::vector<QuantMatrix> views;
    std::vector<int64_t> used;
    for (int64_t e = 0; e < E; ++e) {
      if (!tokens_of[e].empty()) used.push_back(e);
    }
    const size_t U = used.size();
    std::vector<std::vector<float>> xs(U), gates(U), ups(U), downs(U);
    views.reserve(3 * U);
    std::vector<Product> products;
    for (size_t u = 0; u < U; ++u) {
      const int64_t e = used[u];
      const std::vector<int64_t>& ts = tokens_of[e];
      const int64_t n = static_cast<int64_t>(ts.size());
      const float* x = &h[ts[0] * d];
      if (n > 1) {
        xs[u].resize(n * d);
        for (int64_t i = 0; i < n; ++i) std::copy_n(&h[ts[i] * d], d, &xs[u][i * d]);
        x = xs[u].data();
      }
      gates[u].resize(n * F);
      ups[u].resize(n * F);
      downs[u].resize(n * d);
      views.push_back(RowsOf(L.gate_exps, e * F, (e + 1) * F));
      views.push_back(RowsOf(L.up_exps, e * F, (e + 1) * F));
      views.push_back(RowsOf(L.down_exps, e * d, (e + 1) * d));
      products.push_back({&views[3 * u], x, gates[u].data(), n});
      products.push_back({&views[3 * u + 1], x, ups[u].data(), n});
    }
    if (auto s = MatMulMany(products, T); !s.ok()) return s;
    products.clear();
    for (size_t u = 0; u < U; ++u) {
      const int64_t n = static_cast<int64_t>(tokens_of[used[u]].size());
      cpu::SiluMul(gates[u].data(), ups[u].data(), n * F, gates[u].data());
      Round(gates[u].data(), n * F);
      products.push_back({&views[3 * u + 2], gates[u].data(), downs[u].data(), n});
    }
    if (auto s = MatMulMany(products, T); !s.ok()) return s;
    for (size_t u = 0; u < U; ++u) combine(used[u], downs[u].data());
  }
  std::vector<float> xe, gate, up, down;
  for (int64_t e = 0; e < E && T >= cpu::kPrefillBatch; ++e) {
    const std::vector<int64_t>& ts = tokens_of[e];
    if (ts.empty()) continue;
    const int64_t n = static_cast<int64_t>(ts.size());
    xe.resize(n * d);
    for (int64_t i = 0; i < n; ++i) std::copy_n(&h[ts[i] * d], d, &xe[i * d]);
    gate.resize(n * F);
    up.resize(n * F);
    down.resize(n * d);
    // Expert e's rows of the stacked 3-D tensors (spec 1: matrix e starts at row e * rows).
    std::vector<int> row_seq(n);
    for (int64_t i = 0; i < n; ++i) row_seq[i] = b.seq_of[ts[i]];
    if (auto s =
            MatMulRows(L.gate_exps, e * F, (e + 1) * F, xe.data(), n, gate.data(), F, &row_seq);
        !s.ok())
      return s;
    if (auto s = MatMulRows(L.up_exps, e * F, (e + 1) * F, xe.data(), n, up.data(), F, &row_seq);
        !s.ok())
      return s;
    cpu::SiluMul(gate.data(), up.data(), n * F, gate.data());
    Round(gate.data(), n * F);
    if (auto s =
            MatMulRows(L.down_exps, e * d, (e + 1) * d, gate.data(), n, down.data(), d, &row_seq);
        !s.ok()) {
      return s;
    }
    combine(e, down.data());
  }
  if (L.gate_sh.data != nullptr) {
    const int64_t S = L.gate_sh.rows;
    std::vector<float> g(T * S), u(T * S), y(T * d);
    if (auto s = MatMul(L.gate_sh, h.data(), T, g.data()); !s.ok()) return s;
    if (auto s = MatMul(L.up_sh, h.data(), T, u.data()); !s.ok()) return s;
    cpu::SiluMul(g.data(), u.data(), T * S, g.data());
    Round(g.data(), T * S);
    if (auto s = MatMul(L.down_sh, g.data(), T, y.data()); !s.ok()) return s;
    for (int64_t i = 0; i < T * d; ++i) out[i] += y[i];
  }
  return AllReduce(out);
}

}  // namespace tessera::executor
