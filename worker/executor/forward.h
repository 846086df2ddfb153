// The forward pass, written once for every device: the layer sequence, GQA / MLA / DSA
// attention, MoE routing and combination, the head, the tensor-parallel collectives and
// the rounding points of the compute dtype. A device supplies the operations (`Ops`,
// described in ops.h): CpuOps (cpu_ops.h) over kernels/cpu, CudaOps (cuda_forward.cc) over
// kernels/cuda. Read it top to bottom: RunForward is the step.
//
// Rounding: every activation is an `Act` of precision kF32 or kAct (the step's compute
// dtype: float32, bfloat16 or float16). Each operation leaves its output in the output's
// precision, so a kAct tensor is rounded after every operation that writes it and a kF32
// tensor (the residual stream, router logits, the indexer, the head's logits) never is.
// The GPU stores kAct tensors in 16 bits; the CPU stores floats and rounds them. The
// rounding points are therefore the precisions chosen below, the same on both devices.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/model/hparams.h"
#include "common/model/shard_plan.h"
#include "common/util/status_macros.h"
#include "worker/executor/arch_config.h"
#include "worker/executor/ops.h"

namespace tessera::executor {

template <typename Ops>
class ForwardPass {
 public:
  using Layer = typename Ops::Layer;

  explicit ForwardPass(Ops& ops) : ops_(ops), hp_(ops.hparams()), config_(ops.config()) {}

  // The step: embedding, the blocks, the head's logits for the rows the step wants.
  // `tokens` counts the step's token rows (with a device's padding).
  absl::Status Run(int64_t tokens) {
    const int64_t T = tokens, d = hp_.n_embd;
    Act x = ops_.Tensor(Buf::kX, T, d, Prec::kF32);
    {
      auto phase = ops_.Phase("embed");
      // Vocab-parallel embedding: each rank fills the rows of the tokens in its vocabulary
      // range (the others are zero) and the sum over ranks completes them.
      TESSERA_RETURN_IF_ERROR(ops_.Embed(x));
      TESSERA_RETURN_IF_ERROR(ops_.AllReduce(x));
    }
    for (int layer = 0; layer < static_cast<int>(hp_.n_layer); ++layer) {
      TESSERA_RETURN_IF_ERROR(Block(layer, x, /*sparse=*/config_.dsa));
    }
    auto phase = ops_.Phase("head");
    return Head(x, ops_.output_norm(), ops_.output(), /*bias=*/true);
  }

  // The NextN/MTP draft head over the step's tokens (spec 12.6; llama.cpp
  // src/models/glm-dsa.cpp; DeepSeek-V3 report 2.2): row t takes its token's embedding and
  // the trunk's final-norm hidden state of the position before it (InputHidden),
  //   x = eh_proj [RMSNorm_enorm(embedding) ; RMSNorm_hnorm(hidden)]   (embedding first),
  // one decoder block (the first NextN block, n_layer, over its own cache layer: dense
  // causal attention, its DSA indexer not run; its MoE as the trunk's), then the head with
  // shared_head_norm / shared_head_head where the block has them (else output_norm /
  // output). The head's normalized rows are what a further draft step would take as its
  // hidden (TakeHidden).
  absl::Status RunMtp(int64_t tokens) {
    const int mtp = static_cast<int>(hp_.n_layer);
    const Layer& L = ops_.layer(mtp);
    const int64_t T = tokens, d = hp_.n_embd;
    const float eps = hp_.rms_eps;
    Act x = ops_.Tensor(Buf::kX, T, d, Prec::kF32);
    {
      auto phase = ops_.Phase("embed");
      TESSERA_RETURN_IF_ERROR(ops_.Embed(x));
      TESSERA_RETURN_IF_ERROR(ops_.AllReduce(x));
    }
    {
      auto phase = ops_.Phase("mtp_input");
      Act g = ops_.Tensor(Buf::kMtpHidden, T, d, Prec::kF32);
      TESSERA_RETURN_IF_ERROR(ops_.InputHidden(g));
      Act z = ops_.Tensor(Buf::kMtpIn, T, 2 * d, Prec::kF32);
      TESSERA_RETURN_IF_ERROR(ops_.RmsNorm(x, L.nextn_enorm, eps, z.Cols(0, d)));
      TESSERA_RETURN_IF_ERROR(ops_.RmsNorm(g, L.nextn_hnorm, eps, z.Cols(d, d)));
      // Replicated on every rank: the full input, the full product, no reduction.
      TESSERA_RETURN_IF_ERROR(ops_.Products({{&L.nextn_eh_proj, z, x}}));
    }
    TESSERA_RETURN_IF_ERROR(Block(mtp, x, /*sparse=*/false));
    auto phase = ops_.Phase("head");
    const bool own_head = Present(L.nextn_head);
    if (Present(L.nextn_head_norm)) {
      return Head(x, L.nextn_head_norm, own_head ? L.nextn_head : ops_.output(), !own_head);
    }
    return Head(x, ops_.output_norm(), own_head ? L.nextn_head : ops_.output(), !own_head);
  }

