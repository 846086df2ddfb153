// The controller's side of GPU workers, with fake ranks speaking the control protocol: the
// setups carry each rank's GPU, the memory fraction and kv_tokens 0 (plan from memory), and
// ranks that planned different cache sizes are served with the smallest; with a fixed
// kv_tokens, ranks that disagree still fail the group.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "controller/workers/worker_group.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tessera/v1/worker.grpc.pb.h"

namespace tessera::workers {
namespace {

namespace v1 = tessera::v1;
using ::testing::HasSubstr;

// One rank: connects, takes its setup, reports `n_blocks` loaded, then heartbeats until the
// controller closes the stream.
class FakeRank {
 public:
  FakeRank(const std::string& address, int rank, int n_blocks) {
    thread_ = std::thread([this, address, rank, n_blocks] {
      auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
      auto stub = v1::WorkerControl::NewStub(channel);
      auto stream = stub->Connect(&ctx_);
      v1::WorkerMessage hello;
      hello.mutable_hello()->set_rank(rank);
      hello.mutable_hello()->set_hostname("fake");
      if (!stream->Write(hello)) return;
      v1::ControllerMessage msg;
      if (!stream->Read(&msg) || !msg.has_setup()) return;
      {
        std::lock_guard<std::mutex> lock(mu_);
        setup_ = msg.setup();
      }
      v1::WorkerMessage loaded;
      loaded.mutable_loaded()->set_n_blocks(n_blocks);
      loaded.mutable_loaded()->set_block_size(16);
      loaded.mutable_loaded()->set_device("cuda:0 (fake)");
      if (!stream->Write(loaded)) return;
      std::thread beat([&] {
        v1::WorkerMessage m;
        m.mutable_heartbeat()->set_seq(1);
        while (!done_.load() && stream->Write(m)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      });
      while (stream->Read(&msg)) {
        if (msg.has_shutdown()) break;
      }
      done_ = true;
      ctx_.TryCancel();
      beat.join();
    });
  }
  ~FakeRank() {
    done_ = true;
    ctx_.TryCancel();
    thread_.join();
  }
  v1::WorkerSetup setup() const {
    std::lock_guard<std::mutex> lock(mu_);
    return setup_;
  }

 private:
  grpc::ClientContext ctx_;
  std::atomic<bool> done_{false};
  mutable std::mutex mu_;
  v1::WorkerSetup setup_;
  std::thread thread_;
};

WorkerGroupOptions GpuOptions(int64_t kv_tokens) {
  WorkerGroupOptions o;
  o.model_path = "/models/fake.gguf";  // fake ranks never open it
  o.world_size = 2;
  o.external_workers = true;
  o.gpus = {3, 1};
  o.comm_backend = "nccl";
  o.gpu_memory_utilization = 0.75;
  o.kv_tokens = kv_tokens;
  o.max_restarts = 0;
  o.heartbeat_interval = std::chrono::milliseconds(50);
  o.heartbeat_timeout = std::chrono::milliseconds(3000);
  o.rendezvous_timeout = std::chrono::milliseconds(10000);
  return o;
}

std::string Loopback(const WorkerGroup& g) {
  std::string addr = g.control_address();
  return "127.0.0.1" + addr.substr(addr.rfind(':'));
}

TEST(GpuWorkerGroupTest, SetupsCarryTheGpusAndTheSmallestPlannedCacheIsServed) {
  auto g = WorkerGroup::Create(GpuOptions(0));
  ASSERT_TRUE(g.ok()) << g.status();
  {
    FakeRank r0(Loopback(**g), 0, 1000), r1(Loopback(**g), 1, 900);
    ASSERT_TRUE((*g)->Start().ok()) << (*g)->state();
    EXPECT_EQ((*g)->n_blocks(), 900);
    EXPECT_EQ((*g)->block_size(), 16);
    EXPECT_EQ((*g)->ranks()[1].info.device(), "cuda:0 (fake)");
    (*g)->Shutdown();
    EXPECT_EQ(r0.setup().gpu(), 3);
    EXPECT_EQ(r1.setup().gpu(), 1);
    EXPECT_EQ(r0.setup().comm_backend(), "nccl");
    EXPECT_EQ(r0.setup().kv_tokens(), 0);
    EXPECT_DOUBLE_EQ(r1.setup().gpu_memory_utilization(), 0.75);
  }
}

TEST(GpuWorkerGroupTest, AFixedCacheSizeStillRequiresAgreement) {
  auto g = WorkerGroup::Create(GpuOptions(4096));
  ASSERT_TRUE(g.ok()) << g.status();
  FakeRank r0(Loopback(**g), 0, 256), r1(Loopback(**g), 1, 255);
  absl::Status s = (*g)->Start();
  EXPECT_THAT(std::string(s.message()), HasSubstr("ranks disagree on the KV cache")) << s;
  (*g)->Shutdown();
}

}  // namespace
}  // namespace tessera::workers
