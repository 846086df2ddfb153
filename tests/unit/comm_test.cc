// The host communicators' collectives (Gloo over TCP, and shared memory with slots small
// enough that a collective takes several rounds) against values computed independently
// here: sums in float32 and in 16-bit formats (reduced in float32, rounded once), gathers,
// broadcast, barrier, one timing per all-reduce, and a timeout naming the rank that never
// joined.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "common/util/half.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/shm_communicator.h"

namespace tessera::comm {
namespace {

enum class Backend { kGloo, kSharedMemory };

// Runs f(communicator, rank) on n threads, each rank with its own communicator.
template <typename F>
void OnRanks(Backend backend, int n, F f) {
  gloo::rendezvous::HashStore store;
  // One page per rank and round: the 1,000- and 65,536-float collectives below take 1 and
  // 16 rounds.
  auto group = ipc::ShmCollectives::Create(n, 4096);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r) {
    t.emplace_back([&, r] {
      std::unique_ptr<Communicator> c;
      if (backend == Backend::kGloo) {
        auto g = GlooCommunicator::Connect(store, r, n, {});
        ASSERT_TRUE(g.ok()) << g.status();
        c = *std::move(g);
      } else {
        auto g = ipc::ShmCollectives::Attach(dup((*group)->fd()), r, std::chrono::seconds(30));
        ASSERT_TRUE(g.ok()) << g.status();
        c = std::make_unique<ShmCommunicator>(*std::move(g));
      }
      ASSERT_EQ(c->rank(), r);
      ASSERT_EQ(c->size(), n);
      f(*c, r);
    });
  }
  for (auto& x : t) x.join();
}

class HostCommunicator : public ::testing::TestWithParam<Backend> {};

INSTANTIATE_TEST_SUITE_P(Backends, HostCommunicator,
                         ::testing::Values(Backend::kGloo, Backend::kSharedMemory),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param == Backend::kGloo ? "Gloo" : "SharedMemory";
                         });

TEST_P(HostCommunicator, AllReduceSumsEveryDtype) {
  for (int n : {2, 3, 4}) {
    OnRanks(GetParam(), n, [n](Communicator& c, int r) {
      std::vector<float> f(1000);
      for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(r * 1000 + i) * 0.25f;
      ASSERT_TRUE(c.AllReduceSum(f.data(), f.size()).ok());
      for (size_t i = 0; i < f.size(); ++i) {
        // sum over ranks q of (q*1000 + i)/4, exact in float32 at these magnitudes.
        const double want = (1000.0 * n * (n - 1) / 2 + static_cast<double>(i) * n) * 0.25;
        ASSERT_EQ(f[i], static_cast<float>(want)) << i;
      }
      for (ReduceDtype d : {ReduceDtype::kBFloat16, ReduceDtype::kFloat16}) {
        std::vector<uint16_t> h(257);
        for (size_t i = 0; i < h.size(); ++i) {
          const float v = 0.001f * static_cast<float>(i) + 0.5f * r;
          h[i] = d == ReduceDtype::kBFloat16 ? FloatToBf16(v) : FloatToFp16(v);
        }
        ASSERT_TRUE(c.AllReduceSum(h.data(), h.size(), d).ok());
        for (size_t i = 0; i < h.size(); ++i) {
          // Each rank's value rounded to 16 bits, summed in float32, rounded once.
          float sum = 0;
          for (int q = 0; q < n; ++q) {
            const float v = 0.001f * static_cast<float>(i) + 0.5f * q;
            sum += d == ReduceDtype::kBFloat16 ? Bf16ToFloat(FloatToBf16(v))
                                               : Fp16ToFloat(FloatToFp16(v));
          }
          const uint16_t want = d == ReduceDtype::kBFloat16 ? FloatToBf16(sum) : FloatToFp16(sum);
          ASSERT_EQ(h[i], want) << i;
        }
      }
    });
  }
}

TEST_P(HostCommunicator, AllGatherBroadcastBarrier) {
  OnRanks(GetParam(), 3, [](Communicator& c, int r) {
    std::vector<float> mine = {static_cast<float>(r), static_cast<float>(10 * r)};
    std::vector<float> all(6);
    ASSERT_TRUE(c.AllGather(mine.data(), 2, all.data()).ok());
    EXPECT_EQ(all, (std::vector<float>{0, 0, 1, 10, 2, 20}));
    std::vector<uint8_t> b(5, static_cast<uint8_t>(r));
    if (r == 2) b = {9, 8, 7, 6, 5};
    ASSERT_TRUE(c.Broadcast(b.data(), b.size(), 2).ok());
    EXPECT_EQ(b, (std::vector<uint8_t>{9, 8, 7, 6, 5}));
    EXPECT_TRUE(c.Barrier().ok());
    EXPECT_TRUE(c.TakeAllReduceSeconds().empty());  // only all-reduces are timed
  });
}

// tessera_allreduce_seconds takes one observation per all-reduce call: each call leaves one
// duration, in call order, and taking them starts a fresh list.
TEST_P(HostCommunicator, EachAllReduceLeavesOneDuration) {
  OnRanks(GetParam(), 2, [](Communicator& c, int r) {
    std::vector<float> v(1 << 16, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.AllReduceSum(v.data(), v.size()).ok());
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::vector<double> seconds = c.TakeAllReduceSeconds();
    ASSERT_EQ(seconds.size(), 3u);
    double total = 0;
    for (double s : seconds) {
      EXPECT_GT(s, 0.0);
      total += s;
    }
    EXPECT_LE(total, elapsed);
    EXPECT_TRUE(c.TakeAllReduceSeconds().empty());
    EXPECT_EQ(v[0], 8.0f);  // 1 -> 2 -> 4 -> 8 over two ranks
  });
}

TEST(GlooCommunicator, ARankThatNeverJoinsTimesOut) {
  gloo::rendezvous::HashStore store;
  GlooOptions o;
  o.timeout = std::chrono::milliseconds(500);
  auto c = GlooCommunicator::Connect(store, 0, 2, o);  // rank 1 never comes
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(c.status())) << c.status();
  EXPECT_NE(c.status().message().find("rank 0 of 2"), absl::string_view::npos) << c.status();
}

TEST(GlooCommunicator, RejectsARankOutsideTheGroup) {
  gloo::rendezvous::HashStore store;
  EXPECT_FALSE(GlooCommunicator::Connect(store, 2, 2, {}).ok());
}

}  // namespace
}  // namespace tessera::comm