 private:
  // One decoder block on the residual stream `x`: attention (over the keys DSA kept where
  // `sparse`, else every causal key) and the FFN, each pre-normed and added back.
  absl::Status Block(int layer, Act x, bool sparse) {
    const Layer& L = ops_.layer(layer);
    Act h = ops_.Tensor(Buf::kH, x.rows, hp_.n_embd, Prec::kAct);
    Act y;
    TESSERA_RETURN_IF_ERROR(ops_.RmsNorm(x, L.attn_norm, hp_.rms_eps, h));
    {
      auto phase = ops_.Phase("attention");
      TESSERA_RETURN_IF_ERROR(config_.mla ? Mla(layer, h, y, sparse) : Gqa(layer, h, y));
    }
    TESSERA_RETURN_IF_ERROR(ops_.Add(x, y));
    TESSERA_RETURN_IF_ERROR(ops_.RmsNorm(x, L.ffn_norm, hp_.rms_eps, h));
    if (hp_.is_moe_block(layer)) {
      TESSERA_RETURN_IF_ERROR(Moe(layer, h, y));
    } else {
      auto phase = ops_.Phase("dense_ffn");
      TESSERA_RETURN_IF_ERROR(DenseFfn(layer, h, y));
    }
    return ops_.Add(x, y);
  }

  // GQA (llama, qwen*, glm4moe): this rank's query and KV heads, attention over the paged
  // cache, the row-parallel output product; the result in `y`.
  absl::Status Gqa(int layer, Act h, Act& y) {
    const Layer& L = ops_.layer(layer);
    const int64_t T = h.rows, dk = hp_.head_dim_k, dv = hp_.head_dim_v;
    const int64_t H = Rows(L.wq) / dk, Hkv = Rows(L.wk) / dk;
    y = ops_.Tensor(Buf::kY, T, hp_.n_embd, Prec::kAct);
    if (H == 0) {
      // None of this block's heads on this rank: it adds nothing to the sum.
      TESSERA_RETURN_IF_ERROR(ops_.Zero(y));
      return ops_.AllReduce(y);
    }
    Act q = ops_.Tensor(Buf::kQ, T, H * dk, Prec::kAct);
    Act k = ops_.Tensor(Buf::kK, T, Hkv * dk, Prec::kAct);
    Act v = ops_.Tensor(Buf::kV, T, Hkv * dv, Prec::kAct);
    TESSERA_RETURN_IF_ERROR(ops_.Products({{&L.wq, h, q}, {&L.wk, h, k}, {&L.wv, h, v}}));
    TESSERA_RETURN_IF_ERROR(ops_.AddBias(q, L.q_bias));
    TESSERA_RETURN_IF_ERROR(ops_.AddBias(k, L.k_bias));
    TESSERA_RETURN_IF_ERROR(ops_.AddBias(v, L.v_bias));
    if (Present(L.q_norm)) {
      TESSERA_RETURN_IF_ERROR(
          ops_.RmsNorm(q.Reshape(T * H, dk), L.q_norm, hp_.rms_eps, q.Reshape(T * H, dk)));
    }
    if (Present(L.k_norm)) {
      TESSERA_RETURN_IF_ERROR(
          ops_.RmsNorm(k.Reshape(T * Hkv, dk), L.k_norm, hp_.rms_eps, k.Reshape(T * Hkv, dk)));
    }
    TESSERA_RETURN_IF_ERROR(ops_.Rope(q, H, dk));
    TESSERA_RETURN_IF_ERROR(ops_.Rope(k, Hkv, dk));
    const AttentionShape shape{.heads = H,
                               .kv_heads = Hkv,
                               .d_k = dk,
                               .d_v = dv,
                               .head0 = ops_.share(layer).head_begin,
                               .group = hp_.n_head[layer] / hp_.n_head_kv[layer]};
    TESSERA_RETURN_IF_ERROR(ops_.WriteKv(layer, shape, k, v));
    Act attn = ops_.Tensor(Buf::kAttn, T, H * dv, Prec::kAct);
    TESSERA_RETURN_IF_ERROR(ops_.Attend(layer, shape, q, attn));
    TESSERA_RETURN_IF_ERROR(ops_.Products({{&L.wo, attn, y}}));
    // The output bias once, before the sum over ranks.
    if (ops_.tp_rank() == 0) TESSERA_RETURN_IF_ERROR(ops_.AddBias(y, L.o_bias));
    return ops_.AllReduce(y);
  }

