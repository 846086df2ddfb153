#include "worker/executor/executor.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/arch.h"
#include "common/model/fixups.h"
#include "common/model/tensor_map.h"
#include "common/quant/dequantize.h"
#include "common/util/half.h"
#include "common/util/strings.h"
#include "kernels/cpu/nn_ops.h"
#include "worker/executor/dense_config.h"

namespace tessera::executor {
namespace {

using cpu::QuantMatrix;

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm, q_norm, k_norm;
  std::vector<float> q_bias, k_bias, v_bias, o_bias;
  QuantMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

// Rounds activations to the compute dtype on the fast path (float32: unchanged).
void RoundTo(ComputeDtype dtype, float* x, int64_t n) {
  if (dtype == ComputeDtype::kBFloat16) {
    for (int64_t i = 0; i < n; ++i) x[i] = Bf16ToFloat(FloatToBf16(x[i]));
  } else if (dtype == ComputeDtype::kFloat16) {
    for (int64_t i = 0; i < n; ++i) x[i] = Fp16ToFloat(FloatToFp16(x[i]));
  }
}

}  // namespace

struct Executor::Impl {
  ExecutorOptions options;
  ComputeDtype act_dtype = ComputeDtype::kFloat32;
  gguf::GgufModel file;
  model::HyperParams hp;
  DenseConfig config;
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm, output_bias, rope_freqs;
  const gguf::TensorInfo* token_embd = nullptr;
  QuantMatrix output;
  cpu::RopeParams rope;
  std::unique_ptr<cpu::ThreadPool> pool;
  std::unique_ptr<PagedKvCache> cache;
  cpu::MatmulOptions matmul;

  explicit Impl(gguf::GgufModel f) : file(std::move(f)) {}

