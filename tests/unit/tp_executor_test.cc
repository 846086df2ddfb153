// Tensor parallelism inside the executor: TP = 2, 3, 4 (and 6, 8) ranks (threads of this process,
// each with its own executor and a real Gloo communicator over TCP loopback) give the logits
// and the routed experts of TP = 1 on gen-model files of every architecture, including
// shapes that need uneven splits, replicated KV heads and expert parallelism.
#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/gguf/split.h"
#include "common/model/arch.h"
#include "common/model/hparams.h"
#include "common/model/shard_plan.h"
#include "common/model/synthetic.h"
#include "common/model/tensor_map.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "tests/support/synthetic_model.h"
#include "tests/support/tp_ranks.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/executor/executor.h"

namespace tessera::executor {
namespace {

std::string Synthetic(const std::string& arch, const std::string& quant,
                      const std::string& preset = "small") {
  return testing::WritePresetModel(arch, quant, preset, 5, "tp");
}

ExecutorOptions Options(bool exact, model::ExpertParallel ep = model::ExpertParallel::kAuto) {
  ExecutorOptions o;
  o.exact = exact;
  o.threads = 1;
  o.kv_tokens = 64;
  o.kv_block_size = 16;
  o.expert_parallel = ep;
  return o;
}

// A prefill of 9 and 4 tokens (all logits), then a one-token decode step, on `tp` ranks
// (Gloo): rank 0's logits of both steps, flattened, and every rank's step traces.
testing::RanksResult RunTp(const std::string& path, int tp, bool exact,
                           model::ExpertParallel ep = model::ExpertParallel::kAuto) {
  gloo::rendezvous::HashStore store;
  auto connect = [&](int r) -> absl::StatusOr<std::unique_ptr<comm::Communicator>> {
    comm::GlooOptions g;
    g.prefix = "test/";
    auto c = comm::GlooCommunicator::Connect(store, r, tp, g);
    if (!c.ok()) return c.status();
    return std::unique_ptr<comm::Communicator>(*std::move(c));
  };
  return testing::RunOnRanks(
      path, tp, [&](int) { return Options(exact, ep); }, connect,
      testing::PrefillThenDecode(9, 4, 1), false, nullptr, /*trace=*/true);
}

struct Case {
  std::string arch, quant, preset = "small";
  // Also with the routed experts' split forced each way (MoE: expert parallelism on, and
  // every expert's hidden dim divided).
  bool both_expert_splits = false;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.arch << " " << c.quant << " " << c.preset;
}

class TpTest : public ::testing::TestWithParam<Case> {};

double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  }
  return worst;
}

// Every rank's experts of every token of every MoE layer, as sets (selection order is not
// part of the result), against TP 1's.
void ExpectSameExperts(const testing::RanksResult& one, const testing::RanksResult& many,
                       const std::string& what) {
  ASSERT_EQ(one.traces.size(), 1u);
  for (size_t r = 0; r < many.traces.size(); ++r) {
    ASSERT_EQ(many.traces[r].size(), one.traces[0].size()) << what;
    for (size_t k = 0; k < one.traces[0].size(); ++k) {
      for (const auto& [layer, tokens] : one.traces[0][k].experts) {
        auto it = many.traces[r][k].experts.find(layer);
        ASSERT_NE(it, many.traces[r][k].experts.end()) << what << " layer " << layer;
        ASSERT_EQ(it->second.size(), tokens.size()) << what;
        for (size_t t = 0; t < tokens.size(); ++t) {
          std::vector<int32_t> a = tokens[t], b = it->second[t];
          std::sort(a.begin(), a.end());
          std::sort(b.begin(), b.end());
          EXPECT_EQ(a, b) << what << " rank " << r << " step " << k << " layer " << layer
                          << " token " << t;
        }
      }
    }
  }
}