  // MLA in the absorbed form (deepseek2, glm-dsa; spec 10.3), with the DSA indexer's key
  // selection where `sparse` (spec 12.4); the result in `y`.
  absl::Status Mla(int layer, Act h, Act& y, bool sparse) {
    const Layer& L = ops_.layer(layer);
    const int64_t T = h.rows, c = hp_.kv_lora_rank, r = hp_.n_rot, dq = hp_.key_length_mla;
    const int64_t n = dq - r, vv = hp_.value_length_mla, ql = hp_.q_lora_rank;
    const int64_t H = (ql > 0 ? Rows(L.wq_b) : Rows(L.wq)) / dq;
    const float eps = hp_.rms_eps;
    // 1. Query: q = W_UQ RMSNorm(W_DQ x) (or W_Q x); per head [nope n | rope r]. A rank
    // with none of the block's heads still keeps the latent cache and runs the indexer
    // (replicated, and later layers reuse its choice), and adds zeros to the sum.
    Act q = ops_.Tensor(Buf::kQ, T, H * dq, Prec::kAct);
    Act cq;
    if (ql > 0) {
      cq = ops_.Tensor(Buf::kCq, T, ql, Prec::kAct);
      TESSERA_RETURN_IF_ERROR(ops_.Products({{&L.wq_a, h, cq}}));
      TESSERA_RETURN_IF_ERROR(ops_.RmsNorm(cq, L.q_a_norm, eps, cq));
      if (H > 0) TESSERA_RETURN_IF_ERROR(ops_.Products({{&L.wq_b, cq, q}}));
    } else if (H > 0) {
      TESSERA_RETURN_IF_ERROR(ops_.Products({{&L.wq, h, q}}));
    }
    // 2-4. The latent and the shared rope key, normed and roped, cached as [c_KV | k_rope].
    Act kv = ops_.Tensor(Buf::kK, T, c + r, Prec::kAct);
    TESSERA_RETURN_IF_ERROR(ops_.Products({{&L.wkv_a, h, kv}}));
    TESSERA_RETURN_IF_ERROR(ops_.RmsNorm(kv.Cols(0, c), L.kv_a_norm, eps, kv.Cols(0, c)));
    TESSERA_RETURN_IF_ERROR(ops_.Rope(kv.Cols(c, r), 1, r));
    const AttentionShape shape{
        .heads = H, .kv_heads = 1, .d_k = c + r, .d_v = c, .latent = true, .sparse = sparse};
    TESSERA_RETURN_IF_ERROR(ops_.WriteKv(layer, shape, kv, Act()));
    // DSA: the keys each query may attend to; full indexer layers choose them, the others
    // reuse the last choice (spec 12.4).
    const bool dsa = sparse;
    if (dsa && layer < static_cast<int>(hp_.indexer_full.size()) && hp_.indexer_full[layer]) {
      auto phase = ops_.Phase("indexer");
      TESSERA_RETURN_IF_ERROR(Indexer(layer, h, cq));
    }
    if (dsa) TESSERA_RETURN_IF_ERROR(ops_.TraceSelection(layer));
    y = ops_.Tensor(Buf::kY, T, hp_.n_embd, Prec::kAct);
    if (H == 0) {
      TESSERA_RETURN_IF_ERROR(ops_.Zero(y));
      return ops_.AllReduce(y);
    }
    TESSERA_RETURN_IF_ERROR(ops_.Rope(q.Cols(n, H * dq - n), H, dq));
    // 5-6. W_UK absorbed into the query: Q_h = [K_b[h] q_h^nope (c) | q_h^rope (r)].
    Act qa = ops_.Tensor(Buf::kQa, T * H, c + r, Prec::kAct);
    Act heads = q.Reshape(T * H, dq);
    TESSERA_RETURN_IF_ERROR(ops_.HeadProducts(L.wk_b, H, heads.Cols(0, n), qa.Cols(0, c)));
    TESSERA_RETURN_IF_ERROR(ops_.Copy(heads.Cols(n, r), qa.Cols(c, r)));
    // 7. Every head against the single latent K = [c_KV | k_rope], V = c_KV.
    Act a = ops_.Tensor(Buf::kAttn, T, H * c, Prec::kAct);
    TESSERA_RETURN_IF_ERROR(ops_.Attend(layer, shape, qa.Reshape(T, H * (c + r)), a));
    // 8. Decompressed per head with W_UV, 9. the output projection.
    Act o = ops_.Tensor(Buf::kO, T, H * vv, Prec::kAct);
    TESSERA_RETURN_IF_ERROR(
        ops_.HeadProducts(L.wv_b, H, a.Reshape(T * H, c), o.Reshape(T * H, vv)));
    TESSERA_RETURN_IF_ERROR(ops_.Products({{&L.wo, o, y}}));
    return ops_.AllReduce(y);
  }

