// Tensor parallelism of the GPU executor on the CUDA emulator (kernels/cuda/emu/): TP = 2
// against TP = 1 on every architecture, ranks as threads, with the two communicator paths of
// cuda_forward.cc — a device communicator (collectives queued on the executor's stream, as
// NCCL does, and captured into the decode graphs) and a host one (Gloo through host copies).
// Emulated device memory is host memory, so the "device" communicator is Gloo run from the
// stream. What this checks is the executor's own TP code: shard uploads, the all-reduce after
// every row-parallel product, the vocab-parallel embedding and the gathered head with an
// uneven vocabulary split, under graph capture and replay.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "kernels/cuda/emu/emu_runtime.h"
#include "tests/support/synthetic_model.h"
#include "tests/support/tp_ranks.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/executor/executor.h"

namespace tessera::executor {
namespace {

// A Gloo communicator that presents itself as a device one: its *OnStream collectives are
// queued on the stream like kernels (run at once, or recorded while the stream captures).
class EmulatedDeviceComm : public comm::Communicator {
 public:
  explicit EmulatedDeviceComm(std::unique_ptr<comm::GlooCommunicator> c) : c_(std::move(c)) {}
  int rank() const override { return c_->rank(); }
  int size() const override { return c_->size(); }
  using Communicator::AllReduceSum;
  absl::Status AllReduceSum(void* data, size_t count, comm::ReduceDtype dtype) override {
    return c_->AllReduceSum(data, count, dtype);
  }
  absl::Status AllGather(const float* in, size_t count, float* out) override {
    return c_->AllGather(in, count, out);
  }
  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    return c_->Broadcast(data, bytes, root);
  }
  absl::Status Barrier() override { return c_->Barrier(); }
  bool on_device() const override { return true; }
  absl::Status AllReduceSumOnStream(void* data, size_t count, comm::ReduceDtype dtype,
                                    void* stream) override {
    comm::GlooCommunicator* c = c_.get();
    cuda::emu::Launch(static_cast<cudaStream_t>(stream), [c, data, count, dtype] {
      absl::Status s = c->AllReduceSum(data, count, dtype);
      EXPECT_TRUE(s.ok()) << s;
    });
    return absl::OkStatus();
  }
  absl::Status AllGatherOnStream(const float* in, size_t count, float* out, void* stream) override {
    comm::GlooCommunicator* c = c_.get();
    cuda::emu::Launch(static_cast<cudaStream_t>(stream), [c, in, count, out] {
      absl::Status s = c->AllGather(in, count, out);
      EXPECT_TRUE(s.ok()) << s;
    });
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<comm::GlooCommunicator> c_;
};

enum class CommKind { kDevice, kHost };

// TP = `tp` of the script (a prefill of 19 and 5 tokens, then three decode steps: the graph
// path with the device communicator); rank 0's logits. `*unsplittable` is set when the model
// cannot be split `tp` ways (every case here can: a change that breaks that fails).
std::vector<float> RunRanks(const std::string& path, int tp, CommKind kind, bool* unsplittable) {
  gloo::rendezvous::HashStore store;
  auto options = [](int) {
    ExecutorOptions o;
    o.device = Device::kCuda;
    o.exact = true;
    o.kv_tokens = 64;
    o.kv_block_size = 16;
    o.max_step_tokens = 64;
    return o;
  };
  auto connect = [&](int r) -> absl::StatusOr<std::unique_ptr<comm::Communicator>> {
    comm::GlooOptions g;
    g.prefix = "emu-tp/";
    auto c = comm::GlooCommunicator::Connect(store, r, tp, g);
    if (!c.ok()) return c.status();
    if (kind == CommKind::kDevice) return std::make_unique<EmulatedDeviceComm>(*std::move(c));
    return std::unique_ptr<comm::Communicator>(*std::move(c));
  };
  testing::RanksResult r =
      testing::RunOnRanks(path, tp, options, connect, testing::PrefillThenDecode(19, 5, 3), true);
  *unsplittable = r.rank0_error.find("cannot be split") != std::string::npos;
  EXPECT_TRUE(r.rank0_error.empty() || *unsplittable) << r.rank0_error;
  return r.logits;
}

struct Case {
  std::string arch, quant;
};

class EmulatedTp : public ::testing::TestWithParam<Case> {};

// Float32 throughout: splitting a sum over ranks only reorders float32 additions, a few ulps
// per layer; 2e-3 on logits of O(1-10) covers that with margin (as tp_executor_test), while a
// misplaced head, expert slice or vocabulary column is off by O(1).
TEST_P(EmulatedTp, TwoRanksGiveTheOneRankLogits) {
  const Case& c = GetParam();
  const std::string path = testing::WriteSmallModel(c.arch, c.quant, 31, "emu-tp");
  bool unsplittable = false;
  const std::vector<float> one = RunRanks(path, 1, CommKind::kDevice, &unsplittable);
  ASSERT_FALSE(one.empty());
  for (CommKind kind : {CommKind::kDevice, CommKind::kHost}) {
    const char* name = kind == CommKind::kDevice ? "device" : "host";
    const std::vector<float> two = RunRanks(path, 2, kind, &unsplittable);
    ASSERT_FALSE(unsplittable) << c.arch << " " << c.quant
                               << " (small preset) no longer splits 2 ways";
    ASSERT_EQ(two.size(), one.size()) << name;
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      const double d = std::fabs(static_cast<double>(two[i]) - one[i]);
      if (!(d <= worst)) {
        worst = d;
        at = i;
      }
    }
    std::printf("emu_tp arch=%s comm=%s tp=2 max_abs=%.3g\n", c.arch.c_str(), name, worst);
    EXPECT_LE(worst, 2e-3) << c.arch << " comm=" << name << ": logit " << at << " TP 2 " << two[at]
                           << " vs TP 1 " << one[at];
  }
}

INSTANTIATE_TEST_SUITE_P(AllArchitectures, EmulatedTp,
                         ::testing::Values(Case{"llama", "Q4_K_M"}, Case{"qwen2", "F16"},
                                           Case{"qwen3", "Q4_K_M"}, Case{"qwen3moe", "Q8_0"},
                                           Case{"deepseek2", "Q8_0"}, Case{"glm4moe", "Q8_0"},
                                           Case{"glm-dsa", "Q8_0"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.arch;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace tessera::executor
