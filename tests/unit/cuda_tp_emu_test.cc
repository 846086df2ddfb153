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
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/gguf/split.h"
#include "common/model/arch.h"
#include "common/model/hparams.h"
#include "common/model/shard_plan.h"
#include "common/model/synthetic.h"
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
// Its all-reduces are timed the way NcclCommunicator times them: a start and an end stamp
// queued around each call in a slot chosen by call order when it is queued (so a graph
// replays the stamps of its capture), read by TakeAllReduceSeconds.
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
    const size_t slot = queued_++;
    if (slot == stamps_.size()) stamps_.emplace_back();
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    cuda::emu::Launch(s, [this, slot] { stamps_[slot].first = Clock::now(); });
    cuda::emu::Launch(s, [c, data, count, dtype] {
      absl::Status s = c->AllReduceSum(data, count, dtype);
      EXPECT_TRUE(s.ok()) << s;
    });
    cuda::emu::Launch(s, [this, slot] { stamps_[slot].second = Clock::now(); });
    return absl::OkStatus();
  }
  std::vector<double> TakeAllReduceSeconds() override {
    c_->TakeAllReduceSeconds();  // the host calls inside are not the step's own record
    std::vector<double> seconds;
    for (size_t i = 0; i < queued_; ++i) {
      seconds.push_back(
          std::chrono::duration<double>(stamps_[i].second - stamps_[i].first).count());
      stamps_[i] = {};  // a slot not stamped again reads 0 next time
    }
    queued_ = 0;
    return seconds;
  }
  size_t queued_allreduces() const override { return queued_; }
  void set_queued_allreduces(size_t n) override { queued_ = std::min(n, stamps_.size()); }
  absl::Status AllGatherOnStream(const float* in, size_t count, float* out, void* stream) override {
    comm::GlooCommunicator* c = c_.get();
    cuda::emu::Launch(static_cast<cudaStream_t>(stream), [c, in, count, out] {
      absl::Status s = c->AllGather(in, count, out);
      EXPECT_TRUE(s.ok()) << s;
    });
    return absl::OkStatus();
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::unique_ptr<comm::GlooCommunicator> c_;
  std::vector<std::pair<Clock::time_point, Clock::time_point>> stamps_;  // by call order
  size_t queued_ = 0;
};

enum class CommKind { kDevice, kHost };

// `steps` on `tp` ranks (threads) whose communicators are `kind`; `after_step` as in
// testing::RunOnRanks.
testing::RanksResult RunScript(const std::string& path, int tp, CommKind kind,
                               const std::vector<std::vector<SequenceInput>>& steps,
                               const testing::AfterStepFn& after_step = nullptr,
                               model::ExpertParallel ep = model::ExpertParallel::kAuto) {
  gloo::rendezvous::HashStore store;
  auto options = [ep](int) {
    ExecutorOptions o;
    o.expert_parallel = ep;
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
  return testing::RunOnRanks(path, tp, options, connect, steps, true, after_step);
}

// TP = `tp` of the script (a prefill of 19 and 5 tokens, then three decode steps: the graph
// path with the device communicator); rank 0's logits. `*unsplittable` is set when the model
// cannot be split `tp` ways (every case here can: a change that breaks that fails).
std::vector<float> RunRanks(const std::string& path, int tp, CommKind kind, bool* unsplittable) {
  testing::RanksResult r = RunScript(path, tp, kind, testing::PrefillThenDecode(19, 5, 3));
  *unsplittable = r.rank0_error.find("cannot be split") != std::string::npos;
  EXPECT_TRUE(r.rank0_error.empty() || *unsplittable) << r.rank0_error;
  return r.logits;
}

// Executor::BroadcastFromRank0 over a device communicator (NCCL's kind: device memory only)
// stages the host bytes through the GPU executor's own buffer: what rank 0 sampled reaches
// every rank before an MTP step (--speculative mtp on GPU workers at TP > 1).
TEST(EmulatedTpBroadcast, HostBytesFromRankZeroThroughADeviceCommunicator) {
  const std::string path = testing::WriteSmallModel("glm-dsa", "Q8_0", 31, "emu-tp");
  gloo::rendezvous::HashStore store;
  std::vector<std::vector<int32_t>> got(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      comm::GlooOptions g;
      g.prefix = "emu-bcast/";
      auto c = comm::GlooCommunicator::Connect(store, r, 2, g);
      if (!c.ok()) {
        errors[r] = c.status().ToString();
        return;
      }
      EmulatedDeviceComm comm(*std::move(c));
      ExecutorOptions o;
      o.device = Device::kCuda;
      o.kv_tokens = 64;
      o.kv_block_size = 16;
      o.max_step_tokens = 64;
      o.load_mtp = true;
      o.tp_rank = r;
      o.tp_size = 2;
      o.comm = &comm;
      auto ex = Executor::Create(path, o);
      if (!ex.ok()) {
        errors[r] = ex.status().ToString();
        return;
      }
      std::vector<int32_t> v =
          r == 0 ? std::vector<int32_t>{3, 141, -1, 59, 26} : std::vector<int32_t>(5, 0);
      absl::Status s = (*ex)->BroadcastFromRank0(v.data(), v.size() * sizeof(int32_t));
      if (!s.ok()) errors[r] = s.ToString();
      got[r] = v;
    });
  }
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(got[1], (std::vector<int32_t>{3, 141, -1, 59, 26}));
  EXPECT_EQ(got[0], got[1]);
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

