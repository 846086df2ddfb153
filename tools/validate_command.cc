// tessera validate: reads a model's metadata only and reports, in seconds, whether and how
// Tessera would load it: hyper-parameters, every tensor's mapping, fixups and split, what is
// skipped and why, per-rank memory, KV capacity, and every problem found.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/gguf/split.h"
#include "common/model/arch.h"
#include "common/model/hparams.h"
#include "common/model/shard_plan.h"
#include "common/model/tensor_map.h"
#include "common/util/strings.h"
#include "nlohmann/json.hpp"
#include "tools/commands.h"
#include "tools/format.h"

namespace tessera::cli {
namespace {

using Json = nlohmann::ordered_json;
using model::HyperParams;

constexpr char kUsage[] =
    "usage: tessera validate --model FILE [--tp N] [--device-memory SIZE]\n"
    "                        [--gpu-memory-utilization F] [--max-model-len N]\n"
    "                        [--kv-dtype f16|bf16|f32] [--arch-as NAME] [--hf-config PATH]\n"
    "                        [--expert-parallel | --no-expert-parallel] [--json]\n"
    "\n"
    "Reads the model's metadata and tensor index only (no weights) and prints: architecture\n"
    "and hyper-parameters, every tensor's mapping, type, fixups and tensor-parallel split,\n"
    "what is skipped and why, per-rank weight and KV-cache memory, how many tokens of KV fit,\n"
    "and every problem found (all of them). Exit status 0 when the model is loadable, 1 when\n"
    "not, 2 for usage errors.\n"
    "\n"
    "  --model FILE               the GGUF (any part of a split set)\n"
    "  --tp N                     tensor-parallel ranks (default 1)\n"
    "  --device-memory SIZE       memory per device, e.g. 96GiB, 80GB, 24576MiB\n"
    "  --gpu-memory-utilization F fraction of device memory Tessera may use (default 0.9)\n"
    "  --max-model-len N          tokens one sequence must fit (default: context length)\n"
    "  --kv-dtype T               KV-cache element type for the estimate (default f16)\n"
    "  --arch-as NAME             treat an unknown general.architecture as NAME\n"
    "  --hf-config PATH           a HuggingFace config.json supplying or overriding values\n"
    "  --expert-parallel          deal the routed experts out whole to the ranks (default: where\n"
    "                             their hidden dim cannot be divided evenly in whole quant\n"
    "                             blocks)\n"
    "  --no-expert-parallel       divide every expert's hidden dim among the ranks instead\n"
    "  --json                     machine-readable output (schema \"tessera-validate/1\")\n"
    "\n"
    "At --tp N every part of a block is divided as evenly as whole heads and whole quant blocks\n"
    "allow (uneven shares where they must be); GQA ranks keep the KV heads their query heads\n"
    "use; a part that cannot be cut on block boundaries goes whole to one rank. The report\n"
    "names the strategy of each part, the per-rank memory and, under expert parallelism,\n"
    "which experts each rank holds.\n";

struct Options {
  std::string model, arch_as, hf_config;
  int tp = 1;
  std::optional<uint64_t> device_memory;
  double utilization = 0.9;
  std::optional<uint64_t> max_model_len;
  uint32_t kv_bytes = 2;
  model::ExpertParallel experts = model::ExpertParallel::kAuto;
  bool json = false;
};

// "96GiB" -> 96 * 2^30; "80GB" -> 80e9; plain numbers are bytes.
std::optional<uint64_t> ParseSize(const std::string& s) {
  struct Unit {
    const char* suffix;
    double scale;
  };
  static const Unit kUnits[] = {{"TiB", 1099511627776.0},
                                {"GiB", 1073741824.0},
                                {"MiB", 1048576.0},
                                {"KiB", 1024.0},
                                {"TB", 1e12},
                                {"GB", 1e9},
                                {"MB", 1e6},
                                {"KB", 1e3},
                                {"T", 1099511627776.0},
                                {"G", 1073741824.0},
                                {"M", 1048576.0},
                                {"K", 1024.0},
                                {"B", 1.0}};
  for (const Unit& u : kUnits) {
    if (absl::EndsWith(s, u.suffix)) {
      double v;
      if (!absl::SimpleAtod(s.substr(0, s.size() - std::string(u.suffix).size()), &v) || v <= 0) {
        return std::nullopt;
      }
      return static_cast<uint64_t>(v * u.scale);
    }
  }
  uint64_t v;
  if (absl::SimpleAtoi(s, &v) && v > 0) return v;
  return std::nullopt;
}

// The NextN/MTP draft head (what ExecutorOptions::load_mtp and `eval-logits --mtp` load):
// whether the model has one, its blocks and tensors, and what it adds to each rank's weights
// and KV cache over `trunk` (the plan without it). Never a problem of the model: the trunk
// loads without it; problems of the block itself are listed in the report.
Json MtpReport(const model::ArchSpec& arch, const HyperParams& hp, const std::string& prefix,
               const gguf::GgufModel& gg, const model::TensorMap& trunk_map,
               const model::ShardPlan& trunk, int tp, const model::PlanOptions& plan_options) {
  Json j;
  const std::string why = model::MtpUnavailable(arch, hp, prefix);
  j["available"] = why.empty();
  if (!why.empty()) {
    j["reason"] = why;
    return j;
  }
  model::TensorMap map = model::MapTensors(arch, hp, gg, {.mtp = true});
  Json blocks = Json::array();
  for (uint32_t l = hp.n_layer; l < hp.n_layer_all; ++l) blocks.push_back(l);
  j["blocks"] = blocks;
  size_t loaded = 0, skipped = 0;
  for (const model::TensorMapping& m : map.tensors) {
    if (m.layer < hp.n_layer || (m.spec == nullptr && m.status != model::MapStatus::kSkipped)) {
      continue;
    }
    if (m.loaded()) ++loaded;
    if (m.status == model::MapStatus::kSkipped) ++skipped;
  }
  j["tensors_loaded"] = loaded;
  j["tensors_skipped"] = skipped;
  Json problems = Json::array();
  for (const std::string& p : map.problems) {
    if (std::find(trunk_map.problems.begin(), trunk_map.problems.end(), p) ==
        trunk_map.problems.end()) {
      problems.push_back(p);
    }
  }
  model::ShardPlan plan = model::BuildShardPlan(map, hp, tp, plan_options);
  for (const std::string& p : plan.problems) {
    if (std::find(trunk.problems.begin(), trunk.problems.end(), p) == trunk.problems.end()) {
      problems.push_back(p);
    }
  }
  j["problems"] = problems;
  Json ranks = Json::array();
  for (size_t r = 0; r < plan.ranks.size() && r < trunk.ranks.size(); ++r) {
    ranks.push_back({{"rank", r},
                     {"weight_bytes", plan.ranks[r].weight_bytes - trunk.ranks[r].weight_bytes},
                     {"kv_bytes_per_token",
                      plan.ranks[r].kv_bytes_per_token - trunk.ranks[r].kv_bytes_per_token}});
  }
  j["ranks"] = ranks;
  return j;
}

// "1-8, 10" for {1, ..., 8, 10}.
std::string SizeRanges(const std::vector<int>& v) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    parts.push_back(j > i ? absl::StrCat(v[i], "-", v[j]) : absl::StrCat(v[i]));
    i = j + 1;
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

Json HyperParamsJson(const HyperParams& hp) {
  Json j;
  j["arch"] = hp.arch;
  j["n_vocab"] = hp.n_vocab;
  j["n_ctx_train"] = hp.n_ctx_train;
  j["n_embd"] = hp.n_embd;
  j["block_count"] = hp.n_layer_all;
  j["nextn_predict_layers"] = hp.n_nextn;
  j["n_layer"] = hp.n_layer;
  j["n_head"] = hp.n_head.empty() ? 0 : hp.n_head[0];
  j["n_head_kv"] = hp.n_head_kv.empty() ? 0 : hp.n_head_kv[0];
  j["n_ff"] = hp.n_ff.empty() ? 0 : hp.n_ff[0];
  j["head_dim_k"] = hp.head_dim_k;
  j["head_dim_v"] = hp.head_dim_v;
  j["n_rot"] = hp.n_rot;
  j["rope_type"] = hp.rope_type == model::RopeType::kNeox ? "neox" : "norm";
  j["rope_freq_base"] = ShortestFloat32(hp.rope_freq_base);
  j["rope_scaling_type"] = hp.rope_scaling_type;
  j["rope_scaling_factor"] = ShortestFloat32(hp.rope_scaling_factor);
  j["rms_eps"] = ShortestFloat32(hp.rms_eps);
  if (hp.is_moe()) {
    j["n_expert"] = hp.n_expert;
    j["n_expert_used"] = hp.n_expert_used;
    j["n_expert_shared"] = hp.n_expert_shared;
    j["n_ff_exp"] = hp.n_ff_exp;
    j["n_leading_dense"] = hp.n_leading_dense;
    j["expert_groups"] = hp.n_expert_groups;
    j["expert_groups_used"] = hp.n_group_used;
    j["expert_weights_scale"] = ShortestFloat32(hp.expert_weights_scale);
    j["expert_weights_norm"] = hp.expert_weights_norm;
    j["gating"] = hp.gating == model::GatingFunc::kSigmoid ? "sigmoid" : "softmax";
  }
  if (hp.is_mla()) {
    j["q_lora_rank"] = hp.q_lora_rank;
    j["kv_lora_rank"] = hp.kv_lora_rank;
    j["key_length_mla"] = hp.key_length_mla;
    j["value_length_mla"] = hp.value_length_mla;
    j["mla_form"] = hp.mla_split_kv_b ? "attn_k_b/attn_v_b" : "legacy attn_kv_b";
  }
  if (hp.indexer_heads > 0) {
    j["indexer_heads"] = hp.indexer_heads;
    j["indexer_head_dim"] = hp.indexer_head_dim;
    j["indexer_top_k"] = hp.indexer_top_k;
    j["indexer_full_layers"] = std::count(hp.indexer_full.begin(), hp.indexer_full.end(), true);
  }
  return j;
}

std::string TypeName(const gguf::TensorInfo* t) {
  return t ? gguf::GgmlTypeName(static_cast<uint32_t>(t->type)) : "-";
}

std::string DimsString(const std::vector<int64_t>& d) {
  return absl::StrCat("[", absl::StrJoin(d, ", "), "]");
}

int Validate(const Options& o) {
  Json r;
  r["format"] = "tessera-validate/1";
  r["file"] = o.model;
  std::vector<std::string> problems, warnings;
  auto finish = [&](bool loadable) {
    r["loadable"] = loadable;
    r["problems"] = problems;
    r["warnings"] = warnings;
    if (o.json) {
      std::printf("%s\n", JsonDump(r, 2).c_str());
    } else {
      for (const std::string& w : warnings) std::printf("warning: %s\n", w.c_str());
      for (const std::string& p : problems) std::printf("problem: %s\n", p.c_str());
      std::printf("%s: %s\n", o.model.c_str(),
                  loadable ? "loadable"
                           : absl::StrCat("NOT loadable (", problems.size(), " problem",
                                          problems.size() == 1 ? "" : "s", ")")
                                 .c_str());
    }
    return loadable ? 0 : 1;
  };

  auto gg = gguf::GgufModel::Open(o.model);
  if (!gg.ok()) {
    problems.push_back(std::string(gg.status().message()));
    return finish(false);
  }
  r["parts"] = gg->part_count();
  r["total_file_bytes"] = gg->total_file_bytes();
  const gguf::Metadata& md = gg->metadata();
  std::string file_arch = md.GetString("general.architecture").value_or("");
  r["file_architecture"] = file_arch;
  const model::ArchSpec* arch = model::FindArch(o.arch_as.empty() ? file_arch : o.arch_as);
  if (arch == nullptr) {
    std::string supported = absl::StrJoin(model::SupportedArchNames(), ", ");
    if (!o.arch_as.empty()) {
      problems.push_back(absl::StrCat("--arch-as ", o.arch_as, ": not a supported architecture (",
                                      supported, ")"));
    } else {
      problems.push_back(absl::StrCat(
          "unknown architecture '",
          file_arch.empty() ? "(general.architecture missing)" : file_arch,
          "'; supported: ", supported, ". Use --arch-as NAME to load it as a known family"));
    }
    return finish(false);
  }
  r["architecture"] = arch->name;
  if (!o.arch_as.empty() && o.arch_as != file_arch) {
    warnings.push_back(absl::StrCat("loading '", file_arch, "' as '", arch->name,
                                    "' (--arch-as); keys are read with the prefix '", file_arch,
                                    ".'"));
  }

  std::optional<nlohmann::json> hf;
  if (!o.hf_config.empty()) {
    std::ifstream in(o.hf_config);
    if (!in) {
      problems.push_back(absl::StrCat("--hf-config ", o.hf_config, ": cannot read"));
      return finish(false);
    }
    hf = nlohmann::json::parse(in, nullptr, false);
    if (hf->is_discarded() || !hf->is_object()) {
      problems.push_back(absl::StrCat("--hf-config ", o.hf_config, ": not a JSON object"));
      return finish(false);
    }
  }
  std::vector<model::KeyProblem> key_problems;
  HyperParams hp = model::LoadHyperParams(*arch, file_arch.empty() ? arch->name : file_arch, md,
                                          hf ? &*hf : nullptr, &key_problems);
  for (const model::KeyProblem& k : key_problems)
    (k.error ? problems : warnings).push_back(k.message);
  r["hyperparameters"] = HyperParamsJson(hp);

  model::TensorMap map = model::MapTensors(*arch, hp, *gg);
  for (const std::string& p : map.problems) problems.push_back(p);
  // Optional probes: reported, never fatal.
  r["probes"] = {{"mtp_tensors", map.mtp_tensors},
                 {"chat_template", md.Find("tokenizer.chat_template") != nullptr},
                 {"tokenizer", md.GetString("tokenizer.ggml.model").value_or("")}};

  model::PlanOptions plan_options;
  plan_options.kv.kv_element_bytes = o.kv_bytes;
  plan_options.experts = o.experts;
  model::ShardPlan plan = model::BuildShardPlan(map, hp, o.tp, plan_options);
  for (const std::string& p : plan.problems) problems.push_back(p);
  std::vector<int> valid = model::ValidTpSizes(map, hp, 64, plan_options);
  if (!plan.problems.empty()) {
    problems.push_back(absl::StrCat(
        "--tp ", o.tp, " is not possible for this model; valid sizes: ", SizeRanges(valid)));
  }
  r["tp"] = o.tp;
  r["valid_tp"] = valid;
  r["expert_parallel"] = plan.expert_parallel;
  r["strategy"] = plan.strategy;
  r["mtp"] = MtpReport(*arch, hp, file_arch.empty() ? arch->name : file_arch, *gg, map, plan, o.tp,
                       plan_options);

  // Per-tensor mapping, with each rank's split range.
  Json tensors = Json::array();
  std::vector<const model::TensorShard*> rank0(map.tensors.size(), nullptr);
  if (plan.problems.empty()) {
    for (const model::TensorShard& s : plan.ranks[0].shards) rank0[s.mapping] = &s;
  }
  size_t skipped = 0, fixups = 0, found = 0;
  for (size_t i = 0; i < map.tensors.size(); ++i) {
    const model::TensorMapping& m = map.tensors[i];
    Json t;
    t["name"] = m.name;
    t["type"] = TypeName(m.info);
    t["shape"] = m.info ? Json(m.info->dims) : Json(nullptr);
    t["expected_shape"] = m.spec ? Json(m.expected) : Json(nullptr);
    t["status"] = std::string(model::MapStatusName(m.status));
    Json fx = Json::array();
    for (const model::Fixup& f : m.fixups) {
      fx.push_back({{"kind", std::string(model::FixupKindName(f.kind))}, {"detail", f.detail}});
      if (f.kind != model::FixupKind::kSkip) ++fixups;
    }
    t["fixups"] = fx;
    t["split"] = m.loaded() ? std::string(model::SplitKindName(m.spec->split)) : "-";
    if (!m.reason.empty()) t["reason"] = m.reason;
    if (m.status == model::MapStatus::kSkipped) ++skipped;
    if (m.loaded()) ++found;
    tensors.push_back(std::move(t));
  }
  r["tensors"] = tensors;
  r["summary"] = {{"tensors_in_file", gg->tensors().size()},
                  {"mapped", found},
                  {"skipped", skipped},
                  {"fixups", fixups}};

  // Memory.
  Json ranks = Json::array();
  std::optional<uint64_t> usable;
  if (o.device_memory)
    usable = static_cast<uint64_t>(static_cast<double>(*o.device_memory) * o.utilization);
  uint64_t max_len = o.max_model_len.value_or(hp.n_ctx_train);
  for (const model::RankPlan& rp : plan.ranks) {
    Json j = {{"rank", rp.rank},
              {"read_bytes", rp.read_bytes},
              {"weight_bytes", rp.weight_bytes},
              {"kv_bytes_per_token", rp.kv_bytes_per_token}};
    if (plan.expert_parallel) {
      // Per MoE block, the experts [begin, end) this rank holds.
      Json experts = Json::array();
      for (uint32_t l = 0; l < rp.blocks.size(); ++l) {
        if (!hp.is_moe_block(l)) continue;
        experts.push_back(
            {{"block", l}, {"experts", {rp.blocks[l].expert_begin, rp.blocks[l].expert_end}}});
      }
      j["experts"] = experts;
    }
    if (usable) {
      int64_t left = static_cast<int64_t>(*usable) - static_cast<int64_t>(rp.weight_bytes);
      uint64_t tokens = left > 0 && rp.kv_bytes_per_token > 0
                            ? static_cast<uint64_t>(left) / rp.kv_bytes_per_token
                            : 0;
      j["kv_budget_bytes"] = std::max<int64_t>(left, 0);
      j["kv_tokens"] = tokens;
      if (left <= 0) {
        problems.push_back(absl::StrCat("rank ", rp.rank, ": weights need ",
                                        HumanBytes(rp.weight_bytes), " but only ",
                                        HumanBytes(*usable), " of device memory is usable"));
      } else if (tokens < max_len) {
        problems.push_back(absl::StrCat("rank ", rp.rank, ": the KV cache fits ", tokens,
                                        " tokens, fewer than the max model length ", max_len));
      }
    }
    ranks.push_back(std::move(j));
  }
  r["ranks"] = ranks;
  r["memory"] = {{"device_bytes", o.device_memory ? Json(*o.device_memory) : Json(nullptr)},
                 {"utilization", o.utilization},
                 {"usable_bytes", usable ? Json(*usable) : Json(nullptr)},
                 {"max_model_len", max_len},
                 {"kv_element_bytes", o.kv_bytes}};

  if (!o.json) {
    std::printf("model:         %s (%zu part%s, %s)\n", o.model.c_str(), gg->part_count(),
                gg->part_count() == 1 ? "" : "s", HumanBytes(gg->total_file_bytes()).c_str());
    std::printf(
        "architecture:  %s%s — %s\n", arch->name.c_str(),
        file_arch != arch->name ? absl::StrCat(" (file says '", file_arch, "')").c_str() : "",
        arch->notes.c_str());
    std::printf("hyper-parameters:\n");
    for (const auto& [k, v] : r["hyperparameters"].items()) {
      std::printf("  %-22s %s\n", k.c_str(), JsonDump(v).c_str());
    }
    std::printf("probes:        MTP tensors %u; chat template %s\n", map.mtp_tensors,
                r["probes"]["chat_template"].get<bool>() ? "present" : "absent");
    std::printf("\n%-44s %-8s %-22s %-18s %-40s %s\n", "tensor", "type", "shape", "status", "split",
                "fixups / reason");
    for (size_t i = 0; i < map.tensors.size(); ++i) {
      const model::TensorMapping& m = map.tensors[i];
      std::string shape = m.info ? DimsString(m.info->dims) : DimsString(m.expected);
      std::string split = m.loaded() ? std::string(model::SplitKindName(m.spec->split)) : "-";
      if (rank0[i] && m.spec->split != model::SplitKind::kReplicated && o.tp > 1) {
        split += absl::StrCat(" (r0: ", rank0[i]->begin, "..", rank0[i]->end, ")");
      }
      std::vector<std::string> notes;
      for (const model::Fixup& f : m.fixups) {
        notes.push_back(f.kind == model::FixupKind::kSkip
                            ? absl::StrCat("skip: ", f.detail)
                            : absl::StrCat(ToAbsl(model::FixupKindName(f.kind)), ": ", f.detail));
      }
      if (notes.empty() && !m.reason.empty()) notes.push_back(m.reason);
      std::printf("%-44s %-8s %-22s %-18s %-40s %s\n", m.name.c_str(), TypeName(m.info).c_str(),
                  shape.c_str(), std::string(model::MapStatusName(m.status)).c_str(), split.c_str(),
                  absl::StrJoin(notes, "; ").c_str());
    }
    std::printf("\n%zu tensors in the file: %zu mapped, %zu skipped, %zu fixups\n",
                gg->tensors().size(), found, skipped, fixups);
    std::printf("tensor parallelism %d (valid: %s)\n", o.tp, SizeRanges(valid).c_str());
    std::printf("\n%-6s %14s %14s %16s %14s\n", "rank", "reads", "weights", "KV per token",
                usable ? "KV tokens" : "");
    for (const Json& j : r["ranks"]) {
      std::printf(
          "%-6d %14s %14s %16s %14s\n", j["rank"].get<int>(),
          HumanBytes(j["read_bytes"].get<uint64_t>()).c_str(),
          HumanBytes(j["weight_bytes"].get<uint64_t>()).c_str(),
          HumanBytes(j["kv_bytes_per_token"].get<uint64_t>()).c_str(),
          j.contains("kv_tokens") ? std::to_string(j["kv_tokens"].get<uint64_t>()).c_str() : "");
    }
    if (plan.ranks.size() > 1 && plan.problems.empty()) {
      uint64_t lo = plan.ranks[0].weight_bytes, hi = lo;
      for (const model::RankPlan& rp : plan.ranks) {
        lo = std::min(lo, rp.weight_bytes);
        hi = std::max(hi, rp.weight_bytes);
      }
      std::printf("per-rank weights within %.1f%% of each other (largest %s, smallest %s)\n",
                  lo > 0 ? 100.0 * static_cast<double>(hi - lo) / static_cast<double>(lo) : 0.0,
                  HumanBytes(hi).c_str(), HumanBytes(lo).c_str());
      std::printf("strategy:\n");
      for (const std::string& line : plan.strategy) std::printf("  %s\n", line.c_str());
      if (plan.expert_parallel) {
        for (uint32_t l = 0; l < hp.n_layer; ++l) {
          if (!hp.is_moe_block(l)) continue;
          std::vector<std::string> where;
          for (const model::RankPlan& rp : plan.ranks) {
            where.push_back(absl::StrCat("rank ", rp.rank, ": ", rp.blocks[l].expert_begin, "-",
                                         rp.blocks[l].expert_end - 1));
          }
          std::printf("experts of block %u: %s%s\n", l, absl::StrJoin(where, ", ").c_str(),
                      hp.n_expert % plan.tp != 0 ? " (each block rotates the shares by one rank)"
                                                 : " (every MoE block alike)");
          break;
        }
      }
    }
    const Json& mtp = r["mtp"];
    if (!mtp["available"].get<bool>()) {
      std::printf("MTP draft head: none (%s)\n", mtp["reason"].get<std::string>().c_str());
    } else {
      std::vector<std::string> per_rank;
      for (const Json& j : mtp["ranks"]) {
        per_rank.push_back(absl::StrCat(
            "rank ", j["rank"].get<int>(), " +", HumanBytes(j["weight_bytes"].get<uint64_t>()),
            " weights, +", HumanBytes(j["kv_bytes_per_token"].get<uint64_t>()), " KV per token"));
      }
      std::printf(
          "MTP draft head: block%s %s, %zu tensors loaded when asked for (%zu skipped: not "
          "run); %s\n",
          mtp["blocks"].size() == 1 ? "" : "s", JsonDump(mtp["blocks"]).c_str(),
          mtp["tensors_loaded"].get<size_t>(), mtp["tensors_skipped"].get<size_t>(),
          absl::StrJoin(per_rank, "; ").c_str());
      for (const Json& p : mtp["problems"]) {
        std::printf("MTP problem: %s\n", p.get<std::string>().c_str());
      }
    }
    if (usable) {
      std::printf("device memory %s x %.2f = %s usable per rank; max model length %llu\n",
                  HumanBytes(*o.device_memory).c_str(), o.utilization, HumanBytes(*usable).c_str(),
                  static_cast<unsigned long long>(max_len));
    }
    std::printf("\n");
  }
  return finish(problems.empty());
}

}  // namespace

int RunValidate(const Args& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--json") {
      o.json = true;
      continue;
    }
    if (a == "--expert-parallel" || a == "--no-expert-parallel") {
      o.experts =
          a == "--expert-parallel" ? model::ExpertParallel::kOn : model::ExpertParallel::kOff;
      continue;
    }
    if (i + 1 >= args.size()) {
      std::fprintf(stderr, "tessera validate: '%s' needs a value or is unknown\n\n%s", a.c_str(),
                   kUsage);
      return 2;
    }
    const std::string& v = args[++i];
    auto bad = [&](const char* what) {
      std::fprintf(stderr, "tessera validate: %s: '%s' is not %s\n", a.c_str(), v.c_str(), what);
      return 2;
    };
    if (a == "--model") {
      o.model = v;
    } else if (a == "--tp") {
      if (!absl::SimpleAtoi(v, &o.tp) || o.tp < 1 || o.tp > 1024) return bad("a number in 1..1024");
    } else if (a == "--device-memory") {
      o.device_memory = ParseSize(v);
      if (!o.device_memory) return bad("a size such as 96GiB");
    } else if (a == "--gpu-memory-utilization") {
      if (!absl::SimpleAtod(v, &o.utilization) || o.utilization <= 0 || o.utilization > 1) {
        return bad("a fraction in (0, 1]");
      }
    } else if (a == "--max-model-len") {
      uint64_t n;
      if (!absl::SimpleAtoi(v, &n) || n == 0) return bad("a positive number");
      o.max_model_len = n;
    } else if (a == "--kv-dtype") {
      if (v == "f16" || v == "bf16" || v == "float16" || v == "bfloat16") {
        o.kv_bytes = 2;
      } else if (v == "f32" || v == "float32") {
        o.kv_bytes = 4;
      } else {
        return bad("one of f16, bf16, f32");
      }
    } else if (a == "--arch-as") {
      o.arch_as = v;
    } else if (a == "--hf-config") {
      o.hf_config = v;
    } else {
      std::fprintf(stderr, "tessera validate: unknown option '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (o.model.empty()) {
    std::fprintf(stderr, "tessera validate: --model FILE is required\n\n%s", kUsage);
    return 2;
  }
  return Validate(o);
}

}  // namespace tessera::cli