  // The DSA lightning indexer of a full layer (spec 12.4), in float32 throughout: index
  // queries from the query latent, one index key per token, per-head weights; the device
  // keeps each query's top-k keys for Attend.
  absl::Status Indexer(int layer, Act h, Act cq) {
    const Layer& L = ops_.layer(layer);
    const int64_t T = h.rows, HI = hp_.indexer_heads, DI = hp_.indexer_head_dim;
    Act cq32 = ops_.AsF32(cq, Buf::kCq32);
    Act h32 = ops_.AsF32(h, Buf::kH32);
    Act qi = ops_.Tensor(Buf::kQi, T, HI * DI, Prec::kF32);
    Act ki = ops_.Tensor(Buf::kKi, T, DI, Prec::kF32);
    Act wi = ops_.Tensor(Buf::kWi, T, HI, Prec::kF32);
    TESSERA_RETURN_IF_ERROR(ops_.Products({{&L.idx_q_b, cq32, qi}, {&L.idx_k, h32, ki}}));
    // The weights decide which keys are kept: per-vector products, whatever the batch.
    TESSERA_RETURN_IF_ERROR(ops_.Products({{&L.idx_proj, h32, wi, nullptr, true}}));
    // LayerNorm eps 1e-6 (spec 12.4 / 17.2); RoPE on the first n_rot dims.
    TESSERA_RETURN_IF_ERROR(ops_.LayerNorm(ki, L.idx_k_norm_w, L.idx_k_norm_b, 1e-6f));
    TESSERA_RETURN_IF_ERROR(ops_.Rope(ki, 1, DI));
    TESSERA_RETURN_IF_ERROR(ops_.Rope(qi, HI, DI));
    TESSERA_RETURN_IF_ERROR(ops_.Scale(wi, 1.0f / std::sqrt(static_cast<float>(DI * HI))));
    TESSERA_RETURN_IF_ERROR(ops_.WriteIndexKeys(layer, ki));
    return ops_.SelectKeys(layer, qi, wi);
  }