// The head in chunks (TESSERA_CUDA_HEAD_CHUNK_ROWS: an all-logits step beyond the planned
// rows): at TP 2 each chunk's vocabulary columns are gathered (on the device, or through the
// host) and copied out before the next; the logits are the unchunked TP 1 ones.
TEST(EmulatedTpHeadChunks, ChunkedAllLogitsStepsGiveTheOneRankLogits) {
  const std::string path = testing::WriteSmallModel("llama", "Q8_0", 31, "emu-tp");
  bool unsplittable = false;
  const std::vector<float> one = RunRanks(path, 1, CommKind::kDevice, &unsplittable);
  ASSERT_FALSE(one.empty());
  ASSERT_EQ(setenv("TESSERA_CUDA_HEAD_CHUNK_ROWS", "5", 1), 0);  // 19 + 5 rows: 5 chunks
  for (CommKind kind : {CommKind::kDevice, CommKind::kHost}) {
    const std::vector<float> two = RunRanks(path, 2, kind, &unsplittable);
    ASSERT_EQ(two.size(), one.size());
    double worst = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(two[i]) - one[i]));
    }
    EXPECT_LE(worst, 2e-3) << (kind == CommKind::kDevice ? "device" : "host") << " comm";
  }
  unsetenv("TESSERA_CUDA_HEAD_CHUNK_ROWS");
}

// Prefix caching on the GPU executor, at TP 1 and 2: a sequence whose first block another
// sequence computed (in a chunk of another length, in other blocks) gives the logits of the
// same prompt prefilled cold. The engine shares blocks only through the block tables it
// sends, so this is the GPU side's whole part: keys and values read from blocks a different
// sequence wrote. Float32 throughout: within the conformance Tier 1 (1e-3).
TEST_P(EmulatedTp, ACachedPrefixGivesTheColdLogits) {
  const Case& c = GetParam();
  const std::string path = testing::WriteSmallModel(c.arch, c.quant, 31, "emu-tp");
  std::vector<int32_t> b;
  for (int i = 0; i < 26; ++i) b.push_back((29 * i + 5) % 250);
  auto seq = [](std::vector<int32_t> tokens, int64_t start, std::vector<int32_t> table, bool all) {
    SequenceInput s;
    s.tokens = std::move(tokens);
    s.start_pos = start;
    s.block_table = std::move(table);
    s.all_logits = all;
    return s;
  };
  const std::vector<int32_t> prefix(b.begin(), b.begin() + 16), suffix(b.begin() + 16, b.end());
  std::vector<int32_t> other = prefix;  // another prompt with b's first block
  for (int i = 0; i < 5; ++i) other.push_back(200 + i);
  // Warm: `other` fills blocks 3 and 1; b then reads block 3 and writes block 0.
  const std::vector<std::vector<SequenceInput>> warm = {{seq(other, 0, {3, 1}, false)},
                                                        {seq(suffix, 16, {3, 0}, true)}};
  // Cold: b alone, its first block computed by itself.
  const std::vector<std::vector<SequenceInput>> cold = {{seq(prefix, 0, {2}, false)},
                                                        {seq(suffix, 16, {2, 0}, true)}};
  for (int tp : {1, 2}) {
    const testing::RanksResult w = RunScript(path, tp, CommKind::kDevice, warm);
    const testing::RanksResult k = RunScript(path, tp, CommKind::kDevice, cold);
    ASSERT_EQ(w.rank0_error, "");
    ASSERT_EQ(k.rank0_error, "");
    ASSERT_EQ(w.logits.size(), k.logits.size());
    // The second step's rows: every logit after the first step's single row.
    const size_t first = w.logits.size() / 11;
    double worst = 0;
    for (size_t i = first; i < w.logits.size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(w.logits[i]) - k.logits[i]));
    }
    std::printf("emu prefix arch=%s tp=%d max_abs=%.3g\n", c.arch.c_str(), tp, worst);
    EXPECT_LE(worst, 1e-3) << c.arch << " tp " << tp;
  }
}