  absl::Status LoadWeights(const model::TensorMap& map);
  absl::Status MatMul(const QuantMatrix& w, const float* x, int64_t batch, float* y);
  absl::StatusOr<std::vector<std::vector<float>>> Step(absl::Span<const SequenceInput> seqs);
  void Attention(int layer, const std::vector<int64_t>& pos, const std::vector<int>& seq_of,
                 absl::Span<const SequenceInput> seqs, const float* q, float* out);
};

absl::Status Executor::Impl::LoadWeights(const model::TensorMap& map) {
  layers.resize(hp.n_layer);
  for (const model::TensorMapping& m : map.tensors) {
    if (!m.loaded()) continue;
    const gguf::TensorInfo& t = *m.info;
    std::string local = m.spec->scope == model::Scope::kGlobal ? m.spec->name : m.spec->name;
    // 1-D tensors (norms, biases, factors) are consumed in float.
    if (t.dims.size() == 1) {
      auto v = model::DequantizeTensor(file, t);
      if (!v.ok()) return v.status();
      if (m.spec->scope == model::Scope::kGlobal) {
        if (local == "output_norm.weight") output_norm = *std::move(v);
        if (local == "output.bias") output_bias = *std::move(v);
        if (local == "rope_freqs.weight") rope_freqs = *std::move(v);
        continue;
      }
      LayerWeights& L = layers[m.layer];
      std::vector<float>* dst = nullptr;
      if (local == "attn_norm.weight") dst = &L.attn_norm;
      if (local == "ffn_norm.weight") dst = &L.ffn_norm;
      if (local == "attn_q_norm.weight") dst = &L.q_norm;
      if (local == "attn_k_norm.weight") dst = &L.k_norm;
      if (local == "attn_q.bias") dst = &L.q_bias;
      if (local == "attn_k.bias") dst = &L.k_bias;
      if (local == "attn_v.bias") dst = &L.v_bias;
      if (local == "attn_output.bias") dst = &L.o_bias;
      if (dst == nullptr) {
        return absl::UnimplementedError(
            absl::StrCat("tensor ", m.name, ": not used by the CPU executor yet"));
      }
      *dst = *std::move(v);
      continue;
    }
    if (local == "token_embd.weight") {
      token_embd = &t;
      if (!map.tensors.empty() && output.data == nullptr) {
        auto q = QuantMatrix::FromTensor(t, file.TensorData(t));
        if (!q.ok()) return q.status();
        output = *q;  // tied head unless output.weight replaces it below
      }
      continue;
    }
    auto q = QuantMatrix::FromTensor(t, file.TensorData(t));
    if (!q.ok()) return q.status();
    if (local == "output.weight") {
      output = *q;
      continue;
    }
    LayerWeights& L = layers[m.layer];
    QuantMatrix* dst = nullptr;
    if (local == "attn_q.weight") dst = &L.wq;
    if (local == "attn_k.weight") dst = &L.wk;
    if (local == "attn_v.weight") dst = &L.wv;
    if (local == "attn_output.weight") dst = &L.wo;
    if (local == "ffn_gate.weight") dst = &L.w_gate;
    if (local == "ffn_up.weight") dst = &L.w_up;
    if (local == "ffn_down.weight") dst = &L.w_down;
    if (dst == nullptr) {
      return absl::UnimplementedError(
          absl::StrCat("tensor ", m.name, ": not used by the CPU executor yet (fused attn_qkv?)"));
    }
    *dst = *q;
  }
  // output.weight, when present, must win over the tied embedding whatever the file order.
  for (const model::TensorMapping& m : map.tensors) {
    if (m.loaded() && m.name == "output.weight") {
      auto q = QuantMatrix::FromTensor(*m.info, file.TensorData(*m.info));
      if (!q.ok()) return q.status();
      output = *q;
    }
  }
  if (token_embd == nullptr) return absl::InvalidArgumentError("token_embd.weight missing");
  return absl::OkStatus();
}

absl::Status Executor::Impl::MatMul(const QuantMatrix& w, const float* x, int64_t batch, float* y) {
  return cpu::Matmul(w, 0, w.rows, x, batch, y, w.rows, pool.get(), matmul);
}

void Executor::Impl::Attention(int layer, const std::vector<int64_t>& pos,
                               const std::vector<int>& seq_of, absl::Span<const SequenceInput> seqs,
                               const float* q, float* out) {
  const int H = static_cast<int>(hp.n_head[layer]);
  const int Hkv = static_cast<int>(hp.n_head_kv[layer]);
  const int dk = static_cast<int>(hp.head_dim_k), dv = static_cast<int>(hp.head_dim_v);
  const int group = H / Hkv;
  const int64_t T = static_cast<int64_t>(pos.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const KvCacheShape& cs = cache->shape();
  // One task per (token, KV head): gather that head's keys and values once for its group.
  pool->ParallelFor(T * Hkv, [&](int64_t task, int) {
    const int64_t t = task / Hkv;
    const int g = static_cast<int>(task % Hkv);
    const SequenceInput& s = seqs[seq_of[t]];
    const int64_t n_keys = pos[t] + 1;
    std::vector<float> krow(cs.k_width), vrow(cs.v_width);
    std::vector<float> keys(n_keys * dk), vals(n_keys * dv), scores(n_keys);
    for (int64_t p = 0; p < n_keys; ++p) {
      int64_t slot = cache->Slot(s.block_table, p);
      cache->ReadK(layer, slot, krow.data());
      cache->ReadV(layer, slot, vrow.data());
      std::memcpy(&keys[p * dk], &krow[g * dk], dk * sizeof(float));
      std::memcpy(&vals[p * dv], &vrow[g * dv], dv * sizeof(float));
    }
    for (int h = g * group; h < (g + 1) * group; ++h) {
      const float* qh = q + t * H * dk + h * dk;
      for (int64_t p = 0; p < n_keys; ++p) {
        float dot = 0;
        for (int i = 0; i < dk; ++i) dot += qh[i] * keys[p * dk + i];
        scores[p] = dot * scale;
      }
      cpu::Softmax(scores.data(), n_keys);
      float* o = out + t * H * dv + h * dv;
      std::fill(o, o + dv, 0.0f);
      for (int64_t p = 0; p < n_keys; ++p) {
        const float w = scores[p];
        for (int i = 0; i < dv; ++i) o[i] += w * vals[p * dv + i];
      }
    }
  });
}

absl::StatusOr<std::vector<std::vector<float>>> Executor::Impl::Step(
    absl::Span<const SequenceInput> seqs) {
  const int64_t d = hp.n_embd, V = hp.n_vocab;
  std::vector<int32_t> tok;
  std::vector<int64_t> pos, slot;
  std::vector<int> seq_of;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const SequenceInput& in = seqs[s];
    if (in.tokens.empty())
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": no tokens"));
    for (size_t i = 0; i < in.tokens.size(); ++i) {
      int32_t id = in.tokens[i];
      if (id < 0 || id >= static_cast<int32_t>(V)) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": token id ", id,
                                                       " is outside the vocabulary (", V, ")"));
      }
      int64_t p = in.start_pos + static_cast<int64_t>(i);
      int64_t sl = cache->Slot(in.block_table, p);
      if (sl < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequence ", s, ": position ", p, " has no cache slot (block table of ",
                         in.block_table.size(), " blocks of ", cache->shape().block_size, ")"));
      }
      tok.push_back(id);
      pos.push_back(p);
      slot.push_back(sl);
      seq_of.push_back(static_cast<int>(s));
    }
  }
  const int64_t T = static_cast<int64_t>(tok.size());
  std::vector<float> x(T * d), h(T * d);
  const gguf::GgmlTypeInfo* et = gguf::LookupGgmlType(token_embd->type);
  const uint64_t embd_row = static_cast<uint64_t>(d) / et->block_elems * et->block_bytes;
  auto embd = file.TensorData(*token_embd);
  for (int64_t t = 0; t < T; ++t) {
    absl::Status st = quant::DequantizeToFloat(
        token_embd->type, embd.subspan(tok[t] * embd_row, embd_row), d, &x[t * d]);
    if (!st.ok()) return st;
  }
  const float eps = hp.rms_eps;
  const int half = rope.n_rot / 2;
  std::vector<float> cos_t(T * half), sin_t(T * half);
  for (int64_t t = 0; t < T; ++t) cpu::RopeAngles(rope, pos[t], &cos_t[t * half], &sin_t[t * half]);

  for (uint32_t l = 0; l < hp.n_layer; ++l) {
    const LayerWeights& L = layers[l];
    const int H = static_cast<int>(hp.n_head[l]), Hkv = static_cast<int>(hp.n_head_kv[l]);
    const int dk = static_cast<int>(hp.head_dim_k), dv = static_cast<int>(hp.head_dim_v);
    for (int64_t t = 0; t < T; ++t) cpu::RmsNorm(&x[t * d], L.attn_norm.data(), d, eps, &h[t * d]);
    RoundTo(act_dtype, h.data(), T * d);
    std::vector<float> q(T * H * dk), k(T * Hkv * dk), v(T * Hkv * dv);
    for (auto [w, out] : {std::pair{&L.wq, &q}, {&L.wk, &k}, {&L.wv, &v}}) {
      if (absl::Status st = MatMul(*w, h.data(), T, out->data()); !st.ok()) return st;
    }
    auto add_bias = [T](std::vector<float>& y, const std::vector<float>& b) {
      if (b.empty()) return;
      const size_t n = b.size();
      for (int64_t t = 0; t < T; ++t) {
        for (size_t i = 0; i < n; ++i) y[t * n + i] += b[i];
      }
    };
    add_bias(q, L.q_bias);
    add_bias(k, L.k_bias);
    add_bias(v, L.v_bias);
    for (int64_t t = 0; t < T; ++t) {
      for (int hh = 0; hh < H; ++hh) {
        float* head = &q[(t * H + hh) * dk];
        if (config.qk_norm) cpu::RmsNorm(head, L.q_norm.data(), dk, eps, head);
        cpu::ApplyRope(head, rope.n_rot, config.rope, &cos_t[t * half], &sin_t[t * half]);
      }
      for (int hh = 0; hh < Hkv; ++hh) {
        float* head = &k[(t * Hkv + hh) * dk];
        if (config.qk_norm) cpu::RmsNorm(head, L.k_norm.data(), dk, eps, head);
        cpu::ApplyRope(head, rope.n_rot, config.rope, &cos_t[t * half], &sin_t[t * half]);
      }
      cache->Write(static_cast<int>(l), slot[t], &k[t * Hkv * dk], &v[t * Hkv * dv]);
    }
    std::vector<float> attn(T * H * dv), proj(T * d);
    Attention(static_cast<int>(l), pos, seq_of, seqs, q.data(), attn.data());
    RoundTo(act_dtype, attn.data(), T * H * dv);
    if (absl::Status st = MatMul(L.wo, attn.data(), T, proj.data()); !st.ok()) return st;
    add_bias(proj, L.o_bias);
    for (int64_t i = 0; i < T * d; ++i) x[i] += proj[i];

    for (int64_t t = 0; t < T; ++t) cpu::RmsNorm(&x[t * d], L.ffn_norm.data(), d, eps, &h[t * d]);
    RoundTo(act_dtype, h.data(), T * d);
    const int64_t ff = hp.n_ff[l];
    std::vector<float> gate(T * ff), up(T * ff);
    if (absl::Status st = MatMul(L.w_gate, h.data(), T, gate.data()); !st.ok()) return st;
    if (absl::Status st = MatMul(L.w_up, h.data(), T, up.data()); !st.ok()) return st;
    cpu::SiluMul(gate.data(), up.data(), T * ff, gate.data());
    RoundTo(act_dtype, gate.data(), T * ff);
    if (absl::Status st = MatMul(L.w_down, gate.data(), T, proj.data()); !st.ok()) return st;
    for (int64_t i = 0; i < T * d; ++i) x[i] += proj[i];
  }

  // Final norm and head, only for the rows whose logits are wanted.
  std::vector<int64_t> rows;
  std::vector<std::vector<float>> result(seqs.size());
  int64_t t0 = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int64_t n = static_cast<int64_t>(seqs[s].tokens.size());
    for (int64_t i = seqs[s].all_logits ? 0 : n - 1; i < n; ++i) rows.push_back(t0 + i);
    t0 += n;
  }
  const int64_t R = static_cast<int64_t>(rows.size());
  std::vector<float> hr(R * d), logits(R * V);
  for (int64_t r = 0; r < R; ++r)
    cpu::RmsNorm(&x[rows[r] * d], output_norm.data(), d, eps, &hr[r * d]);
  RoundTo(act_dtype, hr.data(), R * d);
  if (absl::Status st = MatMul(output, hr.data(), R, logits.data()); !st.ok()) return st;
  if (!output_bias.empty()) {
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t i = 0; i < V; ++i) logits[r * V + i] += output_bias[i];
    }
  }
  int64_t r = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int64_t n = seqs[s].all_logits ? static_cast<int64_t>(seqs[s].tokens.size()) : 1;
    result[s].assign(logits.begin() + r * V, logits.begin() + (r + n) * V);
    r += n;
  }
  return result;
}

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::~Executor() = default;

