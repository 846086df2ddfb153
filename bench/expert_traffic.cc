// Bytes of weights each tensor-parallel rank reads per decode step, with the routed experts
// dealt out whole (expert parallelism) or with every expert's hidden dim divided, on a real
// routing: one in-process executor decodes `steps` tokens after a prompt and records the
// experts every layer chose (StepTrace); each rank's bytes are then what its shard plan holds
// of the weights a decode reads (every split or replicated tensor but the token embedding,
// of which a step reads a row) plus, per MoE layer, the chosen experts' bytes it holds; and
// what a step waits for: each layer's busiest rank (every layer ends in an all-reduce). The
// decode tokens/s of the same splits come from `tessera generate --tp N` (the user path):
// bench/expert_parallel_bench.sh runs both.
//
//   build/default/bench/expert_traffic MODEL [TP ...]     (default TP 1 2 4)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "common/gguf/split.h"
#include "common/model/arch.h"
#include "common/model/hparams.h"
#include "common/model/shard_plan.h"
#include "common/model/tensor_map.h"
#include "worker/executor/executor.h"

namespace {

using namespace tessera;

// Per decode step, per MoE layer: the distinct experts the step's token chose.
std::vector<std::map<int, std::set<int32_t>>> DecodeRouting(const std::string& path, int steps) {
  executor::ExecutorOptions o;
  o.threads = 2;
  o.kv_tokens = 256;
  auto ex = executor::Executor::Create(path, o);
  if (!ex.ok()) {
    std::fprintf(stderr, "%s\n", ex.status().ToString().c_str());
    std::exit(1);
  }
  const int vocab = static_cast<int>((*ex)->hparams().n_vocab);
  executor::SequenceInput s;
  for (int i = 0; i < 64; ++i) s.tokens.push_back((i * 7919 + 13) % vocab);
  for (int b = 0; b < (*ex)->n_blocks(); ++b) s.block_table.push_back(b);
  std::vector<std::map<int, std::set<int32_t>>> out;
  for (int k = 0; k <= steps; ++k) {
    executor::StepTrace trace;
    auto logits = (*ex)->Step({&s, 1}, &trace);
    if (!logits.ok()) {
      std::fprintf(stderr, "%s\n", logits.status().ToString().c_str());
      std::exit(1);
    }
    if (k > 0) {  // decode steps only (step 0 is the prompt)
      auto& layers = out.emplace_back();
      for (const auto& [layer, tokens] : trace.experts) {
        for (const auto& chosen : tokens) layers[layer].insert(chosen.begin(), chosen.end());
      }
    }
    // Greedy next token.
    const std::vector<float>& row = (*logits)[0];
    int best = 0;
    for (size_t i = 1; i < row.size(); ++i) {
      if (row[i] > row[best]) best = static_cast<int>(i);
    }
    s.start_pos += static_cast<int64_t>(s.tokens.size());
    s.tokens = {best};
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: expert_traffic MODEL [TP ...]\n");
    return 2;
  }
  const std::string path = argv[1];
  std::vector<int> tps;
  for (int i = 2; i < argc; ++i) {
    int tp = 0;
    if (!absl::SimpleAtoi(argv[i], &tp) || tp < 1) return 2;
    tps.push_back(tp);
  }
  if (tps.empty()) tps = {1, 2, 4};
  auto file = gguf::GgufModel::Open(path);
  if (!file.ok()) return 1;
  const std::string name = file->metadata().GetString("general.architecture").value_or("");
  const model::ArchSpec* arch = model::FindArch(name);
  if (arch == nullptr) return 1;
  const model::HyperParams hp =
      model::LoadHyperParams(*arch, name, file->metadata(), nullptr, nullptr);
  const model::TensorMap map = model::MapTensors(*arch, hp, *file);
  const int kSteps = 32;
  const auto routing = DecodeRouting(path, kSteps);
  std::printf("%s: %u layers, %u experts top-%u; %d decode steps of one token\n", path.c_str(),
              hp.n_layer, hp.n_expert, hp.n_expert_used, kSteps);
  std::printf("%-4s %-20s %-30s %12s %14s\n", "TP", "routed experts", "per-rank MiB/step (mean)",
              "waited for", "sum of ranks");
  for (int tp : tps) {
    for (model::ExpertParallel ep : {model::ExpertParallel::kOn, model::ExpertParallel::kOff}) {
      if (tp == 1 && ep == model::ExpertParallel::kOn) continue;
      model::PlanOptions po;
      po.experts = ep;
      const model::ShardPlan plan = model::BuildShardPlan(map, hp, tp, po);
      if (!plan.problems.empty()) {
        std::printf("%-4d %-22s %s\n", tp, model::ExpertParallelName(ep).data(),
                    model::SummarizeProblems(plan.problems).c_str());
        continue;
      }
      // Per rank: the mean bytes per decode step. Per step: every layer ends in an
      // all-reduce, so each layer waits for its busiest rank: the busiest rank's fixed bytes
      // plus, per MoE layer, the most any rank reads of the chosen experts.
      std::vector<double> per_rank(tp, 0.0), fixed(tp, 0.0);
      std::vector<std::map<uint32_t, double>> expert_bytes(tp);  // layer -> one expert's bytes
      for (int r = 0; r < tp; ++r) {
        const model::RankPlan& rp = plan.ranks[r];
        for (const model::TensorShard& sh : rp.shards) {
          const model::TensorMapping& m = map.tensors[sh.mapping];
          if (m.name == "token_embd.weight") continue;
          if (m.spec->partition != model::Partition::kExpertFfn) {
            fixed[r] += static_cast<double>(sh.read_bytes);
            continue;
          }
          const model::BlockShare& b = rp.blocks[m.layer];
          const int64_t held = b.expert_end - b.expert_begin;
          if (held > 0) expert_bytes[r][m.layer] += static_cast<double>(sh.read_bytes) / held;
        }
      }
      double busiest = 0;
      for (const auto& step : routing) {
        std::vector<double> mine(fixed);
        double waited = *std::max_element(fixed.begin(), fixed.end());
        for (const auto& [layer, chosen] : step) {
          double most = 0;
          for (int r = 0; r < tp; ++r) {
            const model::BlockShare& b = plan.ranks[r].blocks[layer];
            double routed = 0;
            for (int32_t e : chosen) {
              if (e >= b.expert_begin && e < b.expert_end) routed += expert_bytes[r][layer];
            }
            mine[r] += routed;
            most = std::max(most, routed);
          }
          waited += most;
        }
        for (int r = 0; r < tp; ++r) per_rank[r] += mine[r] / 1048576.0 / routing.size();
        busiest += waited / 1048576.0 / routing.size();
      }
      std::string ranks;
      double sum = 0;
      for (double v : per_rank) {
        ranks += (ranks.empty() ? "" : " / ") + std::to_string(v).substr(0, 5);
        sum += v;
      }
      std::printf("%-4d %-20s %-30s %12.2f %14.2f\n", tp,
                  tp == 1                            ? "whole (TP 1)"
                  : ep == model::ExpertParallel::kOn ? "expert parallel"
                                                     : "hidden dim divided",
                  ranks.c_str(), busiest, sum);
    }
  }
  return 0;
}
