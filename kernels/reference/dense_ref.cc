#include "kernels/reference/dense_ref.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/model/arch.h"
#include "common/model/hparams.h"
#include "common/quant/dequantize.h"
#include "kernels/reference/nn_ref.h"

namespace tessera::reference {
namespace {

using Mat = std::vector<double>;  // row-major [rows][cols] (GGUF {cols, rows})

absl::StatusOr<Mat> Weight(const gguf::GgufModel& m, const std::string& name) {
  const gguf::TensorInfo* t = m.FindTensor(name);
  if (t == nullptr) return absl::NotFoundError(name);
  std::vector<float> f(t->n_elements);
  absl::Status s = quant::DequantizeToFloat(t->type, m.TensorData(*t), t->n_elements, f.data());
  if (!s.ok()) return s;
  return Mat(f.begin(), f.end());
}

Mat MatVec(const Mat& w, const std::vector<double>& x) {
  const size_t cols = x.size(), rows = w.size() / cols;
  Mat y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (size_t c = 0; c < cols; ++c) s += w[r * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

}  // namespace

absl::StatusOr<std::vector<double>> DenseForwardRef(const gguf::GgufModel& m,
                                                    const std::vector<int32_t>& tokens) {
  std::string arch = m.metadata().GetString("general.architecture").value_or("");
  const model::ArchSpec* spec = model::FindArch(arch);
  if (spec == nullptr || (arch != "llama" && arch != "qwen2" && arch != "qwen3")) {
    return absl::UnimplementedError(absl::StrCat("dense reference: architecture ", arch));
  }
  std::vector<model::KeyProblem> problems;
  model::HyperParams hp = model::LoadHyperParams(*spec, arch, m.metadata(), nullptr, &problems);
  const size_t d = hp.n_embd, T = tokens.size(), V = hp.n_vocab;
  const size_t dk = hp.head_dim_k, dv = hp.head_dim_v;
  const bool neox = arch != "llama";
  auto opt = [&](const std::string& n) -> Mat {
    auto w = Weight(m, n);
    return w.ok() ? *w : Mat{};
  };
  auto req = [&](const std::string& n) -> absl::StatusOr<Mat> { return Weight(m, n); };

  auto embd = req("token_embd.weight");
  if (!embd.ok()) return embd.status();
  std::vector<std::vector<double>> x(T);
  for (size_t t = 0; t < T; ++t)
    x[t].assign(embd->begin() + tokens[t] * d, embd->begin() + (tokens[t] + 1) * d);

  RopeRefParams rp;
  rp.n_rot = static_cast<int>(hp.n_rot);
  rp.freq_base = hp.rope_freq_base;
  rp.neox = neox;
  if (hp.rope_scaling_factor > 0 && hp.rope_scaling_type != "none")
    rp.freq_scale = 1.0 / hp.rope_scaling_factor;
  rp.freq_factors = opt("rope_freqs.weight");

  for (uint32_t l = 0; l < hp.n_layer; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    const size_t H = hp.n_head[l], Hkv = hp.n_head_kv[l];
    Mat wq = opt(b + "attn_q.weight"), wk = opt(b + "attn_k.weight"), wv = opt(b + "attn_v.weight");
    Mat wo = opt(b + "attn_output.weight"), an = opt(b + "attn_norm.weight"),
        fn = opt(b + "ffn_norm.weight");
    Mat bq = opt(b + "attn_q.bias"), bk = opt(b + "attn_k.bias"), bv = opt(b + "attn_v.bias");
    Mat qn = opt(b + "attn_q_norm.weight"), kn = opt(b + "attn_k_norm.weight");
    Mat wg = opt(b + "ffn_gate.weight"), wu = opt(b + "ffn_up.weight"),
        wd = opt(b + "ffn_down.weight");
    std::vector<Mat> Q(T), K(T), Vv(T);
    for (size_t t = 0; t < T; ++t) {
      Mat h = RmsNormRef(x[t], an, hp.rms_eps);
      Q[t] = MatVec(wq, h);
      K[t] = MatVec(wk, h);
      Vv[t] = MatVec(wv, h);
      for (size_t i = 0; i < bq.size(); ++i) Q[t][i] += bq[i];
      for (size_t i = 0; i < bk.size(); ++i) K[t][i] += bk[i];
      for (size_t i = 0; i < bv.size(); ++i) Vv[t][i] += bv[i];
      auto rot = [&](Mat& all, size_t heads, const Mat& norm) {
        for (size_t hh = 0; hh < heads; ++hh) {
          Mat head(all.begin() + hh * dk, all.begin() + (hh + 1) * dk);
          if (!norm.empty()) head = RmsNormRef(head, norm, hp.rms_eps);
          head = RopeRef(head, static_cast<int64_t>(t), rp);
          std::copy(head.begin(), head.end(), all.begin() + hh * dk);
        }
      };
      rot(Q[t], H, qn);
      rot(K[t], Hkv, kn);
    }
    for (size_t t = 0; t < T; ++t) {
      Mat o(H * dv, 0.0);
      for (size_t hh = 0; hh < H; ++hh) {
        const size_t g = hh / (H / Hkv);
        std::vector<double> sc(t + 1);
        for (size_t p = 0; p <= t; ++p) {
          double s = 0;
          for (size_t i = 0; i < dk; ++i) s += Q[t][hh * dk + i] * K[p][g * dk + i];
          sc[p] = s / std::sqrt(static_cast<double>(dk));
        }
        sc = SoftmaxRef(sc);
        for (size_t p = 0; p <= t; ++p) {
          for (size_t i = 0; i < dv; ++i) o[hh * dv + i] += sc[p] * Vv[p][g * dv + i];
        }
      }
      Mat a = MatVec(wo, o);
      for (size_t i = 0; i < d; ++i) x[t][i] += a[i];
      Mat h = RmsNormRef(x[t], fn, hp.rms_eps);
      Mat g = MatVec(wg, h), u = MatVec(wu, h);
      for (size_t i = 0; i < g.size(); ++i) g[i] = SiluRef(g[i]) * u[i];
      Mat f = MatVec(wd, g);
      for (size_t i = 0; i < d; ++i) x[t][i] += f[i];
    }
  }
  Mat on = opt("output_norm.weight");
  Mat out = opt("output.weight");
  if (out.empty()) out = *embd;
  Mat ob = opt("output.bias");
  std::vector<double> logits;
  logits.reserve(T * V);
  for (size_t t = 0; t < T; ++t) {
    Mat l = MatVec(out, RmsNormRef(x[t], on, hp.rms_eps));
    for (size_t i = 0; i < ob.size(); ++i) l[i] += ob[i];
    logits.insert(logits.end(), l.begin(), l.end());
  }
  return logits;
}

}  // namespace tessera::reference