// tessera_allreduce_seconds takes one observation per all-reduce: after every step, eager
// (the prefill, the first decode) or a CUDA graph's capture and replays (the decodes), each
// rank's communicator holds exactly the step's all-reduces, each stamped during the step. A
// llama forward all-reduces the vocab-parallel embedding rows, then after each block's
// attention output and FFN down projections: 2 per block + 1.
TEST(EmulatedTpTiming, EveryStepTimesEachOfItsAllReducesOnceGraphsIncluded) {
  const std::string path = testing::WriteSmallModel("llama", "Q4_K_M", 31, "emu-tp");
  auto file = gguf::GgufModel::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const model::HyperParams hp = model::LoadHyperParams(*model::FindArch("llama"), "llama",
                                                       file->metadata(), nullptr, nullptr);
  const size_t per_step = 2 * hp.n_layer + 1;
  std::mutex mu;
  std::vector<std::string> problems;
  int checked = 0;
  auto after_step = [&](int rank, int step, comm::Communicator* c) {
    const std::vector<double> seconds = c->TakeAllReduceSeconds();
    std::lock_guard<std::mutex> lock(mu);
    ++checked;
    if (seconds.size() != per_step) {
      problems.push_back(absl::StrCat("rank ", rank, " step ", step, ": ", seconds.size(),
                                      " all-reduces timed, the step made ", per_step));
    }
    for (double s : seconds) {
      if (!(s > 0 && s < 60)) {
        problems.push_back(absl::StrCat("rank ", rank, " step ", step, ": duration ", s));
        break;
      }
    }
  };
  const testing::RanksResult r =
      RunScript(path, 2, CommKind::kDevice, testing::PrefillThenDecode(19, 5, 4), after_step);
  EXPECT_EQ(r.rank0_error, "");
  EXPECT_EQ(checked, 2 * 5);  // 2 ranks x (1 prefill + 4 decodes)
  for (const std::string& p : problems) ADD_FAILURE() << p;
}

