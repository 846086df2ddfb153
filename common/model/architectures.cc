// The architecture tables. Every fact here is from ../shared/spec/architectures.md; section
// numbers are given where a choice is not obvious.
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/model/arch.h"
#include "common/util/strings.h"

namespace tessera::model {
namespace {

using HP = HyperParams;

// ---- keys ----

std::vector<KeySpec> CommonKeys(bool ff_required) {
  return {
      {"context_length", KeyNeed::kRequired, &HP::n_ctx_train},
      {"embedding_length", KeyNeed::kRequired, &HP::n_embd},
      {"block_count", KeyNeed::kRequired, &HP::n_layer_all},
      {"feed_forward_length", ff_required ? KeyNeed::kRequired : KeyNeed::kQuiet, &HP::n_ff},
      {"attention.head_count", KeyNeed::kRequired, &HP::n_head},
      {"attention.head_count_kv", KeyNeed::kQuiet, &HP::n_head_kv},
      {"attention.key_length", KeyNeed::kQuiet, &HP::head_dim_k},
      {"attention.value_length", KeyNeed::kQuiet, &HP::head_dim_v},
      {"rope.dimension_count", KeyNeed::kQuiet, &HP::n_rot},
      {"rope.freq_base", KeyNeed::kOptional, &HP::rope_freq_base, 10000.0},
      {"rope.scaling.type", KeyNeed::kQuiet, &HP::rope_scaling_type},
      {"rope.scaling.factor", KeyNeed::kQuiet, &HP::rope_scaling_factor, 0.0},
      {"rope.scaling.original_context_length", KeyNeed::kQuiet, &HP::rope_orig_ctx},
      {"rope.scaling.attn_factor", KeyNeed::kQuiet, &HP::rope_attn_factor, 1.0},
      {"vocab_size", KeyNeed::kQuiet, &HP::n_vocab},
      {"attention.layer_norm_rms_epsilon", KeyNeed::kRequired, &HP::rms_eps},
      {"nextn_predict_layers", KeyNeed::kQuiet, &HP::n_nextn},
  };
}

void Append(std::vector<KeySpec>& a, std::vector<KeySpec> b) {
  a.insert(a.end(), b.begin(), b.end());
}

std::vector<KeySpec> MoeKeys(bool ff_exp_required, bool shared_required) {
  return {
      {"expert_count", KeyNeed::kRequired, &HP::n_expert},
      {"expert_used_count", KeyNeed::kRequired, &HP::n_expert_used},
      {"expert_group_count", KeyNeed::kQuiet, &HP::n_expert_groups},
      {"expert_group_used_count", KeyNeed::kQuiet, &HP::n_group_used},
      {"expert_feed_forward_length", ff_exp_required ? KeyNeed::kRequired : KeyNeed::kOptional,
       &HP::n_ff_exp},
      {"expert_shared_count", shared_required ? KeyNeed::kRequired : KeyNeed::kQuiet,
       &HP::n_expert_shared},
      {"leading_dense_block_count", KeyNeed::kQuiet, &HP::n_leading_dense},
      {"expert_weights_scale", KeyNeed::kQuiet, &HP::expert_weights_scale, 0.0},
      {"expert_weights_norm", KeyNeed::kQuiet, &HP::expert_weights_norm},
      {"expert_gating_func", KeyNeed::kOptional, &HP::gating_func},
  };
}

std::vector<KeySpec> MlaKeys(bool q_lora_required) {
  return {
      {"attention.q_lora_rank", q_lora_required ? KeyNeed::kRequired : KeyNeed::kQuiet,
       &HP::q_lora_rank},
      {"attention.kv_lora_rank", KeyNeed::kRequired, &HP::kv_lora_rank},
      {"attention.key_length_mla", KeyNeed::kQuiet, &HP::key_length_mla},
      {"attention.value_length_mla", KeyNeed::kQuiet, &HP::value_length_mla},
  };
}

// ---- tensor helpers ----

Need Required(const HP&, uint32_t, const HasTensorFn&) { return Need::kRequired; }
Need Optional(const HP&, uint32_t, const HasTensorFn&) { return Need::kOptional; }

int64_t I(uint32_t v) { return static_cast<int64_t>(v); }

TensorSpec Global(const char* name, std::function<Dims(const HP&, uint32_t)> shape, Need need,
                  bool needs_float, SplitKind split, const char* role) {
  TensorSpec t;
  t.name = name;
  t.scope = Scope::kGlobal;
  t.shape = std::move(shape);
  t.need = [need](const HP&, uint32_t, const HasTensorFn&) { return need; };
  t.needs_float = needs_float;
  t.split = split;
  t.role = role;
  return t;
}

TensorSpec Block(const char* name, Scope scope, std::function<Dims(const HP&, uint32_t)> shape,
                 std::function<Need(const HP&, uint32_t, const HasTensorFn&)> need,
                 bool needs_float, SplitKind split,
                 std::function<int64_t(const HP&, uint32_t)> unit, const char* role) {
  TensorSpec t;
  t.name = name;
  t.scope = scope;
  t.shape = std::move(shape);
  t.need = std::move(need);
  t.needs_float = needs_float;
  t.split = split;
  t.split_unit = std::move(unit);
  t.role = role;
  if (split == SplitKind::kExpertRows || split == SplitKind::kExpertColumns) {
    t.partition = Partition::kExpertFfn;
  }
  return t;
}

// A 1-D float tensor of `n` elements in every block, replicated (norm weights).
TensorSpec Norm(const char* name, Scope scope, std::function<int64_t(const HP&, uint32_t)> n,
                std::function<Need(const HP&, uint32_t, const HasTensorFn&)> need,
                const char* role) {
  return Block(
      name, scope, [n](const HP& hp, uint32_t l) { return Dims{n(hp, l)}; }, std::move(need), true,
      SplitKind::kReplicated, nullptr, role);
}

void AddGlobals(std::vector<TensorSpec>& t, bool output_bias, bool rope_freqs) {
  auto embd = [](const HP& hp, uint32_t) { return Dims{I(hp.n_embd), I(hp.n_vocab)}; };
  t.push_back(Global("token_embd.weight", embd, Need::kRequired, false, SplitKind::kOutputRows,
                     "token embeddings (vocabulary-parallel)"));
  t.back().partition = Partition::kVocab;
  t.push_back(Global(
      "output_norm.weight", [](const HP& hp, uint32_t) { return Dims{I(hp.n_embd)}; },
      Need::kRequired, true, SplitKind::kReplicated, "final RMSNorm"));
  t.push_back(Global("output.weight", embd, Need::kOptional, false, SplitKind::kOutputRows,
                     "LM head (absent: tied to token_embd)"));
  t.back().partition = Partition::kVocab;
  if (output_bias) {
    t.push_back(Global(
        "output.bias", [](const HP& hp, uint32_t) { return Dims{I(hp.n_vocab)}; }, Need::kOptional,
        true, SplitKind::kOutputRows, "LM head bias"));
    t.back().partition = Partition::kVocab;
  }
  if (rope_freqs) {
    t.push_back(Global(
        "rope_freqs.weight", [](const HP& hp, uint32_t) { return Dims{I(hp.n_rot / 2)}; },
        Need::kOptional, true, SplitKind::kReplicated, "Llama-3 RoPE frequency factors"));
  }
}

struct DenseAttentionOptions {
  Need qk_norm = Need::kNotExpected;
  bool biases = false;  // optional q/k/v biases
  bool output_bias = false;
};

// GQA attention (llama, qwen2, qwen3, glm4moe): spec 6.2, 7, 8, 11.2.
void AddDenseAttention(std::vector<TensorSpec>& t, DenseAttentionOptions o) {
  auto q_rows = [](const HP& hp, uint32_t l) { return I(hp.n_head[l] * hp.head_dim_k); };
  auto k_rows = [](const HP& hp, uint32_t l) { return I(hp.n_head_kv[l] * hp.head_dim_k); };
  auto v_rows = [](const HP& hp, uint32_t l) { return I(hp.n_head_kv[l] * hp.head_dim_v); };
  auto dk = [](const HP& hp, uint32_t) { return I(hp.head_dim_k); };
  auto dv = [](const HP& hp, uint32_t) { return I(hp.head_dim_v); };
  // Either the three projections or the fused attn_qkv.
  auto separate = [](const HP&, uint32_t l, const HasTensorFn& has) {
    return has(absl::StrCat("blk.", l, ".attn_qkv.weight")) ? Need::kNotExpected : Need::kRequired;
  };
  auto separate_bias = [](const HP&, uint32_t l, const HasTensorFn& has) {
    return has(absl::StrCat("blk.", l, ".attn_qkv.weight")) ? Need::kNotExpected : Need::kOptional;
  };
  t.push_back(Norm(
      "attn_norm.weight", Scope::kBlock, [](const HP& hp, uint32_t) { return I(hp.n_embd); },
      Required, "pre-attention RMSNorm"));
  t.push_back(Block(
      "attn_q.weight", Scope::kBlock,
      [q_rows](const HP& hp, uint32_t l) {
        return Dims{I(hp.n_embd), q_rows(hp, l)};
      },
      separate, false, SplitKind::kOutputRows, dk, "W_q (whole heads per rank)"));
  t.back().partition = Partition::kHeads;
  t.push_back(Block(
      "attn_k.weight", Scope::kBlock,
      [k_rows](const HP& hp, uint32_t l) {
        return Dims{I(hp.n_embd), k_rows(hp, l)};
      },
      separate, false, SplitKind::kOutputRows, dk, "W_k (whole KV heads per rank)"));
  t.back().partition = Partition::kKvHeads;
  t.push_back(Block(
      "attn_v.weight", Scope::kBlock,
      [v_rows](const HP& hp, uint32_t l) {
        return Dims{I(hp.n_embd), v_rows(hp, l)};
      },
      separate, false, SplitKind::kOutputRows, dv, "W_v (whole KV heads per rank)"));
  t.back().partition = Partition::kKvHeads;
  TensorSpec qkv = Block(
      "attn_qkv.weight", Scope::kBlock,
      [=](const HP& hp, uint32_t l) {
        return Dims{I(hp.n_embd), q_rows(hp, l) + k_rows(hp, l) + v_rows(hp, l)};
      },
      Optional, false, SplitKind::kOutputRows, dk, "fused Q|K|V projection");
  qkv.partition = Partition::kHeads;
  qkv.segments = [=](const HP& hp, uint32_t l) {
    return std::vector<Segment>{{q_rows(hp, l), Partition::kHeads, dk(hp, l)},
                                {k_rows(hp, l), Partition::kKvHeads, dk(hp, l)},
                                {v_rows(hp, l), Partition::kKvHeads, dv(hp, l)}};
  };
  t.push_back(qkv);
  if (o.biases) {
    t.push_back(Block(
        "attn_q.bias", Scope::kBlock,
        [q_rows](const HP& hp, uint32_t l) { return Dims{q_rows(hp, l)}; }, separate_bias, true,
        SplitKind::kOutputRows, dk, "Q bias"));
    t.back().partition = Partition::kHeads;
    t.push_back(Block(
        "attn_k.bias", Scope::kBlock,
        [k_rows](const HP& hp, uint32_t l) { return Dims{k_rows(hp, l)}; }, separate_bias, true,
        SplitKind::kOutputRows, dk, "K bias"));
    t.back().partition = Partition::kKvHeads;
    t.push_back(Block(
        "attn_v.bias", Scope::kBlock,
        [v_rows](const HP& hp, uint32_t l) { return Dims{v_rows(hp, l)}; }, separate_bias, true,
        SplitKind::kOutputRows, dv, "V bias"));
    t.back().partition = Partition::kKvHeads;
  }
  if (o.qk_norm != Need::kNotExpected) {
    Need n = o.qk_norm;
    auto need = [n](const HP&, uint32_t, const HasTensorFn&) { return n; };
    t.push_back(Norm("attn_q_norm.weight", Scope::kBlock, dk, need, "per-head RMSNorm of Q"));
    t.push_back(Norm("attn_k_norm.weight", Scope::kBlock, dk, need, "per-head RMSNorm of K"));
  }
  t.push_back(Block(
      "attn_output.weight", Scope::kBlock,
      [](const HP& hp, uint32_t l) {
        return Dims{I(hp.n_head[l] * hp.head_dim_v), I(hp.n_embd)};
      },
      Required, false, SplitKind::kInputColumns, dv, "W_o (input columns by head, all-reduce)"));
  t.back().partition = Partition::kHeads;
  if (o.output_bias) {
    t.push_back(Norm(
        "attn_output.bias", Scope::kBlock, [](const HP& hp, uint32_t) { return I(hp.n_embd); },
        Optional, "W_o bias (added once, after the all-reduce)"));
  }
}

// SwiGLU FFN of the dense blocks (spec 5.5).
void AddDenseFfn(std::vector<TensorSpec>& t, Scope scope) {
  auto one = [](const HP&, uint32_t) { return int64_t{1}; };
  t.push_back(Block(
      "ffn_gate.weight", scope,
      [](const HP& hp, uint32_t l) {
        return Dims{I(hp.n_embd), I(hp.n_ff[l])};
      },
      Required, false, SplitKind::kOutputRows, one, "SwiGLU gate"));
  t.back().partition = Partition::kFfn;
  t.push_back(Block(
      "ffn_up.weight", scope,
      [](const HP& hp, uint32_t l) {
        return Dims{I(hp.n_embd), I(hp.n_ff[l])};
      },
      Required, false, SplitKind::kOutputRows, one, "SwiGLU up"));
  t.back().partition = Partition::kFfn;
  t.push_back(Block(
      "ffn_down.weight", scope,
      [](const HP& hp, uint32_t l) {
        return Dims{I(hp.n_ff[l]), I(hp.n_embd)};
      },
      Required, false, SplitKind::kInputColumns, one, "SwiGLU down (all-reduce)"));
  t.back().partition = Partition::kFfn;
}

struct MoeOptions {
  Need probs_bias = Need::kOptional;
  bool fused_gate_up = false;  // deepseek2 accepts ffn_gate_up_exps
};

// Routed experts and shared experts (spec 5.6, 9, 10.2, 11.2).
void AddMoe(std::vector<TensorSpec>& t, MoeOptions o) {
  auto one = [](const HP&, uint32_t) { return int64_t{1}; };
  t.push_back(Block(
      "ffn_gate_inp.weight", Scope::kMoeBlock,
      [](const HP& hp, uint32_t) {
        return Dims{I(hp.n_embd), I(hp.n_expert)};
      },
      Required, true, SplitKind::kReplicated, nullptr, "MoE router (float)"));
  Need pb = o.probs_bias;
  t.push_back(Block(
      "exp_probs_b.bias", Scope::kMoeBlock,
      [](const HP& hp, uint32_t) { return Dims{I(hp.n_expert)}; },
      [pb](const HP&, uint32_t, const HasTensorFn&) { return pb; }, true, SplitKind::kReplicated,
      nullptr, "expert selection bias (changes selection, not weights)"));
  auto gate_up = [](const HP& hp, uint32_t) {
    return Dims{I(hp.n_embd), I(hp.n_ff_exp), I(hp.n_expert)};
  };
  bool fused = o.fused_gate_up;
  auto separate = [fused](const HP&, uint32_t l, const HasTensorFn& has) {
    return fused && has(absl::StrCat("blk.", l, ".ffn_gate_up_exps.weight")) ? Need::kNotExpected
                                                                             : Need::kRequired;
  };
  t.push_back(Block("ffn_gate_exps.weight", Scope::kMoeBlock, gate_up, separate, false,
                    SplitKind::kExpertRows, one, "expert gates"));
  t.push_back(Block("ffn_up_exps.weight", Scope::kMoeBlock, gate_up, separate, false,
                    SplitKind::kExpertRows, one, "expert ups"));
  if (o.fused_gate_up) {
    TensorSpec f = Block(
        "ffn_gate_up_exps.weight", Scope::kMoeBlock,
        [](const HP& hp, uint32_t) {
          return Dims{I(hp.n_embd), I(2 * hp.n_ff_exp), I(hp.n_expert)};
        },
        Optional, false, SplitKind::kExpertRows, one, "fused expert gate|up");
    f.segments = [](const HP& hp, uint32_t) {
      return std::vector<Segment>{{I(hp.n_ff_exp), Partition::kExpertFfn, 1},
                                  {I(hp.n_ff_exp), Partition::kExpertFfn, 1}};
    };
    t.push_back(f);
  }
  t.push_back(Block(
      "ffn_down_exps.weight", Scope::kMoeBlock,
      [](const HP& hp, uint32_t) {
        return Dims{I(hp.n_ff_exp), I(hp.n_embd), I(hp.n_expert)};
      },
      Required, false, SplitKind::kExpertColumns, one, "expert downs (all-reduce)"));
  auto shared = [](const HP& hp, uint32_t, const HasTensorFn&) {
    return hp.n_expert_shared > 0 ? Need::kRequired : Need::kNotExpected;
  };
  auto sh_width = [](const HP& hp) { return I(hp.n_ff_exp * hp.n_expert_shared); };
  t.push_back(Block(
      "ffn_gate_shexp.weight", Scope::kMoeBlock,
      [sh_width](const HP& hp, uint32_t) {
        return Dims{I(hp.n_embd), sh_width(hp)};
      },
      shared, false, SplitKind::kOutputRows, one, "shared expert gate"));
  t.back().partition = Partition::kSharedFfn;
  t.push_back(Block(
      "ffn_up_shexp.weight", Scope::kMoeBlock,
      [sh_width](const HP& hp, uint32_t) {
        return Dims{I(hp.n_embd), sh_width(hp)};
      },
      shared, false, SplitKind::kOutputRows, one, "shared expert up"));
  t.back().partition = Partition::kSharedFfn;
  t.push_back(Block(
      "ffn_down_shexp.weight", Scope::kMoeBlock,
      [sh_width](const HP& hp, uint32_t) {
        return Dims{sh_width(hp), I(hp.n_embd)};
      },
      shared, false, SplitKind::kInputColumns, one, "shared expert down (all-reduce)"));
  t.back().partition = Partition::kSharedFfn;
}

// Multi-head latent attention (spec 10.2-10.4).
void AddMla(std::vector<TensorSpec>& t) {
  auto q_lora = [](const HP& hp, uint32_t, const HasTensorFn&) {
    return hp.q_lora_rank > 0 ? Need::kRequired : Need::kNotExpected;
  };
  auto no_q_lora = [](const HP& hp, uint32_t, const HasTensorFn&) {
    return hp.q_lora_rank > 0 ? Need::kNotExpected : Need::kRequired;
  };
  auto split_kv_b = [](const HP& hp, uint32_t, const HasTensorFn&) {
    return hp.mla_split_kv_b ? Need::kRequired : Need::kNotExpected;
  };
  auto legacy_kv_b = [](const HP& hp, uint32_t, const HasTensorFn&) {
    return hp.mla_split_kv_b ? Need::kNotExpected : Need::kRequired;
  };
  auto dq = [](const HP& hp, uint32_t) { return I(hp.key_length_mla); };
  auto one = [](const HP&, uint32_t) { return int64_t{1}; };
  t.push_back(Norm(
      "attn_norm.weight", Scope::kBlock, [](const HP& hp, uint32_t) { return I(hp.n_embd); },
      Required, "pre-attention RMSNorm"));
  t.push_back(Block(
      "attn_q_a.weight", Scope::kBlock,
      [](const HP& hp, uint32_t) {
        return Dims{I(hp.n_embd), I(hp.q_lora_rank)};
      },
      q_lora, false, SplitKind::kReplicated, nullptr, "q down-projection (per token: replicated)"));
  t.push_back(Norm(
      "attn_q_a_norm.weight", Scope::kBlock,
      [](const HP& hp, uint32_t) { return I(hp.q_lora_rank); }, q_lora, "RMSNorm of the q latent"));
  t.push_back(Block(
      "attn_q_b.weight", Scope::kBlock,
      [](const HP& hp, uint32_t l) {
        return Dims{I(hp.q_lora_rank), I(hp.n_head[l] * hp.key_length_mla)};
      },
      q_lora, false, SplitKind::kOutputRows, dq, "q up-projection (whole heads per rank)"));
  t.back().partition = Partition::kHeads;
  t.push_back(Block(
      "attn_q.weight", Scope::kBlock,
      [](const HP& hp, uint32_t l) {
        return Dims{I(hp.n_embd), I(hp.n_head[l] * hp.key_length_mla)};
      },
      no_q_lora, false, SplitKind::kOutputRows, dq, "W_q without q LoRA (whole heads per rank)"));
  t.back().partition = Partition::kHeads;
  t.push_back(Block(
      "attn_kv_a_mqa.weight", Scope::kBlock,
      [](const HP& hp, uint32_t) {
        return Dims{I(hp.n_embd), I(hp.kv_lora_rank + hp.n_rot)};
      },
      Required, false, SplitKind::kReplicated, nullptr, "KV latent + shared rope key"));
  t.push_back(Norm(
      "attn_kv_a_norm.weight", Scope::kBlock,
      [](const HP& hp, uint32_t) { return I(hp.kv_lora_rank); }, Required,
      "RMSNorm of the KV latent"));
  t.push_back(Block(
      "attn_k_b.weight", Scope::kBlock,
      [](const HP& hp, uint32_t l) {
        return Dims{I(hp.qk_nope()), I(hp.kv_lora_rank), I(hp.n_head[l])};
      },
      split_kv_b, false, SplitKind::kHeads, one, "per-head (W_UK)^T, absorbed into q"));
  t.back().partition = Partition::kHeads;
  t.push_back(Block(
      "attn_v_b.weight", Scope::kBlock,
      [](const HP& hp, uint32_t l) {
        return Dims{I(hp.kv_lora_rank), I(hp.value_length_mla), I(hp.n_head[l])};
      },
      split_kv_b, false, SplitKind::kHeads, one, "per-head W_UV"));
  t.back().partition = Partition::kHeads;
  t.push_back(Block(
      "attn_kv_b.weight", Scope::kBlock,
      [](const HP& hp, uint32_t l) {
        return Dims{I(hp.kv_lora_rank), I(hp.n_head[l] * (hp.qk_nope() + hp.value_length_mla))};
      },
      legacy_kv_b, false, SplitKind::kOutputRows,
      [](const HP& hp, uint32_t) { return I(hp.qk_nope() + hp.value_length_mla); },
      "legacy unsplit kv_b_proj (split into attn_k_b/attn_v_b at load)"));
  t.back().partition = Partition::kHeads;
  t.push_back(Block(
      "attn_output.weight", Scope::kBlock,
      [](const HP& hp, uint32_t l) {
        return Dims{I(hp.n_head[l] * hp.value_length_mla), I(hp.n_embd)};
      },
      Required, false, SplitKind::kInputColumns,
      [](const HP& hp, uint32_t) { return I(hp.value_length_mla); },
      "W_o (input columns by head, all-reduce)"));
  t.back().partition = Partition::kHeads;
}

// The DSA lightning indexer (spec 12.2, 12.4); small, so replicated (spec 16).
void AddIndexer(std::vector<TensorSpec>& t) {
  auto need = [](const HP& hp, uint32_t l, const HasTensorFn&) {
    bool full = l < hp.indexer_full.size() ? hp.indexer_full[l] : true;
    return full ? Need::kRequired : Need::kOptional;
  };
  auto di = [](const HP& hp, uint32_t) { return I(hp.indexer_head_dim); };
  t.push_back(Block(
      "indexer.attn_q_b.weight", Scope::kBlock,
      [](const HP& hp, uint32_t) {
        return Dims{I(hp.q_lora_rank), I(hp.indexer_heads * hp.indexer_head_dim)};
      },
      need, false, SplitKind::kReplicated, nullptr, "indexer query up-projection"));
  t.push_back(Block(
      "indexer.attn_k.weight", Scope::kBlock,
      [](const HP& hp, uint32_t) {
        return Dims{I(hp.n_embd), I(hp.indexer_head_dim)};
      },
      need, false, SplitKind::kReplicated, nullptr, "indexer key projection"));
  t.push_back(
      Norm("indexer.k_norm.weight", Scope::kBlock, di, need, "indexer key LayerNorm weight"));
  t.push_back(Norm("indexer.k_norm.bias", Scope::kBlock, di, need, "indexer key LayerNorm bias"));
  t.push_back(Block(
      "indexer.proj.weight", Scope::kBlock,
      [](const HP& hp, uint32_t) {
        return Dims{I(hp.n_embd), I(hp.indexer_heads)};
      },
      need, true, SplitKind::kReplicated, nullptr,
      "indexer head weights (HF weights_proj; float)"));
  for (TensorSpec& spec : t) {
    if (absl::StartsWith(spec.name, "indexer.")) spec.mtp_unused = true;
  }
}

// The NextN/MTP block's own tensors (spec 12.6; llama.cpp src/models/glm-dsa.cpp): the
// input norms and projection, and the optional head and embedding of its own. Small next
// to the block's experts, so the projection is replicated; a head of its own is
// vocabulary-parallel like output.weight.
std::vector<TensorSpec> NextnTensors() {
  auto d = [](const HP& hp, uint32_t) { return I(hp.n_embd); };
  auto vocab = [](const HP& hp, uint32_t) { return Dims{I(hp.n_embd), I(hp.n_vocab)}; };
  std::vector<TensorSpec> t;
  t.push_back(Block(
      "nextn.eh_proj.weight", Scope::kBlock,
      [](const HP& hp, uint32_t) {
        return Dims{I(2 * hp.n_embd), I(hp.n_embd)};
      },
      Required, false, SplitKind::kReplicated, nullptr,
      "MTP input projection of [enorm(embedding) ; hnorm(trunk hidden)]"));
  t.push_back(Norm("nextn.enorm.weight", Scope::kBlock, d, Required,
                   "MTP RMSNorm of the next token's embedding"));
  t.push_back(
      Norm("nextn.hnorm.weight", Scope::kBlock, d, Required, "MTP RMSNorm of the trunk hidden"));
  t.push_back(Norm("nextn.shared_head_norm.weight", Scope::kBlock, d, Optional,
                   "MTP head RMSNorm (absent: output_norm)"));
  t.push_back(Block("nextn.shared_head_head.weight", Scope::kBlock, vocab, Optional, false,
                    SplitKind::kOutputRows, nullptr, "MTP LM head (absent: output.weight)"));
  t.back().partition = Partition::kVocab;
  t.push_back(Block("nextn.embed_tokens.weight", Scope::kBlock, vocab, Optional, false,
                    SplitKind::kOutputRows, nullptr, "MTP token embeddings (absent: token_embd)"));
  t.back().partition = Partition::kVocab;
  return t;
}

TensorSpec FfnNorm(const char* name) {
  return Norm(
      name, Scope::kBlock, [](const HP& hp, uint32_t) { return I(hp.n_embd); }, Required,
      "pre-FFN RMSNorm");
}

std::vector<ArchSpec> BuildRegistry() {
  std::vector<ArchSpec> r;
  {
    ArchSpec a;
    a.name = "llama";
    a.keys = CommonKeys(true);
    AddGlobals(a.tensors, false, true);
    AddDenseAttention(a.tensors, {Need::kNotExpected, true, true});
    a.tensors.push_back(FfnNorm("ffn_norm.weight"));
    AddDenseFfn(a.tensors, Scope::kBlock);
    a.rope_type = RopeType::kNorm;
    a.notes = "dense GQA, RoPE NORM (spec 6)";
    r.push_back(std::move(a));
  }
  {
    ArchSpec a;
    a.name = "qwen2";
    a.keys = CommonKeys(true);
    AddGlobals(a.tensors, true, false);
    AddDenseAttention(a.tensors, {Need::kNotExpected, true, false});
    a.tensors.push_back(FfnNorm("ffn_norm.weight"));
    AddDenseFfn(a.tensors, Scope::kBlock);
    a.rope_type = RopeType::kNeox;
    a.notes = "dense GQA with Q/K/V biases, RoPE NEOX (spec 7)";
    r.push_back(std::move(a));
  }
  {
    ArchSpec a;
    a.name = "qwen3";
    a.keys = CommonKeys(true);
    AddGlobals(a.tensors, false, false);
    AddDenseAttention(a.tensors, {Need::kRequired, true, false});
    a.tensors.push_back(FfnNorm("ffn_norm.weight"));
    AddDenseFfn(a.tensors, Scope::kBlock);
    a.rope_type = RopeType::kNeox;
    a.notes = "dense GQA with per-head Q/K RMSNorm, RoPE NEOX (spec 8)";
    r.push_back(std::move(a));
  }
  {
    ArchSpec a;
    a.name = "qwen3moe";
    a.keys = CommonKeys(false);
    Append(a.keys, MoeKeys(false, false));
    AddGlobals(a.tensors, false, false);
    AddDenseAttention(a.tensors, {Need::kRequired, true, false});
    a.tensors.push_back(FfnNorm("ffn_norm.weight"));
    AddMoe(a.tensors, {Need::kNotExpected, false});
    a.rope_type = RopeType::kNeox;
    a.forward.moe_always_norm = true;  // llama.cpp hard-codes it for qwen3moe
    a.notes = "qwen3 attention + softmax MoE, always renormalised (spec 9)";
    r.push_back(std::move(a));
  }
  {
    ArchSpec a;
    a.name = "deepseek2";
    a.keys = CommonKeys(false);
    Append(a.keys, MoeKeys(true, true));
    Append(a.keys, MlaKeys(false));
    a.keys.push_back(
        {"rope.scaling.yarn_log_multiplier", KeyNeed::kQuiet, &HP::yarn_log_multiplier, 0.0});
    AddGlobals(a.tensors, false, false);
    AddMla(a.tensors);
    a.tensors.push_back(FfnNorm("ffn_norm.weight"));
    AddDenseFfn(a.tensors, Scope::kDenseBlock);
    AddMoe(a.tensors, {Need::kOptional, true});
    a.rope_type = RopeType::kNorm;
    a.forward = {.mla = true, .mla_yarn_log_multiplier = true};
    a.nextn_tensors = NextnTensors();  // DeepSeek-V3's layer 61
    a.notes = "MLA + MoE with shared experts (spec 10)";
    r.push_back(std::move(a));
  }
  {
    ArchSpec a;
    a.name = "glm4moe";
    a.keys = CommonKeys(false);
    Append(a.keys, MoeKeys(true, true));
    AddGlobals(a.tensors, false, false);
    AddDenseAttention(a.tensors, {Need::kOptional, true, false});
    // glm4moe's pre-FFN norm is named post_attention_norm (spec 11.2 naming trap).
    a.tensors.push_back(FfnNorm("post_attention_norm.weight"));
    AddDenseFfn(a.tensors, Scope::kDenseBlock);
    AddMoe(a.tensors, {Need::kRequired, false});
    a.rope_type = RopeType::kNeox;
    a.default_gating = GatingFunc::kSigmoid;
    a.notes = "GQA with partial RoPE + sigmoid MoE with shared expert (spec 11)";
    r.push_back(std::move(a));
  }
  {
    ArchSpec a;
    a.name = "glm-dsa";
    a.keys = CommonKeys(false);
    Append(a.keys, MoeKeys(true, true));
    Append(a.keys, MlaKeys(true));
    Append(a.keys, {{"attention.indexer.head_count", KeyNeed::kRequired, &HP::indexer_heads},
                    {"attention.indexer.key_length", KeyNeed::kRequired, &HP::indexer_head_dim},
                    {"attention.indexer.top_k", KeyNeed::kRequired, &HP::indexer_top_k}});
    AddGlobals(a.tensors, false, false);
    AddMla(a.tensors);
    AddIndexer(a.tensors);
    a.tensors.push_back(FfnNorm("ffn_norm.weight"));
    AddDenseFfn(a.tensors, Scope::kDenseBlock);
    AddMoe(a.tensors, {Need::kOptional, false});
    a.rope_type = RopeType::kNorm;
    // deepseek2's MLA without its yarn_log_multiplier in the scale (spec 12.1, 17.12).
    a.forward = {.mla = true, .dsa = true};
    a.nextn_tensors = NextnTensors();  // GLM-5's blk.78
    a.default_gating = GatingFunc::kSigmoid;
    a.mla_requires_split_kv_b = true;
    a.notes = "MLA + sigmoid MoE + DSA lightning indexer + MTP block (spec 12)";
    r.push_back(std::move(a));
  }
  return r;
}

const std::vector<ArchSpec>& Registry() {
  static const std::vector<ArchSpec>* registry = new std::vector<ArchSpec>(BuildRegistry());
  return *registry;
}

}  // namespace

std::string_view SplitKindName(SplitKind k) {
  switch (k) {
    case SplitKind::kReplicated:
      return "replicated";
    case SplitKind::kOutputRows:
      return "split by output rows";
    case SplitKind::kInputColumns:
      return "split by input columns";
    case SplitKind::kHeads:
      return "split by heads";
    case SplitKind::kExpertRows:
      return "split by experts' intermediate rows";
    case SplitKind::kExpertColumns:
      return "split by experts' intermediate columns";
  }
  return "?";
}

std::string_view PartitionName(Partition p) {
  switch (p) {
    case Partition::kNone:
      return "replicated";
    case Partition::kVocab:
      return "vocabulary";
    case Partition::kHeads:
      return "attention heads";
    case Partition::kKvHeads:
      return "KV heads";
    case Partition::kFfn:
      return "dense FFN";
    case Partition::kExpertFfn:
      return "routed experts";
    case Partition::kSharedFfn:
      return "shared experts";
  }
  return "?";
}

int SplitDim(SplitKind k, size_t n_dims) {
  switch (k) {
    case SplitKind::kReplicated:
      return -1;
    case SplitKind::kOutputRows:
      return n_dims == 1 ? 0 : 1;
    case SplitKind::kInputColumns:
    case SplitKind::kExpertColumns:
      return 0;
    case SplitKind::kHeads:
      return 2;
    case SplitKind::kExpertRows:
      return 1;
  }
  return -1;
}

const ArchSpec* FindArch(std::string_view name) {
  for (const ArchSpec& a : Registry()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::vector<std::string> SupportedArchNames() {
  std::vector<std::string> out;
  for (const ArchSpec& a : Registry()) out.push_back(a.name);
  return out;
}

std::string TensorName(const TensorSpec& spec, uint32_t layer) {
  if (spec.scope == Scope::kGlobal) return spec.name;
  return absl::StrCat("blk.", layer, ".", spec.name);
}

}  // namespace tessera::model
