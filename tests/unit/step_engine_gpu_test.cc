// The worker's step runner over the GPU executor (on the CUDA emulator here, on a GPU under
// the label `gpu` elsewhere): sequences whose sampling the device can do are sampled there and
// only their tokens come back; the others (penalties, alternatives) on the host. Every token
// and log-probability equals the one the same runner gives when every row comes back to the
// host (ExecutorOptions::device_sampling off): greedy and seeded draws alike.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "tests/support/synthetic_model.h"
#include "worker/engine/step_engine.h"
#include "worker/executor/executor.h"

namespace tessera::worker {
namespace {

namespace v1 = tessera::v1;

struct Request {
  v1::StepSampling sampling;
  bool on_device;  // what the device sampler can take
};

std::vector<Request> Requests() {
  std::vector<Request> r(6);
  r[0].sampling.set_temperature(0.0f);  // greedy
  r[0].on_device = true;
  r[1].sampling.set_temperature(0.8f);
  r[1].sampling.set_top_p(0.9f);
  r[1].sampling.set_seed(11);
  r[1].on_device = true;
  r[2].sampling.set_temperature(1.0f);
  r[2].sampling.set_top_p(1.0f);
  r[2].sampling.set_min_p(0.05f);
  r[2].sampling.set_seed(12);
  r[2].on_device = true;
  r[3].sampling.set_temperature(0.0f);
  r[3].sampling.set_repetition_penalty(1.3f);  // the host's
  r[3].on_device = false;
  r[4].sampling.set_temperature(0.7f);
  r[4].sampling.set_top_p(1.0f);
  r[4].sampling.set_top_logprobs(3);  // alternatives: the host's
  r[4].sampling.set_seed(13);
  r[4].on_device = false;
  r[5].sampling.set_temperature(1.5f);
  r[5].sampling.set_top_p(1.0f);
  r[5].sampling.set_seed(14);
  r[5].on_device = true;
  return r;
}

struct Token {
  int32_t id;
  float logprob;
};

// A prompt step and `steps` decode steps of every request together, feeding back the sampled
// tokens; the tokens per request in order.
std::vector<std::vector<Token>> RunSteps(StepEngine& engine, int steps) {
  const std::vector<Request> reqs = Requests();
  const int vocab = static_cast<int>(engine.executor().hparams().n_vocab);
  std::vector<std::vector<Token>> out(reqs.size());
  std::vector<int32_t> last(reqs.size());
  for (int step = 0; step <= steps; ++step) {
    v1::StepRequest req;
    req.set_step_id(step + 1);
    for (size_t i = 0; i < reqs.size(); ++i) {
      v1::StepSequence* s = req.add_seqs();
      s->set_seq_id(100 + i);
      for (int b = 0; b < 4; ++b) s->add_block_table(static_cast<int32_t>(4 * i + b));
      s->set_sample(true);
      if (step == 0) {
        for (int t = 0; t < 9; ++t)
          s->add_tokens(static_cast<int32_t>((31 * t + 7 * i + 3) % vocab));
        s->set_start_pos(0);
        s->set_new_sampler(true);
        *s->mutable_sampling() = reqs[i].sampling;
      } else {
        s->add_tokens(last[i]);
        s->set_start_pos(8 + step);
      }
    }
    absl::StatusOr<v1::StepResult> r = engine.Run(req);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return out;
    for (int i = 0; i < r->seqs_size(); ++i) {
      last[i] = r->seqs(i).token();
      out[i].push_back({r->seqs(i).token(), r->seqs(i).logprob()});
    }
  }
  return out;
}

bool OnGpuOrEmulator() {
#ifdef TESSERA_CUDA_EMULATOR
  return true;
#else
  return !cuda::ListDevices().empty();
#endif
}

TEST(StepEngineOnTheGpu, DeviceSamplingGivesTheHostsTokens) {
  if (!OnGpuOrEmulator()) GTEST_SKIP() << "no CUDA device visible: run by tests/gpu/run.sh";
  const std::string path = testing::WriteSmallModel("llama", "Q8_0", 5, "step-engine-gpu");
  auto make = [&](bool device_sampling) {
    executor::ExecutorOptions o;
    o.device = executor::Device::kCuda;
    o.dtype = executor::ComputeDtype::kFloat32;
    o.kv_block_size = 16;
    o.kv_tokens = 512;
    o.device_sampling = device_sampling;
    auto ex = executor::Executor::Create(path, o);
    EXPECT_TRUE(ex.ok()) << ex.status();
    return ex.ok() ? std::make_unique<StepEngine>(*std::move(ex), 0) : nullptr;
  };
  auto host = make(false);
  auto device = make(true);
  ASSERT_TRUE(host != nullptr && device != nullptr);
  EXPECT_FALSE(host->executor().samples_on_device());
  EXPECT_TRUE(device->executor().samples_on_device());
  const int steps = 12;
  const std::vector<std::vector<Token>> want = RunSteps(*host, steps);
  const std::vector<std::vector<Token>> got = RunSteps(*device, steps);
  const std::vector<Request> reqs = Requests();
  int on_device = 0;
  for (const Request& r : reqs) on_device += r.on_device ? 1 : 0;
  EXPECT_EQ(host->device_samples(), 0u);
  EXPECT_EQ(device->device_samples(), static_cast<uint64_t>(on_device * (steps + 1)))
      << "the sequences the device can sample were not all sampled there";
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    for (size_t t = 0; t < want[i].size(); ++t) {
      SCOPED_TRACE(absl::StrCat("request ", i, " token ", t));
      ASSERT_EQ(got[i][t].id, want[i][t].id);
      if (reqs[i].on_device) {
        EXPECT_NEAR(got[i][t].logprob, want[i][t].logprob, 1e-4);
      } else {
        EXPECT_EQ(got[i][t].logprob, want[i][t].logprob);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::worker
