#include "common/model/hparams.h"

#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/model/arch.h"
#include "nlohmann/json.hpp"

namespace tessera::model {
namespace {

using gguf::Value;

void AddProblem(std::vector<KeyProblem>* p, bool error, std::string key, std::string msg) {
  p->push_back({error, std::move(key), std::move(msg)});
}

// HuggingFace config.json fields -> our fields (names as in DeepSeek/GLM/Qwen/Llama configs).
void ApplyHfConfig(const nlohmann::json& hf, HyperParams& hp,
                   absl::flat_hash_set<std::string>& supplied, std::vector<KeyProblem>* problems) {
  auto u32 = [&](const char* hf_name, uint32_t& field, const char* suffix) {
    if (hf.contains(hf_name) && hf[hf_name].is_number_integer() &&
        hf[hf_name].get<int64_t>() >= 0) {
      field = hf[hf_name].get<uint32_t>();
      supplied.insert(suffix);
    }
  };
  auto vec = [&](const char* hf_name, std::vector<uint32_t>& field, const char* suffix) {
    if (hf.contains(hf_name) && hf[hf_name].is_number_integer()) {
      field = {hf[hf_name].get<uint32_t>()};
      supplied.insert(suffix);
    }
  };
  auto f32 = [&](const char* hf_name, float& field, const char* suffix) {
    if (hf.contains(hf_name) && hf[hf_name].is_number()) {
      field = hf[hf_name].get<float>();
      supplied.insert(suffix);
    }
  };
  u32("vocab_size", hp.n_vocab, "vocab_size");
  u32("max_position_embeddings", hp.n_ctx_train, "context_length");
  u32("hidden_size", hp.n_embd, "embedding_length");
  vec("intermediate_size", hp.n_ff, "feed_forward_length");
  vec("num_attention_heads", hp.n_head, "attention.head_count");
  u32("head_dim", hp.head_dim_k, "attention.key_length");
  f32("rms_norm_eps", hp.rms_eps, "attention.layer_norm_rms_epsilon");
  f32("rope_theta", hp.rope_freq_base, "rope.freq_base");
  u32("num_nextn_predict_layers", hp.n_nextn, "nextn_predict_layers");
  u32("moe_intermediate_size", hp.n_ff_exp, "expert_feed_forward_length");
  u32("n_routed_experts", hp.n_expert, "expert_count");
  u32("num_experts", hp.n_expert, "expert_count");
  u32("num_experts_per_tok", hp.n_expert_used, "expert_used_count");
  u32("n_shared_experts", hp.n_expert_shared, "expert_shared_count");
  u32("first_k_dense_replace", hp.n_leading_dense, "leading_dense_block_count");
  u32("n_group", hp.n_expert_groups, "expert_group_count");
  u32("topk_group", hp.n_group_used, "expert_group_used_count");
  f32("routed_scaling_factor", hp.expert_weights_scale, "expert_weights_scale");
  u32("q_lora_rank", hp.q_lora_rank, "attention.q_lora_rank");
  u32("kv_lora_rank", hp.kv_lora_rank, "attention.kv_lora_rank");
  u32("index_n_heads", hp.indexer_heads, "attention.indexer.head_count");
  u32("index_head_dim", hp.indexer_head_dim, "attention.indexer.key_length");
  u32("index_topk", hp.indexer_top_k, "attention.indexer.top_k");
  if (hf.contains("num_hidden_layers") && hf["num_hidden_layers"].is_number_integer()) {
    // HF counts trunk layers only; GGUF's block_count includes the MTP blocks.
    uint32_t nextn = hf.value("num_nextn_predict_layers", 0u);
    hp.n_layer_all = hf["num_hidden_layers"].get<uint32_t>() + nextn;
    supplied.insert("block_count");
  }
  if (hf.contains("num_key_value_heads") && hf["num_key_value_heads"].is_number_integer() &&
      hp.kv_lora_rank == 0) {
    hp.n_head_kv = {hf["num_key_value_heads"].get<uint32_t>()};
    supplied.insert("attention.head_count_kv");
  }
  if (hf.contains("qk_rope_head_dim") && hf.contains("qk_nope_head_dim")) {
    hp.n_rot = hf["qk_rope_head_dim"].get<uint32_t>();
    hp.key_length_mla = hp.n_rot + hf["qk_nope_head_dim"].get<uint32_t>();
    supplied.insert("rope.dimension_count");
    supplied.insert("attention.key_length_mla");
  }
  u32("v_head_dim", hp.value_length_mla, "attention.value_length_mla");
  if (hf.contains("norm_topk_prob") && hf["norm_topk_prob"].is_boolean()) {
    hp.expert_weights_norm = hf["norm_topk_prob"].get<bool>();
    supplied.insert("expert_weights_norm");
  }
  if (hf.contains("scoring_func") && hf["scoring_func"].is_string()) {
    hp.gating_func = hf["scoring_func"] == "sigmoid" ? 2 : 1;
    supplied.insert("expert_gating_func");
  }
  if (!supplied.empty()) {
    AddProblem(
        problems, false, "--hf-config",
        absl::StrCat("HuggingFace config supplied or overrode ", supplied.size(), " values"));
  }
}

// Reads one key into its field. Returns false when the key is absent.
bool ReadKey(const KeySpec& k, const std::string& key, const gguf::Metadata& md, HyperParams& hp,
             std::vector<KeyProblem>* problems) {
  const Value* v = md.Find(key);
  if (v == nullptr) return false;
  auto wrong = [&](const char* expected) {
    AddProblem(problems, true, key,
               absl::StrCat("metadata key '", key, "': expected ", expected, ", file has ",
                            gguf::ValueTypeName(v->type())));
  };
  std::visit(
      [&](auto member) {
        using T = std::remove_reference_t<decltype(hp.*member)>;
        if constexpr (std::is_same_v<T, uint32_t>) {
          auto u = v->AsUint();
          if (!gguf::IsIntegerType(v->type()) || !u || *u > UINT32_MAX)
            return wrong("an unsigned integer");
          hp.*member = static_cast<uint32_t>(*u);
        } else if constexpr (std::is_same_v<T, float>) {
          auto d = v->AsDouble();
          if (!d || v->type() == gguf::ValueType::kBool) return wrong("a number");
          hp.*member = static_cast<float>(*d);
        } else if constexpr (std::is_same_v<T, bool>) {
          auto b = v->AsBool();
          if (!b) return wrong("bool");
          hp.*member = *b;
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (!v->AsString()) return wrong("string");
          hp.*member = *v->AsString();
        } else {  // per-layer array or scalar
          if (const gguf::Array* a = v->AsArray()) {
            std::vector<uint32_t> out;
            for (const Value& item : a->items) {
              auto u = item.AsUint();
              if (!u || *u > UINT32_MAX) return wrong("an array of unsigned integers");
              out.push_back(static_cast<uint32_t>(*u));
            }
            hp.*member = std::move(out);
          } else {
            auto u = v->AsUint();
            if (!gguf::IsIntegerType(v->type()) || !u) return wrong("an unsigned integer or array");
            hp.*member = {static_cast<uint32_t>(*u)};
          }
        }
      },
      k.field);
  return true;
}

void SetDefault(const KeySpec& k, HyperParams& hp) {
  std::visit(
      [&](auto member) {
        using T = std::remove_reference_t<decltype(hp.*member)>;
        if constexpr (std::is_same_v<T, uint32_t>) {
          hp.*member = static_cast<uint32_t>(k.default_value);
        } else if constexpr (std::is_same_v<T, float>) {
          hp.*member = static_cast<float>(k.default_value);
        } else if constexpr (std::is_same_v<T, bool>) {
          hp.*member = k.default_value != 0;
        }
      },
      k.field);
}

// Broadcasts a scalar per-layer value, or checks an array's length.
void PerLayer(std::vector<uint32_t>& v, uint32_t n, uint32_t dflt, const std::string& key,
              std::vector<KeyProblem>* problems) {
  if (v.empty()) v = {dflt};
  if (v.size() == 1) {
    v.assign(n, v[0]);
  } else if (v.size() != n) {
    AddProblem(problems, true, key,
               absl::StrCat("metadata key '", key, "': per-layer array has ", v.size(),
                            " entries, block_count is ", n));
    v.resize(n, v.empty() ? dflt : v.back());
  }
}

}  // namespace

HyperParams LoadHyperParams(const ArchSpec& arch, const std::string& key_prefix,
                            const gguf::Metadata& md, const nlohmann::json* hf_config,
                            std::vector<KeyProblem>* problems) {
  HyperParams hp;
  hp.arch = arch.name;
  absl::flat_hash_set<std::string> present;
  for (const KeySpec& k : arch.keys) {
    std::string key = absl::StrCat(key_prefix, ".", k.suffix);
    if (ReadKey(k, key, md, hp, problems)) {
      present.insert(k.suffix);
    } else {
      SetDefault(k, hp);
    }
  }
  absl::flat_hash_set<std::string> supplied;
  if (hf_config != nullptr) {
    try {
      ApplyHfConfig(*hf_config, hp, supplied, problems);
    } catch (const nlohmann::json::exception& e) {
      // A field of an unexpected type (e.g. a string where a number belongs).
      AddProblem(problems, true, "--hf-config", absl::StrCat("--hf-config: ", e.what()));
    }
  }
  for (const KeySpec& k : arch.keys) {
    if (present.contains(k.suffix) || supplied.contains(k.suffix)) continue;
    std::string key = absl::StrCat(key_prefix, ".", k.suffix);
    if (k.need == KeyNeed::kRequired) {
      AddProblem(problems, true, key, absl::StrCat("required metadata key '", key, "' is missing"));
    } else if (k.need == KeyNeed::kOptional) {
      AddProblem(problems, false, key,
                 absl::StrCat("metadata key '", key, "' is absent; using the default"));
    }
  }

  // Derived defaults (spec section 4 and the per-architecture sections).
  const std::string p = key_prefix + ".";
  if (hp.n_vocab == 0) {
    if (const Value* t = md.Find("tokenizer.ggml.tokens"); t && t->AsArray()) {
      hp.n_vocab = static_cast<uint32_t>(t->AsArray()->items.size());
    }
  }
  if (hp.n_nextn > hp.n_layer_all) {
    AddProblem(
        problems, true, p + "nextn_predict_layers",
        absl::StrCat("nextn_predict_layers ", hp.n_nextn, " exceeds block_count ", hp.n_layer_all));
    hp.n_nextn = 0;
  }
  hp.n_layer = hp.n_layer_all - hp.n_nextn;
  PerLayer(hp.n_head, hp.n_layer_all, 0, p + "attention.head_count", problems);
  PerLayer(hp.n_head_kv, hp.n_layer_all, hp.n_head.empty() ? 0 : hp.n_head[0],
           p + "attention.head_count_kv", problems);
  PerLayer(hp.n_ff, hp.n_layer_all, 0, p + "feed_forward_length", problems);
  uint32_t h0 = hp.n_head.empty() ? 0 : hp.n_head[0];
  if (h0 == 0 && hp.n_layer_all > 0 && present.contains("attention.head_count")) {
    AddProblem(problems, true, p + "attention.head_count", "attention.head_count is 0");
  }
  if (hp.head_dim_k == 0 && h0 > 0) hp.head_dim_k = hp.n_embd / h0;
  if (hp.head_dim_v == 0 && h0 > 0) hp.head_dim_v = hp.n_embd / h0;
  if (hp.n_rot == 0) hp.n_rot = hp.head_dim_k;
  if (hp.rope_orig_ctx == 0) hp.rope_orig_ctx = hp.n_ctx_train;
  if (!present.contains("rope.scaling.type")) {
    hp.rope_scaling_type = hp.rope_scaling_factor > 0 ? "linear" : "none";
  }
  hp.rope_type = arch.rope_type;

  if (hp.is_moe()) {
    if (hp.n_ff_exp == 0 && hp.n_expert_used > 0 && !hp.n_ff.empty()) {
      hp.n_ff_exp = hp.n_ff[0] / hp.n_expert_used;  // qwen3moe's fallback (spec 9)
    }
    if (hp.n_expert_used > hp.n_expert || hp.n_expert_used == 0) {
      AddProblem(
          problems, true, p + "expert_used_count",
          absl::StrCat("expert_used_count ", hp.n_expert_used, " must be in 1..", hp.n_expert));
    }
    if (hp.n_expert_groups > 1 && (hp.n_expert % hp.n_expert_groups != 0 || hp.n_group_used == 0 ||
                                   hp.n_group_used >= hp.n_expert_groups)) {
      AddProblem(problems, true, p + "expert_group_count",
                 absl::StrCat("expert groups ", hp.n_expert_groups, " / used ", hp.n_group_used,
                              " do not fit ", hp.n_expert, " experts"));
    }
    hp.gating = arch.default_gating;
    if (hp.gating_func == 1 || hp.gating_func == 2) {
      hp.gating = static_cast<GatingFunc>(hp.gating_func);
    } else if (hp.gating_func != 0) {
      AddProblem(problems, true, p + "expert_gating_func",
                 absl::StrCat("expert_gating_func ", hp.gating_func,
                              " is neither 1 (softmax) nor 2 (sigmoid)"));
    } else if (arch.name == "deepseek2" && (hp.n_layer == 47 || hp.n_layer == 48) &&
               hp.n_vocab == 154880) {
      hp.gating = GatingFunc::kSigmoid;  // GLM-4.7-Flash files without the key (spec 10.1)
    }
  }

  if (hp.kv_lora_rank > 0) {
    hp.mla_split_kv_b = present.contains("attention.key_length_mla") &&
                        present.contains("attention.value_length_mla");
    if (supplied.contains("attention.key_length_mla")) hp.mla_split_kv_b = true;
    if (!hp.mla_split_kv_b) {
      if (arch.mla_requires_split_kv_b) {
        AddProblem(problems, true, p + "attention.key_length_mla",
                   absl::StrCat(arch.name,
                                " requires attention.key_length_mla and "
                                "attention.value_length_mla (the attn_k_b/attn_v_b form)"));
      }
      // Legacy files: key/value lengths are the real per-head dims (spec 10.4).
      hp.key_length_mla = hp.head_dim_k;
      hp.value_length_mla = hp.head_dim_v;
    }
    if (hp.key_length_mla <= hp.n_rot) {
      AddProblem(problems, true, p + "attention.key_length_mla",
                 absl::StrCat("MLA key length ", hp.key_length_mla,
                              " must exceed the rope dimension ", hp.n_rot));
      hp.key_length_mla = hp.n_rot + 1;
    }
  }

  if (hp.indexer_heads > 0) {
    const Value* types = md.Find(p + "attention.indexer.types");
    if (types && types->AsArray()) {
      for (const Value& v : types->AsArray()->items) {
        hp.indexer_full.push_back(v.AsInt().value_or(1) != 0);
      }
      if (hp.indexer_full.size() != hp.n_layer) {
        AddProblem(problems, true, p + "attention.indexer.types",
                   absl::StrCat("attention.indexer.types has ", hp.indexer_full.size(),
                                " entries, the trunk has ", hp.n_layer, " blocks"));
        hp.indexer_full.resize(hp.n_layer, true);
      }
    } else {
      // GLM-5/5.1: all full; GLM-5.2 (1M context): full at 0, 1, then every 4th from 2.
      for (uint32_t l = 0; l < hp.n_layer; ++l) {
        bool full = hp.n_ctx_train < 1048576 || l < 2 || (l - 2) % 4 == 0;
        hp.indexer_full.push_back(full);
      }
    }
  }
  return hp;
}

}  // namespace tessera::model