const model::HyperParams& Executor::hparams() const { return impl_->hp; }
const gguf::GgufModel& Executor::file() const { return impl_->file; }
int Executor::block_size() const { return impl_->cache->shape().block_size; }
int Executor::n_blocks() const { return impl_->cache->shape().n_blocks; }
int Executor::threads() const { return impl_->pool->size(); }

absl::StatusOr<std::vector<std::vector<float>>> Executor::Step(
    absl::Span<const SequenceInput> seqs) {
  return impl_->Step(seqs);
}

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(const std::string& model_path,
                                                           const ExecutorOptions& options) {
  auto file = gguf::GgufModel::Open(model_path);
  if (!file.ok()) return file.status();
  auto impl = std::make_unique<Impl>(*std::move(file));
  impl->options = options;
  const gguf::Metadata& md = impl->file.metadata();
  std::string arch_name = md.GetString("general.architecture").value_or("");
  const model::ArchSpec* arch = model::FindArch(arch_name);
  if (arch == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown architecture '", arch_name,
                     "'; supported: ", absl::StrJoin(model::SupportedArchNames(), ", ")));
  }
  if (arch_name == "llama") {
    impl->config = LlamaConfig();
  } else if (arch_name == "qwen2") {
    impl->config = Qwen2Config();
  } else if (arch_name == "qwen3") {
    impl->config = Qwen3Config();
  } else {
    return absl::UnimplementedError(
        absl::StrCat("architecture '", arch_name,
                     "' is not supported by the CPU executor yet (llama, qwen2, qwen3 are)"));
  }
  std::vector<model::KeyProblem> key_problems;
  impl->hp = model::LoadHyperParams(*arch, arch_name, md, nullptr, &key_problems);
  for (const model::KeyProblem& k : key_problems) {
    if (k.error) return absl::InvalidArgumentError(k.message);
  }
  model::TensorMap map = model::MapTensors(*arch, impl->hp, impl->file);
  if (!map.problems.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_path, ": ", absl::StrJoin(map.problems, "; ")));
  }
  if (absl::Status s = impl->LoadWeights(map); !s.ok()) return s;

  const model::HyperParams& hp = impl->hp;
  cpu::RopeParams& rope = impl->rope;
  rope.n_rot = static_cast<int>(hp.n_rot);
  rope.freq_base = hp.rope_freq_base;
  if (hp.rope_scaling_factor > 0 && hp.rope_scaling_type != "none") {
    rope.freq_scale = 1.0f / hp.rope_scaling_factor;
  }
  rope.yarn = hp.rope_scaling_type == "yarn";
  rope.yarn_orig_ctx = static_cast<int>(hp.rope_orig_ctx);
  rope.magnitude =
      rope.yarn ? cpu::YarnMagnitude(hp.rope_scaling_factor, hp.rope_attn_factor) : 1.0f;
  rope.freq_factors = impl->rope_freqs.empty() ? nullptr : impl->rope_freqs.data();

  impl->pool = std::make_unique<cpu::ThreadPool>(options.threads);
  impl->matmul.path = options.exact ? cpu::MatmulPath::kFloat : cpu::MatmulPath::kAuto;
  CacheDtype kv_dtype = CacheDtype::kF32;
  impl->act_dtype = ComputeDtype::kFloat32;
  if (!options.exact) {
    switch (options.dtype) {
      case ComputeDtype::kAuto:
        kv_dtype = CacheDtype::kF16;
        break;
      case ComputeDtype::kFloat32:
        break;
      case ComputeDtype::kBFloat16:
        kv_dtype = CacheDtype::kBF16;
        impl->act_dtype = ComputeDtype::kBFloat16;
        break;
      case ComputeDtype::kFloat16:
        kv_dtype = CacheDtype::kF16;
        impl->act_dtype = ComputeDtype::kFloat16;
        break;
    }
  }
  KvCacheShape shape;
  shape.n_layers = static_cast<int>(hp.n_layer);
  shape.block_size = std::max(1, options.kv_block_size);
  shape.n_blocks = static_cast<int>(
      (std::max<int64_t>(1, options.kv_tokens) + shape.block_size - 1) / shape.block_size);
  shape.k_width = static_cast<int>(hp.n_head_kv[0] * hp.head_dim_k);
  shape.v_width = static_cast<int>(hp.n_head_kv[0] * hp.head_dim_v);
  shape.dtype = kv_dtype;
  impl->cache = std::make_unique<PagedKvCache>(shape);
  return std::unique_ptr<Executor>(new Executor(std::move(impl)));
}

}  // namespace tessera::executor