// Exact path: splitting a sum over ranks changes only the order of float32 additions
// (each rank's partial dot products hold the same terms; under expert parallelism each
// rank sums its own experts' contributions), a few ulps per layer amplified through the
// layers; 2e-3 on logits of O(1-10) covers that with margin, while a misplaced head,
// expert or expert slice is off by O(1).
// Fast path: activations are quantized per block before integer dots, and a rank's slice
// of a row-parallel input is quantized on its own, so TP changes roundings of the size the
// fast path already makes. The bound: TP = N's distance from the exact TP = 1 logits stays
// within 1.5x the fast path's own distance at TP = 1 (plus 1e-3).
TEST_P(TpTest, SameLogitsAsOneRank) {
  const Case& c = GetParam();
  const std::string path = Synthetic(c.arch, c.quant, c.preset);
  auto file = gguf::GgufModel::Open(path);
  ASSERT_TRUE(file.ok());
  const model::ArchSpec* arch = model::FindArch(c.arch);
  ASSERT_NE(arch, nullptr);
  model::HyperParams hp = model::LoadHyperParams(*arch, c.arch, file->metadata(), nullptr, nullptr);
  const testing::RanksResult exact1 = RunTp(path, 1, true);
  const std::vector<float> fast1 = RunTp(path, 1, false).logits;
  ASSERT_FALSE(exact1.logits.empty());
  const double fast_noise = MaxDiff(fast1, exact1.logits);
  std::vector<model::ExpertParallel> eps = {model::ExpertParallel::kAuto};
  if (c.both_expert_splits && hp.is_moe()) {
    eps = {model::ExpertParallel::kOn, model::ExpertParallel::kOff};
  }
  // The small presets at 2-4 ranks; the shapes that need uneven splits also at 6 and 8.
  const std::vector<int> tps =
      c.preset == "small" ? std::vector<int>{2, 3, 4} : std::vector<int>{2, 3, 4, 6, 8};
  for (int tp : tps) {
    for (model::ExpertParallel ep : eps) {
      const std::string what =
          absl::StrCat(c.arch, " ", c.quant, " ", c.preset, " tp ", tp, " expert parallel ",
                       std::string(model::ExpertParallelName(ep)));
      const testing::RanksResult exact = RunTp(path, tp, true, ep);
      EXPECT_LT(MaxDiff(exact.logits, exact1.logits), 2e-3) << what << " exact";
      if (hp.is_moe()) ExpectSameExperts(exact1, exact, what);
      EXPECT_LE(MaxDiff(RunTp(path, tp, false, ep).logits, exact1.logits), 1.5 * fast_noise + 1e-3)
          << what << " fast (fast path's own error at tp 1: " << fast_noise << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllArchitectures, TpTest,
    ::testing::Values(Case{"llama", "Q8_0"}, Case{"qwen2", "F32"}, Case{"qwen3", "Q4_K_M"},
                      Case{"qwen3moe", "Q8_0"}, Case{"deepseek2", "F32"}, Case{"glm4moe", "Q8_0"},
                      Case{"glm-dsa", "F16"},
                      // Shapes TP cannot divide evenly: a 256-column q6_K attn_output (one
                      // block: all heads on one rank), 2 KV heads over 3 and 4 ranks (at
                      // Q8_0 a rank's heads cut a group), an FFN of three blocks, experts of
                      // 192 and 1,408 columns.
                      Case{"llama", "Q6_K", "uneven"}, Case{"qwen2", "Q4_K_M", "uneven"},
                      Case{"qwen3", "Q8_0", "uneven"}, Case{"qwen3moe", "Q4_K_M", "uneven", true},
                      Case{"deepseek2", "Q6_K", "uneven", true},
                      Case{"glm4moe", "Q8_0", "ep-1408", true},
                      Case{"glm-dsa", "Q4_K_M", "uneven", true}),
    [](const auto& info) {
      std::string n = info.param.arch + "_" + info.param.quant + "_" + info.param.preset;
      for (char& ch : n) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return n;
    });

}  // namespace
}  // namespace tessera::executor
