// Mixture of experts on the CPU (CpuOps; spec 5.6): routing per token, then the experts'
// products grouped by expert across the batch (one product per expert over all the
// (token, choice) rows routed to it), and their weighted combination.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/model/constants.h"
#include "worker/executor/cpu_ops.h"

namespace tessera::executor {
namespace {

struct RouteChoice {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

// Steps 2-8 of spec 5.6 for one token's router logits z.
RouteChoice RouteToken(const float* z, const model::HyperParams& hp, const std::vector<float>& bias,
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
  RouteChoice r;
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

absl::StatusOr<int64_t> CpuOps::Route(int layer, Act logits, const Vec& bias) {
  const int64_t T = logits.rows, K = impl_.hp.n_expert_used, E = impl_.hp.n_expert;
  // Expert parallelism: this rank holds experts [e0, e1) and computes only their choices.
  const model::BlockShare& share = impl_.shares[layer];
  const int64_t e0 = share.expert_begin, e1 = share.expert_end;
  expert0_ = e0;
  route_experts_.resize(T);
  route_weights_.resize(T);
  for (int64_t t = 0; t < T; ++t) {
    RouteChoice r = RouteToken(Row(logits, t), impl_.hp, bias, impl_.config.moe_always_norm);
    route_experts_[t] = std::move(r.experts);
    route_weights_[t] = std::move(r.weights);
  }
  if (b_.trace != nullptr) {
    b_.trace->experts[layer] = route_experts_;
    b_.trace->expert_weights[layer] = route_weights_;
  }
  // The per-choice rows grouped by expert: expert e's (token, choice) pairs, in token order,
  // are rows [expert_begin_[e], expert_begin_[e + 1]), so an expert's products read and
  // write contiguous rows. Choices of experts this rank does not hold get no row (-1).
  std::vector<int64_t> count(E, 0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = route_experts_[t][k];
      if (e >= e0 && e < e1) ++count[e];
    }
  }
  expert_begin_.assign(E + 1, 0);
  for (int64_t e = 0; e < E; ++e) expert_begin_[e + 1] = expert_begin_[e] + count[e];
  choice_row_.resize(T * K);
  choice_token_.resize(T * K);
  std::vector<int64_t> next(expert_begin_.begin(), expert_begin_.end() - 1);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = route_experts_[t][k];
      if (e < e0 || e >= e1) {
        choice_row_[t * K + k] = -1;
        continue;
      }
      const int64_t row = next[e]++;
      choice_row_[t * K + k] = row;
      choice_token_[row] = t;
    }
  }
  return expert_begin_[E];
}

absl::Status CpuOps::ExpertProducts(std::initializer_list<Expert> products, Act x,
                                    bool per_choice) {
  const int64_t T = static_cast<int64_t>(route_experts_.size());
  const int64_t K = impl_.hp.n_expert_used, E = impl_.hp.n_expert;
  TESSERA_RETURN_IF_ERROR(NeedContiguous(x, "ExpertProducts"));
  const int64_t rows = expert_begin_[E];  // this rank's choices
  if (x.rows != (per_choice ? rows : T)) {
    return absl::InternalError(absl::StrCat("cpu ops: ExpertProducts over ", x.rows,
                                            " input rows for ", T, " tokens of ", K, " choices (",
                                            rows, " on this rank)"));
  }
  for (const Expert& ex : products) TESSERA_RETURN_IF_ERROR(NeedContiguous(ex.y, "ExpertProducts"));
  std::vector<int64_t> used;
  for (int64_t e = 0; e < E; ++e) {
    if (expert_begin_[e + 1] > expert_begin_[e]) used.push_back(e);
  }
  const size_t U = used.size(), P = products.size();
  // Each used expert's input rows: per-choice inputs are already grouped by expert; token
  // rows are gathered (read in place when the expert has one).
  std::vector<std::vector<float>> xs(U);
  std::vector<const float*> x_of(U);
  for (size_t u = 0; u < U; ++u) {
    const int64_t r0 = expert_begin_[used[u]], n = expert_begin_[used[u] + 1] - r0;
    if (per_choice) {
      x_of[u] = Row(x, r0);
      continue;
    }
    x_of[u] = Row(x, choice_token_[r0]);
    if (n > 1) {
      xs[u].resize(n * x.cols);
      for (int64_t i = 0; i < n; ++i) {
        std::copy_n(Row(x, choice_token_[r0 + i]), x.cols, &xs[u][i * x.cols]);
      }
      x_of[u] = xs[u].data();
    }
  }
  const bool by_sequence = std::any_of(products.begin(), products.end(), [&](const Expert& ex) {
    return PrefillRowsTakeOtherKernels(*ex.stack);
  });
  if (T < cpu::kPrefillBatch && !by_sequence) {
    // Decode-sized steps: every chosen expert's products in one hand-off to the threads
    // (per-vector kernels, as MatMulRows takes below the prefill batch), instead of one per
    // expert and product. A one-row input is read in place, so its quantized form is shared
    // by all its experts.
    std::vector<QuantMatrix> views(U * P);
    std::vector<MatMulProduct> many;
    for (size_t u = 0; u < U; ++u) {
      const int64_t e = used[u], r0 = expert_begin_[e], n = expert_begin_[e + 1] - r0;
      size_t p = 0;
      for (const Expert& ex : products) {
        views[u * P + p] =
            RowsOf(*ex.stack, (e - expert0_) * ex.rows, (e - expert0_ + 1) * ex.rows);
        many.push_back({&views[u * P + p], x_of[u], Row(ex.y, r0), n});
        ++p;
      }
    }
    TESSERA_RETURN_IF_ERROR(MatMulMany(many, T));
  } else {
    for (size_t u = 0; u < U; ++u) {
      const int64_t e = used[u], r0 = expert_begin_[e], n = expert_begin_[e + 1] - r0;
      // Each row's sequence: a row's bits depend on its sequence's chunk, never on its
      // neighbours' routing.
      std::vector<int> row_seq(n);
      for (int64_t i = 0; i < n; ++i) row_seq[i] = b_.seq_of[choice_token_[r0 + i]];
      for (const Expert& ex : products) {
        // Expert e's rows of the stacked 3-D tensor (spec 1: matrix e starts at row e · rows;
        // this rank's stack starts at its first expert).
        const int64_t m = e - expert0_;
        TESSERA_RETURN_IF_ERROR(MatMulRows(*ex.stack, m * ex.rows, (m + 1) * ex.rows, x_of[u], n,
                                           Row(ex.y, r0), ex.rows, &row_seq));
      }
    }
  }
  for (const Expert& ex : products) Round(ex.y);
  return absl::OkStatus();
}

absl::Status CpuOps::Combine(Act down, Act y) {
  const int64_t T = y.rows, d = y.cols, K = impl_.hp.n_expert_used;
  std::vector<int64_t> order(K);
  for (int64_t t = 0; t < T; ++t) {
    float* out = Row(y, t);
    std::fill(out, out + d, 0.0f);
    // Summed in expert order, whatever the order of choice.
    const std::vector<int32_t>& ex = route_experts_[t];
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ex[a] < ex[b]; });
    for (int64_t k : order) {
      if (choice_row_[t * K + k] < 0) continue;  // another rank's expert
      const float w = route_weights_[t][k];
      const float* in = Row(down, choice_row_[t * K + k]);
      for (int64_t j = 0; j < d; ++j) out[j] += w * in[j];
    }
  }
  Round(y);
  return absl::OkStatus();
}

}  // namespace tessera::executor
