#include "kernels/reference/model_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/model/arch.h"
#include "common/model/hparams.h"
#include "common/quant/dequantize.h"
#include "kernels/reference/nn_ref.h"

namespace tessera::reference {
namespace {

using Vec = std::vector<double>;

class Weights {
 public:
  explicit Weights(const gguf::GgufModel& m) : m_(m) {}
  // The tensor as doubles in file order; empty when absent.
  Vec Get(const std::string& name) const {
    const gguf::TensorInfo* t = m_.FindTensor(name);
    if (t == nullptr) return {};
    std::vector<float> f(t->n_elements);
    if (!quant::DequantizeToFloat(t->type, m_.TensorData(*t), t->n_elements, f.data()).ok())
      return {};
    return Vec(f.begin(), f.end());
  }

 private:
  const gguf::GgufModel& m_;
};

// y = W x for W stored {cols, rows} (row-major [rows][cols]); `row0` selects a sub-matrix.
Vec MatVec(const Vec& w, const Vec& x, size_t row0 = 0, size_t rows = 0) {
  const size_t cols = x.size();
  if (rows == 0) rows = w.size() / cols - row0;
  Vec y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double s = 0;
    const double* wr = &w[(row0 + r) * cols];
    for (size_t c = 0; c < cols; ++c) s += wr[c] * x[c];
    y[r] = s;
  }
  return y;
}

Vec Slice(const Vec& v, size_t at, size_t n) { return Vec(v.begin() + at, v.begin() + at + n); }

Vec SwiGlu(const Vec& gate, const Vec& up, const Vec& down, const Vec& x, size_t g0 = 0,
           size_t ff = 0, size_t d0 = 0, size_t d = 0) {
  Vec g = MatVec(gate, x, g0, ff), u = MatVec(up, x, g0, ff);
  for (size_t i = 0; i < g.size(); ++i) g[i] = SiluRef(g[i]) * u[i];
  return MatVec(down, g, d0, d);
}

}  // namespace