  // SwiGLU of a dense block; the result in `y`.
  absl::Status DenseFfn(int layer, Act h, Act& y) {
    const Layer& L = ops_.layer(layer);
    const int64_t T = h.rows, ff = Rows(L.w_gate);
    if (ff == 0) {  // none of its hidden dim on this rank
      y = ops_.Tensor(Buf::kY, T, hp_.n_embd, Prec::kAct);
      TESSERA_RETURN_IF_ERROR(ops_.Zero(y));
      return ops_.AllReduce(y);
    }
    Act gate = ops_.Tensor(Buf::kGate, T, ff, Prec::kAct);
    Act up = ops_.Tensor(Buf::kUp, T, ff, Prec::kAct);
    TESSERA_RETURN_IF_ERROR(ops_.Products({{&L.w_gate, h, gate}, {&L.w_up, h, up}}));
    TESSERA_RETURN_IF_ERROR(ops_.SiluMul(gate, up));
    y = ops_.Tensor(Buf::kY, T, hp_.n_embd, Prec::kAct);
    TESSERA_RETURN_IF_ERROR(ops_.Products({{&L.w_down, gate, y}}));
    return ops_.AllReduce(y);
  }

  // Mixture of experts (spec 5.6): the router in float32, the k chosen experts' SwiGLU per
  // (token, choice) weighted into one row per token, plus the shared experts; the result
  // in `y`.
  absl::Status Moe(int layer, Act h, Act& y) {
    const Layer& L = ops_.layer(layer);
    const int64_t T = h.rows, d = hp_.n_embd, E = hp_.n_expert;
    // The experts this rank holds (all of them unless expert-parallel), and F, its part of
    // each one's hidden dim (all of it under expert parallelism and at tp 1).
    const model::BlockShare& share = ops_.share(layer);
    const int64_t local = share.expert_end - share.expert_begin;
    const int64_t F = local > 0 ? Rows(L.gate_exps) / local : 0;
    int64_t rows = 0;  // per-choice rows of this rank
    {
      auto phase = ops_.Phase("router");
      // The router's weights were dequantized at load (spec 13.2); per-vector products, so
      // that a token's choice never depends on what shares its step.
      Act logits = ops_.Tensor(Buf::kRouterLogits, T, E, Prec::kF32);
      TESSERA_RETURN_IF_ERROR(
          ops_.Products({{&L.router, ops_.AsF32(h, Buf::kH32), logits, nullptr, true}}));
      absl::StatusOr<int64_t> routed = ops_.Route(layer, logits, L.exp_probs_b);
      if (!routed.ok()) return routed.status();
      rows = *routed;
    }
    auto phase = ops_.Phase("experts");
    y = ops_.Tensor(Buf::kY, T, d, Prec::kAct);
    if (F > 0 && rows > 0) {
      Act gate = ops_.Tensor(Buf::kGate, rows, F, Prec::kAct);
      Act up = ops_.Tensor(Buf::kUp, rows, F, Prec::kAct);
      Act down = ops_.Tensor(Buf::kDown, rows, d, Prec::kAct);
      TESSERA_RETURN_IF_ERROR(
          ops_.ExpertProducts({{&L.gate_exps, F, gate}, {&L.up_exps, F, up}}, h, false));
      TESSERA_RETURN_IF_ERROR(ops_.SiluMul(gate, up));
      TESSERA_RETURN_IF_ERROR(ops_.ExpertProducts({{&L.down_exps, d, down}}, gate, true));
      TESSERA_RETURN_IF_ERROR(ops_.Combine(down, y));
    } else {
      TESSERA_RETURN_IF_ERROR(ops_.Zero(y));
    }
    if (Present(L.gate_sh)) {
      const int64_t S = Rows(L.gate_sh);
      Act g = ops_.Tensor(Buf::kGate, T, S, Prec::kAct);
      Act u = ops_.Tensor(Buf::kUp, T, S, Prec::kAct);
      TESSERA_RETURN_IF_ERROR(ops_.Products({{&L.gate_sh, h, g}, {&L.up_sh, h, u}}));
      TESSERA_RETURN_IF_ERROR(ops_.SiluMul(g, u));
      Act sh = ops_.Tensor(Buf::kDown, T, d, Prec::kAct);
      TESSERA_RETURN_IF_ERROR(ops_.Products({{&L.down_sh, g, sh}}));
      TESSERA_RETURN_IF_ERROR(ops_.Add(y, sh));
    }
    return ops_.AllReduce(y);
  }

