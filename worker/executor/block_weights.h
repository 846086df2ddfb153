// A block's weights by role, and the one list that names them after the file's tensors.
// The CPU pass holds host vectors and quantized matrix views
// (BlockWeights<std::vector<float>, QuantMatrix>), the GPU pass device pointers and device
// matrices (BlockWeights<const float*, DeviceMatrix>); both are filled from the one list in
// ForEachBlockWeight, so a new weight is added here once.
#pragma once

#include <string_view>

namespace tessera::executor {

// Every member is value-initialized: null pointers and empty views until loaded.
template <typename Vec, typename Mat>
struct BlockWeights {
  Vec attn_norm{}, ffn_norm{};
  // GQA
  Vec q_norm{}, k_norm{}, q_bias{}, k_bias{}, v_bias{}, o_bias{};
  Mat wq{}, wk{}, wv{}, wo{};
  // MLA (wq above when there is no q LoRA)
  Vec q_a_norm{}, kv_a_norm{};
  Mat wq_a{}, wq_b{}, wkv_a{}, wk_b{}, wv_b{};
  // DSA indexer
  Vec idx_k_norm_w{}, idx_k_norm_b{};
  Mat idx_q_b{}, idx_k{}, idx_proj{};
  // FFN: dense, routed experts, shared experts
  Mat w_gate{}, w_up{}, w_down{};
  Vec exp_probs_b{};
  Mat router{}, gate_exps{}, up_exps{}, down_exps{}, gate_sh{}, up_sh{}, down_sh{};
  // NextN/MTP block only (spec 12.6): the input norms and projection, and the head's norm
  // and matrix where the block has its own (else output_norm / output).
  Vec nextn_enorm{}, nextn_hnorm{}, nextn_head_norm{};
  Mat nextn_eh_proj{}, nextn_head{};
};

// Calls vec(name, w.member...) for each vector weight and mat(name, w.member...) for each
// matrix, `name` being the tensor's name within its block ("attn_q.weight"). With several
// BlockWeights (a host copy and its device copy, say) the same member of each is passed
// together.
template <typename VecFn, typename MatFn, typename... W>
void ForEachBlockWeight(VecFn&& vec, MatFn&& mat, W&... w) {
  vec("attn_norm.weight", w.attn_norm...);
  vec("ffn_norm.weight", w.ffn_norm...);
  vec("attn_q_norm.weight", w.q_norm...);
  vec("attn_k_norm.weight", w.k_norm...);
  vec("attn_q.bias", w.q_bias...);
  vec("attn_k.bias", w.k_bias...);
  vec("attn_v.bias", w.v_bias...);
  vec("attn_output.bias", w.o_bias...);
  vec("attn_q_a_norm.weight", w.q_a_norm...);
  vec("attn_kv_a_norm.weight", w.kv_a_norm...);
  vec("exp_probs_b.bias", w.exp_probs_b...);
  vec("indexer.k_norm.weight", w.idx_k_norm_w...);
  vec("indexer.k_norm.bias", w.idx_k_norm_b...);
  mat("attn_q.weight", w.wq...);
  mat("attn_k.weight", w.wk...);
  mat("attn_v.weight", w.wv...);
  mat("attn_output.weight", w.wo...);
  mat("attn_q_a.weight", w.wq_a...);
  mat("attn_q_b.weight", w.wq_b...);
  mat("attn_kv_a_mqa.weight", w.wkv_a...);
  mat("attn_k_b.weight", w.wk_b...);
  mat("attn_v_b.weight", w.wv_b...);
  mat("indexer.attn_q_b.weight", w.idx_q_b...);
  mat("indexer.attn_k.weight", w.idx_k...);
  mat("indexer.proj.weight", w.idx_proj...);
  mat("ffn_gate.weight", w.w_gate...);
  mat("ffn_up.weight", w.w_up...);
  mat("ffn_down.weight", w.w_down...);
  mat("ffn_gate_inp.weight", w.router...);
  mat("ffn_gate_exps.weight", w.gate_exps...);
  mat("ffn_up_exps.weight", w.up_exps...);
  mat("ffn_down_exps.weight", w.down_exps...);
  mat("ffn_gate_shexp.weight", w.gate_sh...);
  mat("ffn_up_shexp.weight", w.up_sh...);
  mat("ffn_down_shexp.weight", w.down_sh...);
  vec("nextn.enorm.weight", w.nextn_enorm...);
  vec("nextn.hnorm.weight", w.nextn_hnorm...);
  vec("nextn.shared_head_norm.weight", w.nextn_head_norm...);
  mat("nextn.eh_proj.weight", w.nextn_eh_proj...);
  mat("nextn.shared_head_head.weight", w.nextn_head...);
}

// A block tensor's role name where the file uses another: glm4moe's pre-FFN norm is named
// post_attention_norm (spec 11.2).
inline std::string_view BlockWeightName(std::string_view name) {
  return name == "post_attention_norm.weight" ? std::string_view("ffn_norm.weight") : name;
}

}  // namespace tessera::executor
