// Tensor parallelism on GPUs: TP = N ranks (threads of this process, one GPU each, NCCL)
// give the logits of TP = 1 on one GPU, for generated models of every architecture. Label
// `gpu`: skips without two CUDA devices (NCCL refuses two ranks on one device).
//
// Prints one grep-able line per architecture and TP size for tests/gpu/run.sh:
//   tp_vs_tp1 arch=llama tp=2 dtype=f32 max_abs=... max_logit=... rel=...
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/gguf/split.h"
#include "common/model/arch.h"
#include "common/model/hparams.h"
#include "common/model/shard_plan.h"
#include "common/model/synthetic.h"
#include "common/model/tensor_map.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "tests/support/synthetic_model.h"
#include "tests/support/tp_ranks.h"
#include "worker/executor/executor.h"
#if TESSERA_HAVE_NCCL
#include "worker/comm/nccl_communicator.h"
#endif

namespace tessera::executor {
namespace {

std::string Synthetic(const std::string& arch, const std::string& quant) {
  return testing::WriteSmallModel(arch, quant, 29, "cuda-tp");
}

ExecutorOptions Options(bool exact, int gpu) {
  ExecutorOptions o;
  o.device = Device::kCuda;
  o.gpu = gpu;
  o.exact = exact;
  o.dtype = exact ? ComputeDtype::kFloat32 : ComputeDtype::kBFloat16;
  o.kv_tokens = 64;
  o.kv_block_size = 16;
  o.max_step_tokens = 64;
  return o;
}

// A prefill of 21 and 6 tokens (all logits), then three decode steps (the first captures a
// CUDA graph, the others replay it), on `tp` ranks (rank r on GPU r, NCCL); rank 0's logits
// of every step, flattened. After each step every rank's NCCL communicator must hand over
// one duration per all-reduce of the step (CUDA events, recorded inside the graphs too): as
// many as in every other step of the same model, each above 0 (tessera_allreduce_seconds).
std::vector<float> RunTp(const std::string& path, int tp, bool exact) {
#if TESSERA_HAVE_NCCL
  gloo::rendezvous::HashStore store;
  auto connect = [&](int r) -> absl::StatusOr<std::unique_ptr<comm::Communicator>> {
    auto c = comm::NcclCommunicator::Connect(store, "tp/", r, tp, r, std::chrono::seconds(60));
    if (!c.ok()) return c.status();
    return std::unique_ptr<comm::Communicator>(*std::move(c));
  };
  std::mutex mu;
  std::vector<std::vector<size_t>> timed(tp);  // per rank, per step: durations taken
  auto after_step = [&](int rank, int step, comm::Communicator* c) {
    if (c == nullptr) return;
    const std::vector<double> seconds = c->TakeAllReduceSeconds();
    std::lock_guard<std::mutex> lock(mu);
    timed[rank].push_back(seconds.size());
    for (double s : seconds) {
      EXPECT_GT(s, 0.0) << "rank " << rank << " step " << step;
    }
  };
  std::vector<float> logits = testing::RunOnRanks(
                                  path, tp, [&](int r) { return Options(exact, r); }, connect,
                                  testing::PrefillThenDecode(21, 6, 3), false, after_step)
                                  .logits;
  for (int r = 0; r < tp && tp > 1; ++r) {
    EXPECT_EQ(timed[r].size(), 4u) << "rank " << r;
    if (timed[r].empty()) continue;
    EXPECT_GT(timed[r][0], 0u) << "rank " << r << ": the prefill's all-reduces were not timed";
    for (size_t k = 1; k < timed[r].size(); ++k) {
      EXPECT_EQ(timed[r][k], timed[r][0]) << "rank " << r << " step " << k;
    }
  }
  return logits;
#else
  ADD_FAILURE() << "this build has no NCCL";
  (void)path;
  (void)tp;
  (void)exact;
  return {};
#endif
}

double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double e = std::fabs(static_cast<double>(a[i]) - b[i]);
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

double MaxAbs(const std::vector<float>& a) {
  double m = 0;
  for (float v : a) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

struct Case {
  std::string arch, quant;
};

class GpuTpTest : public ::testing::TestWithParam<Case> {};

// Exact (float32 on every rank): splitting a sum over ranks only reorders float32 additions
// (the all-reduce adds the ranks' partial sums), a few ulps per layer, ~1e-5 on the logits:
// 2e-4 · max|logit| + 1e-3 (the bound of cuda_executor_test's f32 comparison with the CPU),
// while a misplaced head or expert slice is off by O(max|logit|).
// bf16: each rank rounds its partial sums to bf16 before the all-reduce, roundings of the
// size bf16 already makes: TP = N's distance from exact TP = 1 stays within 1.5x bf16's own
// distance at TP = 1, plus 1e-3 · max|logit|.
TEST_P(GpuTpTest, SameLogitsAsOneGpu) {
  const int gpus = static_cast<int>(cuda::ListDevices().size());
  if (gpus < 2) {
    GTEST_SKIP() << "TP on GPUs needs at least 2 CUDA devices; " << gpus << " visible";
  }
#if !TESSERA_HAVE_NCCL
  GTEST_SKIP() << "built without NCCL (libnccl not found at configure time)";
#endif
  const Case& c = GetParam();
  const std::string path = Synthetic(c.arch, c.quant);
  auto file = gguf::GgufModel::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const model::ArchSpec* arch = model::FindArch(c.arch);
  ASSERT_NE(arch, nullptr);
  model::HyperParams hp = model::LoadHyperParams(*arch, c.arch, file->metadata(), nullptr, nullptr);
  model::TensorMap map = model::MapTensors(*arch, hp, *file);
  const std::vector<int> valid = model::ValidTpSizes(map, hp, gpus);
  const std::vector<float> exact1 = RunTp(path, 1, true);
  const std::vector<float> bf1 = RunTp(path, 1, false);
  ASSERT_FALSE(exact1.empty());
  const double scale = MaxAbs(exact1);
  const double bf_noise = MaxDiff(bf1, exact1);
  int checked = 0;
  for (int tp : {2, 4, 8}) {
    if (tp > gpus || std::find(valid.begin(), valid.end(), tp) == valid.end()) continue;
    ++checked;
    const double e = MaxDiff(RunTp(path, tp, true), exact1);
    const double b = MaxDiff(RunTp(path, tp, false), exact1);
    std::printf("tp_vs_tp1 arch=%s quant=%s tp=%d dtype=f32 max_abs=%.3g max_logit=%.3g rel=%.3g\n",
                c.arch.c_str(), c.quant.c_str(), tp, e, scale, e / scale);
    std::printf(
        "tp_vs_tp1 arch=%s quant=%s tp=%d dtype=bf16 max_abs=%.3g (vs exact tp1; bf16 tp1: "
        "%.3g) max_logit=%.3g\n",
        c.arch.c_str(), c.quant.c_str(), tp, b, bf_noise, scale);
    std::fflush(stdout);
    EXPECT_LE(e, 2e-4 * scale + 1e-3) << c.arch << " " << c.quant << " tp " << tp << " f32";
    // MoE: a bf16 rounding the split moves can flip a close routing choice (O(1) on that
    // token), so there the bound is only a sanity check; the f32 check above is the real one.
    const bool routed = hp.n_expert > 0;
    const double bf_bound = std::max(1.5 * bf_noise + 1e-3 * scale, routed ? 0.5 * scale : 0.0);
    EXPECT_LE(b, bf_bound) << c.arch << " " << c.quant << " tp " << tp
                           << " bf16 (bf16's own error at tp 1: " << bf_noise << ")";
  }
  EXPECT_GT(checked, 0) << c.arch << ": no TP size in {2, 4, 8} is valid on " << gpus << " GPUs";
}

INSTANTIATE_TEST_SUITE_P(AllArchitectures, GpuTpTest,
                         ::testing::Values(Case{"llama", "Q4_K_M"}, Case{"qwen2", "F16"},
                                           Case{"qwen3", "Q4_K_M"}, Case{"qwen3moe", "Q8_0"},
                                           Case{"deepseek2", "Q4_K_M"}, Case{"glm4moe", "Q8_0"},
                                           Case{"glm-dsa", "Q8_0"}),
                         [](const auto& info) {
                           std::string n = info.param.arch + "_" + info.param.quant;
                           for (char& ch : n) {
                             if (!absl::ascii_isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace tessera::executor