  // The final norm `norm` (rounded to the compute dtype, as every sublayer's input; kept
  // for the caller where asked: the hidden state an MTP step takes) and the vocab-parallel
  // head `head` in float32 (with output.bias where `bias`), for the rows whose logits the
  // step wants; then every rank's vocabulary columns gathered.
  absl::Status Head(Act x, const typename Ops::Vec& norm, const typename Ops::Mat& head,
                    bool bias) {
    const HeadRows& rows = ops_.head_rows();
    const int64_t R = static_cast<int64_t>(rows.count);
    if (ops_.all_hidden_rows()) {
      // Every row's state, normalized as the head's rows are (the same bits for those).
      Act all = ops_.Tensor(Buf::kAllHidden, x.rows, hp_.n_embd, Prec::kF32);
      TESSERA_RETURN_IF_ERROR(ops_.RmsNorm(x, norm, hp_.rms_eps, all));
      TESSERA_RETURN_IF_ERROR(ops_.RoundToAct(all));
      TESSERA_RETURN_IF_ERROR(ops_.TakeHidden(all));
    }
    // In chunks of rows where the device plans a smaller buffer than an all-logits step
    // needs (every row's result is its own: the products are per sequence under batch
    // invariance, and a chunk keeps each row's sequence).
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(R, ops_.head_chunk_rows()));
    std::vector<int> chunk_seq;
    int64_t r0 = 0;
    do {  // once at least, also for a step of no rows
      const int64_t n = std::min(chunk, R - r0);
      ops_.SetHeadChunk(r0, n);
      const std::vector<int>* seq = rows.seq;
      if (seq != nullptr && n < R) {
        chunk_seq.assign(seq->begin() + r0, seq->begin() + r0 + n);
        seq = &chunk_seq;
      }
      Act hr = ops_.Tensor(Buf::kHeadIn, n, hp_.n_embd, Prec::kF32);
      TESSERA_RETURN_IF_ERROR(ops_.GatherHeadRows(x, hr));
      TESSERA_RETURN_IF_ERROR(ops_.RmsNorm(hr, norm, hp_.rms_eps, hr));
      TESSERA_RETURN_IF_ERROR(ops_.RoundToAct(hr));
      if (!ops_.all_hidden_rows()) TESSERA_RETURN_IF_ERROR(ops_.TakeHidden(hr));
      Act logits = ops_.Tensor(Buf::kLogits, n, Rows(head), Prec::kF32);
      TESSERA_RETURN_IF_ERROR(ops_.Products({{&head, hr, logits, seq}}));
      if (bias) TESSERA_RETURN_IF_ERROR(ops_.AddBias(logits, ops_.output_bias()));
      TESSERA_RETURN_IF_ERROR(ops_.GatherVocab(logits));
      r0 += chunk;
    } while (r0 < R);
    ops_.SetHeadChunk(0, R);
    return absl::OkStatus();
  }

  Ops& ops_;
  const model::HyperParams& hp_;
  const ArchConfig& config_;
};

}  // namespace tessera::executor