// Shapes TP cannot divide evenly (the "uneven" preset: 8 heads of 32 over 2 KV heads, an
// FFN of three K-quant blocks, 6 experts of 192; glm4moe's experts of 1,408) at TP 3 on the
// GPU executor: uneven head shares whose ranks keep the KV heads their query heads use (at
// Q8_0 rank 1's heads cut a group), zero shares (Q6_K: attn_output's 256 columns are one
// block, so one rank computes every head), and the routed experts divided either way
// (expert parallelism: each rank's grouped products skip the others' experts).
// Sampling on the device at TP 3: with a device communicator (NCCL's kind) rank 0 samples the
// gathered vocabulary columns put together on the device: greedy tokens are the argmax of the
// TP 1 logits, log-probabilities their log-softmax; through a host communicator the rows come
// back as before (the logits pass the host anyway).
TEST(EmulatedTpSampling, ThreeRanksSampleTheGatheredRows) {
  const std::string path = testing::WritePresetModel("llama", "Q8_0", "uneven", 31, "emu-tp");
  const auto plain = testing::PrefillThenDecode(19, 5, 3);
  auto sampling = plain;
  for (size_t k = 1; k < sampling.size(); ++k) {
    for (SequenceInput& s : sampling[k]) s.device_sample = DeviceSampling{.temperature = 0.0f};
  }
  const testing::RanksResult one = RunScript(path, 1, CommKind::kDevice, plain);
  ASSERT_EQ(one.rank0_error, "");
  const size_t rows = 19 + 5 + 2 * 3;
  ASSERT_EQ(one.logits.size() % rows, 0u);
  const size_t V = one.logits.size() / rows;
  const testing::RanksResult dev = RunScript(path, 3, CommKind::kDevice, sampling);
  ASSERT_EQ(dev.rank0_error, "");
  ASSERT_EQ(dev.sampled.size(), 2u * 4);  // two sequences, four steps
  EXPECT_EQ(dev.logits.size(), (19 + 5) * V) << "only the prefill's rows come back";
  for (int k = 1; k <= 3; ++k) {
    for (int q = 0; q < 2; ++q) {
      SCOPED_TRACE(::testing::Message() << "decode " << k << " sequence " << q);
      const float* row = one.logits.data() + (19 + 5 + 2 * (k - 1) + q) * V;
      const int32_t argmax = static_cast<int32_t>(std::max_element(row, row + V) - row);
      double m = -INFINITY, z = 0;
      for (size_t i = 0; i < V; ++i) m = std::max<double>(m, row[i]);
      for (size_t i = 0; i < V; ++i) z += std::exp(row[i] - m);
      const executor::SampledToken& t = dev.sampled[2 * k + q];
      EXPECT_EQ(t.token, argmax);
      EXPECT_NEAR(t.logprob, row[argmax] - m - std::log(z), 1e-4);
    }
  }
  const testing::RanksResult host = RunScript(path, 3, CommKind::kHost, sampling);
  ASSERT_EQ(host.rank0_error, "");
  EXPECT_EQ(host.logits.size(), one.logits.size());
  for (const executor::SampledToken& t : host.sampled) EXPECT_EQ(t.token, -1);
}

TEST(EmulatedTpUneven, ThreeRanksGiveTheOneRankLogits) {
  struct Uneven {
    const char* arch;
    const char* quant;
    const char* preset;
  };
  for (const Uneven& u :
       {Uneven{"llama", "Q8_0", "uneven"}, Uneven{"qwen3", "Q6_K", "uneven"},
        Uneven{"qwen3moe", "Q8_0", "uneven"}, Uneven{"deepseek2", "Q8_0", "uneven"},
        Uneven{"glm4moe", "Q8_0", "ep-1408"}, Uneven{"glm-dsa", "Q6_K", "uneven"}}) {
    const std::string path = testing::WritePresetModel(u.arch, u.quant, u.preset, 31, "emu-tp");
    const auto steps = testing::PrefillThenDecode(19, 5, 3);
    const testing::RanksResult one = RunScript(path, 1, CommKind::kDevice, steps);
    ASSERT_EQ(one.rank0_error, "") << u.arch;
    const bool moe = std::string(u.arch) != "llama" && std::string(u.arch) != "qwen3";
    for (model::ExpertParallel ep :
         moe ? std::vector<model::ExpertParallel>{model::ExpertParallel::kOn,
                                                  model::ExpertParallel::kOff}
             : std::vector<model::ExpertParallel>{model::ExpertParallel::kAuto}) {
      const testing::RanksResult three = RunScript(path, 3, CommKind::kDevice, steps, nullptr, ep);
      ASSERT_EQ(three.rank0_error, "") << u.arch;
      ASSERT_EQ(three.logits.size(), one.logits.size());
      double worst = 0;
      for (size_t i = 0; i < one.logits.size(); ++i) {
        worst = std::max(worst, std::fabs(static_cast<double>(three.logits[i]) - one.logits[i]));
      }
      std::printf("emu_tp arch=%s %s %s tp=3 expert_parallel=%s max_abs=%.3g\n", u.arch, u.quant,
                  u.preset, std::string(model::ExpertParallelName(ep)).c_str(), worst);
      EXPECT_LE(worst, 2e-3) << u.arch << " " << u.quant << " expert parallel "
                             << model::ExpertParallelName(ep);
    }
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
