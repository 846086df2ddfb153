// Tensor parallelism inside the executor: TP = 2 and 4 ranks (threads of this process, each
// with its own executor and a real Gloo communicator over TCP loopback) give the logits of
// TP = 1 on gen-model files of every architecture, and a malformed split is refused.
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

std::string Synthetic(const std::string& arch, const std::string& quant) {
  return testing::WriteSmallModel(arch, quant, 5, "tp");
}

ExecutorOptions Options(bool exact) {
  ExecutorOptions o;
  o.exact = exact;
  o.threads = 1;
  o.kv_tokens = 64;
  o.kv_block_size = 16;
  return o;
}

// A prefill of 9 and 4 tokens (all logits), then a one-token decode step, on `tp` ranks
// (Gloo); rank 0's logits of both steps, flattened.
std::vector<float> RunTp(const std::string& path, int tp, bool exact) {
  gloo::rendezvous::HashStore store;
  auto connect = [&](int r) -> absl::StatusOr<std::unique_ptr<comm::Communicator>> {
    comm::GlooOptions g;
    g.prefix = "test/";
    auto c = comm::GlooCommunicator::Connect(store, r, tp, g);
    if (!c.ok()) return c.status();
    return std::unique_ptr<comm::Communicator>(*std::move(c));
  };
  return testing::RunOnRanks(
             path, tp, [&](int) { return Options(exact); }, connect,
             testing::PrefillThenDecode(9, 4, 1))
      .logits;
}

struct Case {
  std::string arch, quant;
};

class TpTest : public ::testing::TestWithParam<Case> {};

double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  }
  return worst;
}

// Exact path: splitting a sum over ranks changes only the order of float32 additions
// (each rank's partial dot products hold the same terms), a few ulps per layer amplified
// through the layers; 2e-3 on logits of O(1-10) covers that with margin, while a misplaced
// head or expert slice is off by O(1).
// Fast path: activations are quantized per block before integer dots, and a rank's slice
// of a row-parallel input is quantized on its own, so TP changes roundings of the size the
// fast path already makes. The bound: TP = N's distance from the exact TP = 1 logits stays
// within 1.5x the fast path's own distance at TP = 1 (plus 1e-3).
TEST_P(TpTest, SameLogitsAsOneRank) {
  const Case& c = GetParam();
  const std::string path = Synthetic(c.arch, c.quant);
  auto file = gguf::GgufModel::Open(path);
  ASSERT_TRUE(file.ok());
  const model::ArchSpec* arch = model::FindArch(c.arch);
  ASSERT_NE(arch, nullptr);
  model::HyperParams hp = model::LoadHyperParams(*arch, c.arch, file->metadata(), nullptr, nullptr);
  model::TensorMap map = model::MapTensors(*arch, hp, *file);
  std::vector<int> valid = model::ValidTpSizes(map, hp, 4);
  const std::vector<float> exact1 = RunTp(path, 1, true);
  const std::vector<float> fast1 = RunTp(path, 1, false);
  ASSERT_FALSE(exact1.empty());
  const double fast_noise = MaxDiff(fast1, exact1);
  int checked = 0;
  for (int tp : {2, 4}) {
    if (std::find(valid.begin(), valid.end(), tp) == valid.end()) continue;
    ++checked;
    EXPECT_LT(MaxDiff(RunTp(path, tp, true), exact1), 2e-3)
        << c.arch << " " << c.quant << " tp " << tp << " exact";
    EXPECT_LE(MaxDiff(RunTp(path, tp, false), exact1), 1.5 * fast_noise + 1e-3)
        << c.arch << " " << c.quant << " tp " << tp
        << " fast (fast path's own error at tp 1: " << fast_noise << ")";
  }
  EXPECT_GT(checked, 0) << c.arch << ": no TP size in {2, 4} is valid";
}

INSTANTIATE_TEST_SUITE_P(AllArchitectures, TpTest,
                         ::testing::Values(Case{"llama", "Q8_0"}, Case{"qwen2", "F32"},
                                           Case{"qwen3", "Q4_K_M"}, Case{"qwen3moe", "Q8_0"},
                                           Case{"deepseek2", "F32"}, Case{"glm4moe", "Q8_0"},
                                           Case{"glm-dsa", "F16"}),
                         [](const auto& info) {
                           std::string n = info.param.arch + "_" + info.param.quant;
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST(TpExecutor, RefusesASplitThePlanRejects) {
  const std::string path = Synthetic("llama", "F32");  // small: 4 KV heads
  ExecutorOptions o = Options(true);
  o.tp_rank = 0;
  o.tp_size = 3;
  gloo::rendezvous::HashStore store;
  // A one-rank stand-in is enough: the plan is checked before any collective.
  struct Fake : comm::Communicator {
    int rank() const override { return 0; }
    int size() const override { return 3; }
    absl::Status AllReduceSum(void*, size_t, comm::ReduceDtype) override {
      return absl::OkStatus();
    }
    absl::Status AllGather(const float*, size_t, float*) override { return absl::OkStatus(); }
    absl::Status Broadcast(void*, size_t, int) override { return absl::OkStatus(); }
    absl::Status Barrier() override { return absl::OkStatus(); }
  } fake;
  o.comm = &fake;
  auto ex = Executor::Create(path, o);
  ASSERT_FALSE(ex.ok());
  EXPECT_NE(ex.status().message().find("cannot be split 3 ways"), absl::string_view::npos)
      << ex.status();
}

}  // namespace
}  // namespace tessera::executor