absl::StatusOr<std::vector<double>> ForwardRef(const gguf::GgufModel& m,
                                               const std::vector<int32_t>& tokens,
                                               RefTrace* trace) {
  const std::string arch = m.metadata().GetString("general.architecture").value_or("");
  const model::ArchSpec* spec = model::FindArch(arch);
  if (spec == nullptr)
    return absl::UnimplementedError(absl::StrCat("reference: architecture ", arch));
  std::vector<model::KeyProblem> problems;
  const model::HyperParams hp =
      model::LoadHyperParams(*spec, arch, m.metadata(), nullptr, &problems);
  for (const auto& p : problems) {
    if (p.error) return absl::InvalidArgumentError(p.message);
  }
  Weights W(m);
  const size_t d = hp.n_embd, T = tokens.size(), V = hp.n_vocab;
  const bool mla = arch == "deepseek2" || arch == "glm-dsa";
  const bool neox = arch == "qwen2" || arch == "qwen3" || arch == "qwen3moe" || arch == "glm4moe";

  // RoPE and the attention scale (spec 5.2, 5.3, 10.6).
  RopeRefParams rp;
  rp.n_rot = static_cast<int>(hp.n_rot);
  rp.freq_base = hp.rope_freq_base;
  rp.neox = neox;
  const double s_rope =
      hp.rope_scaling_factor > 0 && hp.rope_scaling_type != "none" ? hp.rope_scaling_factor : 1.0;
  rp.freq_scale = 1.0 / s_rope;
  rp.yarn = hp.rope_scaling_type == "yarn";
  rp.yarn_orig_ctx = static_cast<int>(hp.rope_orig_ctx);
  rp.freq_factors = W.Get("rope_freqs.weight");
  const bool log_mul = arch == "deepseek2" && hp.yarn_log_multiplier != 0;
  if (rp.yarn) {
    if (log_mul) {
      const double mu_all = hp.yarn_log_multiplier / 0.1, mu = mu_all != 1 ? mu_all : 1;
      auto g = [&](double x) { return s_rope <= 1 ? 1.0 : 1 + 0.1 * x * std::log(s_rope); };
      rp.magnitude = g(mu) / g(mu_all);
    } else {
      rp.magnitude = (1 + 0.1 * std::log(s_rope)) * hp.rope_attn_factor;
    }
  }
  double scale;
  if (mla) {
    const double l_mul = log_mul ? hp.yarn_log_multiplier / 0.1 : 0;
    const double ms = rp.magnitude * (1 + 0.1 * l_mul * std::log(s_rope));
    scale = ms * ms / std::sqrt(static_cast<double>(hp.key_length_mla));
  } else {
    scale = 1 / std::sqrt(static_cast<double>(hp.head_dim_k));
  }

  Vec embd = W.Get("token_embd.weight");
  std::vector<Vec> x(T);
  for (size_t t = 0; t < T; ++t) x[t] = Slice(embd, tokens[t] * d, d);
  std::vector<std::vector<int32_t>> dsa_keep(T);

  for (uint32_t l = 0; l < hp.n_layer; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    const size_t H = hp.n_head[l];
    std::vector<Vec> hn(T);
    Vec attn_norm = W.Get(b + "attn_norm.weight");
    for (size_t t = 0; t < T; ++t) hn[t] = RmsNormRef(x[t], attn_norm, hp.rms_eps);
    std::vector<Vec> attn_out(T);
    if (!mla) {
      const size_t Hkv = hp.n_head_kv[l], dk = hp.head_dim_k, dv = hp.head_dim_v;
      Vec wq = W.Get(b + "attn_q.weight"), wk = W.Get(b + "attn_k.weight"),
          wv = W.Get(b + "attn_v.weight");
      Vec bq = W.Get(b + "attn_q.bias"), bk = W.Get(b + "attn_k.bias"),
          bv = W.Get(b + "attn_v.bias");
      Vec qn = W.Get(b + "attn_q_norm.weight"), kn = W.Get(b + "attn_k_norm.weight");
      Vec wo = W.Get(b + "attn_output.weight");
      std::vector<Vec> Q(T), K(T), Vv(T);
      for (size_t t = 0; t < T; ++t) {
        Q[t] = MatVec(wq, hn[t]);
        K[t] = MatVec(wk, hn[t]);
        Vv[t] = MatVec(wv, hn[t]);
        for (size_t i = 0; i < bq.size(); ++i) Q[t][i] += bq[i];
        for (size_t i = 0; i < bk.size(); ++i) K[t][i] += bk[i];
        for (size_t i = 0; i < bv.size(); ++i) Vv[t][i] += bv[i];
        auto rot = [&](Vec& all, size_t heads, const Vec& norm) {
          for (size_t hh = 0; hh < heads; ++hh) {
            Vec head = Slice(all, hh * dk, dk);
            if (!norm.empty()) head = RmsNormRef(head, norm, hp.rms_eps);
            head = RopeRef(head, static_cast<int64_t>(t), rp);
            std::copy(head.begin(), head.end(), all.begin() + hh * dk);
          }
        };
        rot(Q[t], H, qn);
        rot(K[t], Hkv, kn);
      }
      for (size_t t = 0; t < T; ++t) {
        Vec o(H * dv, 0.0);
        for (size_t hh = 0; hh < H; ++hh) {
          const size_t g = hh / (H / Hkv);
          Vec sc(t + 1);
          for (size_t p = 0; p <= t; ++p) {
            double s = 0;
            for (size_t i = 0; i < dk; ++i) s += Q[t][hh * dk + i] * K[p][g * dk + i];
            sc[p] = s * scale;
          }
          sc = SoftmaxRef(sc);
          for (size_t p = 0; p <= t; ++p) {
            for (size_t i = 0; i < dv; ++i) o[hh * dv + i] += sc[p] * Vv[p][g * dv + i];
          }
        }
        attn_out[t] = MatVec(wo, o);
      }
    } else {
      // MLA, naive form (spec 10.3 legacy): per-head keys and values from kv_b.
      const size_t c = hp.kv_lora_rank, r = hp.n_rot, dq = hp.key_length_mla, n = dq - r;
      const size_t v = hp.value_length_mla;
      Vec kv_b = W.Get(b + "attn_kv_b.weight");
      if (kv_b.empty()) {
        // Reassemble HF kv_b_proj [H*(n+v)][c] from attn_k_b {n,c,H} / attn_v_b {c,v,H} (10.4).
        Vec kb = W.Get(b + "attn_k_b.weight"), vb = W.Get(b + "attn_v_b.weight");
        kv_b.assign(H * (n + v) * c, 0.0);
        for (size_t hh = 0; hh < H; ++hh) {
          for (size_t j = 0; j < c; ++j) {
            for (size_t i = 0; i < n; ++i)
              kv_b[(hh * (n + v) + i) * c + j] = kb[(hh * c + j) * n + i];
            for (size_t e = 0; e < v; ++e)
              kv_b[(hh * (n + v) + n + e) * c + j] = vb[(hh * v + e) * c + j];
          }
        }
      }
      Vec wq_a = W.Get(b + "attn_q_a.weight"), q_a_norm = W.Get(b + "attn_q_a_norm.weight");
      Vec wq_b = W.Get(b + "attn_q_b.weight"), wq = W.Get(b + "attn_q.weight");
      Vec wkv_a = W.Get(b + "attn_kv_a_mqa.weight"), kv_a_norm = W.Get(b + "attn_kv_a_norm.weight");
      Vec wo = W.Get(b + "attn_output.weight");
      std::vector<Vec> Q(T), Kn(T), Vh(T), Kr(T), cq(T);
      RopeRefParams rr = rp;
      rr.n_rot = static_cast<int>(r);
      for (size_t t = 0; t < T; ++t) {
        if (!wq_a.empty()) {
          cq[t] = RmsNormRef(MatVec(wq_a, hn[t]), q_a_norm, hp.rms_eps);
          Q[t] = MatVec(wq_b, cq[t]);
        } else {
          Q[t] = MatVec(wq, hn[t]);
        }
        for (size_t hh = 0; hh < H; ++hh) {
          Vec rope = RopeRef(Slice(Q[t], hh * dq + n, r), static_cast<int64_t>(t), rr);
          std::copy(rope.begin(), rope.end(), Q[t].begin() + hh * dq + n);
        }
        Vec kv = MatVec(wkv_a, hn[t]);
        Vec ckv = RmsNormRef(Slice(kv, 0, c), kv_a_norm, hp.rms_eps);
        Kr[t] = RopeRef(Slice(kv, c, r), static_cast<int64_t>(t), rr);
        Vec full = MatVec(kv_b, ckv);  // H x (n + v)
        Kn[t] = full;
      }
      // DSA indexer (spec 12.4), "full" layers; shared layers reuse the last selection.
      const bool dsa = arch == "glm-dsa";
      if (dsa && l < hp.indexer_full.size() && hp.indexer_full[l]) {
        const size_t HI = hp.indexer_heads, DI = hp.indexer_head_dim;
        Vec iq = W.Get(b + "indexer.attn_q_b.weight"), ik = W.Get(b + "indexer.attn_k.weight");
        Vec kw = W.Get(b + "indexer.k_norm.weight"), kb = W.Get(b + "indexer.k_norm.bias");
        Vec ip = W.Get(b + "indexer.proj.weight");
        std::vector<Vec> qi(T), ki(T), wi(T);
        for (size_t t = 0; t < T; ++t) {
          qi[t] = MatVec(iq, cq[t]);
          for (size_t hh = 0; hh < HI; ++hh) {
            Vec rope = RopeRef(Slice(qi[t], hh * DI, DI), static_cast<int64_t>(t), rr);
            std::copy(rope.begin(), rope.end(), qi[t].begin() + hh * DI);
          }
          ki[t] =
              RopeRef(LayerNormRef(MatVec(ik, hn[t]), kw, kb, 1e-6), static_cast<int64_t>(t), rr);
          wi[t] = MatVec(ip, hn[t]);
          for (double& w : wi[t]) w /= std::sqrt(static_cast<double>(DI * HI));
        }
        for (size_t t = 0; t < T; ++t) {
          std::vector<std::pair<double, int32_t>> score;
          for (size_t j = 0; j <= t; ++j) {
            double s = 0;
            for (size_t hh = 0; hh < HI; ++hh) {
              double dot = 0;
              for (size_t i = 0; i < DI; ++i) dot += qi[t][hh * DI + i] * ki[j][i];
              s += wi[t][hh] * std::max(0.0, dot);
            }
            score.push_back({s, static_cast<int32_t>(j)});
          }
          std::sort(score.begin(), score.end(), [](auto& a, auto& b2) {
            return a.first != b2.first ? a.first > b2.first : a.second < b2.second;
          });
          dsa_keep[t].clear();
          for (size_t i = 0; i < std::min<size_t>(hp.indexer_top_k, score.size()); ++i) {
            dsa_keep[t].push_back(score[i].second);
          }
          std::sort(dsa_keep[t].begin(), dsa_keep[t].end());
        }
      }
      if (dsa && trace) trace->dsa_keys[l] = dsa_keep;
      for (size_t t = 0; t < T; ++t) {
        Vec o(H * v, 0.0);
        for (size_t hh = 0; hh < H; ++hh) {
          Vec sc;
          std::vector<size_t> keys;
          for (size_t p = 0; p <= t; ++p) {
            if (dsa && !std::binary_search(dsa_keep[t].begin(), dsa_keep[t].end(),
                                           static_cast<int32_t>(p)))
              continue;
            double s = 0;
            for (size_t i = 0; i < n; ++i) s += Q[t][hh * dq + i] * Kn[p][hh * (n + v) + i];
            for (size_t i = 0; i < r; ++i) s += Q[t][hh * dq + n + i] * Kr[p][i];
            sc.push_back(s * scale);
            keys.push_back(p);
          }
          sc = SoftmaxRef(sc);
          for (size_t k = 0; k < keys.size(); ++k) {
            for (size_t e = 0; e < v; ++e)
              o[hh * v + e] += sc[k] * Kn[keys[k]][hh * (n + v) + n + e];
          }
        }
        attn_out[t] = MatVec(wo, o);
      }
    }
    for (size_t t = 0; t < T; ++t) {
      for (size_t i = 0; i < d; ++i) x[t][i] += attn_out[t][i];
    }

    // FFN: dense SwiGLU, or MoE (spec 5.6) + shared experts.
    Vec ffn_norm = W.Get(b + "ffn_norm.weight");
    if (ffn_norm.empty()) ffn_norm = W.Get(b + "post_attention_norm.weight");
    const bool moe = hp.is_moe_block(l);
    Vec router = W.Get(b + "ffn_gate_inp.weight"), bias = W.Get(b + "exp_probs_b.bias");
    Vec ge = W.Get(b + "ffn_gate_exps.weight"), ue = W.Get(b + "ffn_up_exps.weight");
    Vec de = W.Get(b + "ffn_down_exps.weight");
    Vec gs = W.Get(b + "ffn_gate_shexp.weight"), us = W.Get(b + "ffn_up_shexp.weight");
    Vec ds = W.Get(b + "ffn_down_shexp.weight");
    Vec g = W.Get(b + "ffn_gate.weight"), u = W.Get(b + "ffn_up.weight"),
        dn = W.Get(b + "ffn_down.weight");
    if (trace && moe) trace->experts[l].assign(T, {});
    for (size_t t = 0; t < T; ++t) {
      Vec h = RmsNormRef(x[t], ffn_norm, hp.rms_eps);
      Vec y(d, 0.0);
      if (!moe) {
        y = SwiGlu(g, u, dn, h);
      } else {
        const size_t E = hp.n_expert, k = hp.n_expert_used, F = hp.n_ff_exp;
        Vec z = MatVec(router, h), p(E), q(E);
        if (hp.gating == model::GatingFunc::kSigmoid) {
          for (size_t e = 0; e < E; ++e) p[e] = 1 / (1 + std::exp(-z[e]));
        } else {
          p = SoftmaxRef(z);
        }
        for (size_t e = 0; e < E; ++e) q[e] = p[e] + (bias.empty() ? 0 : bias[e]);
        if (hp.n_expert_groups > 1) {
          const size_t G = hp.n_expert_groups, per = E / G;
          std::vector<std::pair<double, size_t>> gscore;
          for (size_t gi = 0; gi < G; ++gi) {
            Vec s = Slice(q, gi * per, per);
            std::sort(s.begin(), s.end(), std::greater<>());
            gscore.push_back({s[0] + (per > 1 ? s[1] : 0), gi});
          }
          std::sort(gscore.begin(), gscore.end(), [](auto& a, auto& b2) {
            return a.first != b2.first ? a.first > b2.first : a.second < b2.second;
          });
          for (size_t i = hp.n_group_used; i < G; ++i) {
            for (size_t e = gscore[i].second * per; e < (gscore[i].second + 1) * per; ++e) {
              q[e] = -std::numeric_limits<double>::infinity();
            }
          }
        }
        std::vector<size_t> idx(E);
        std::iota(idx.begin(), idx.end(), 0);
        std::sort(idx.begin(), idx.end(),
                  [&](size_t a, size_t b2) { return q[a] != q[b2] ? q[a] > q[b2] : a < b2; });
        idx.resize(k);
        double sum = 0;
        for (size_t e : idx) sum += p[e];
        const bool norm = arch == "qwen3moe" || hp.expert_weights_norm;
        for (size_t e : idx) {
          double w = p[e];
          if (norm) w /= std::max(sum, 6.103515625e-5);
          if (hp.expert_weights_scale != 0 && hp.expert_weights_scale != 1)
            w *= hp.expert_weights_scale;
          Vec ye = SwiGlu(ge, ue, de, h, e * F, F, e * d, d);
          for (size_t i = 0; i < d; ++i) y[i] += w * ye[i];
          if (trace) trace->experts[l][t].push_back(static_cast<int32_t>(e));
        }
        if (trace) std::sort(trace->experts[l][t].begin(), trace->experts[l][t].end());
        if (!gs.empty()) {
          Vec ys = SwiGlu(gs, us, ds, h);
          for (size_t i = 0; i < d; ++i) y[i] += ys[i];
        }
      }
      for (size_t i = 0; i < d; ++i) x[t][i] += y[i];
    }
  }
  Vec on = W.Get("output_norm.weight");
  Vec out = W.Get("output.weight");
  if (out.empty()) out = embd;
  Vec ob = W.Get("output.bias");
  std::vector<double> logits;
  logits.reserve(T * V);
  for (size_t t = 0; t < T; ++t) {
    Vec lg = MatVec(out, RmsNormRef(x[t], on, hp.rms_eps));
    for (size_t i = 0; i < ob.size(); ++i) lg[i] += ob[i];
    logits.insert(logits.end(), lg.begin(), lg.end());
  }
  return logits;
}

}  // namespace tessera::reference
