// Control plane and collectives of the multi-process engine (issue "Controller and
// workers"): figures, not assertions.
//
//   workers_bench control MODEL [TP]     round trip of an empty step through TP workers
//   workers_bench allreduce [N...]        all-reduce of N floats at TP 2 and 4 (threads of
//                                         one process): Gloo (TCP) and shared memory
//   workers_bench load MODEL [TP]         load time and peak RSS per worker
//   workers_bench wake [BUSY_US...]       this machine's floor for a step's hand-off: two
//                                         processes over one step channel, the "worker"
//                                         busy BUSY_US per message while the "controller"
//                                         sleeps; the round trip beyond BUSY_US, with the
//                                         worker sleeping or polling (500 us) for the next
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "common/ipc/shm_channel.h"
#include "common/ipc/shm_collectives.h"
#include "controller/workers/worker_group.h"
#include "gloo/rendezvous/hash_store.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/shm_communicator.h"

namespace {

using Clock = std::chrono::steady_clock;
using tessera::workers::WorkerGroup;
using tessera::workers::WorkerGroupOptions;

void Percentiles(const char* what, std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[static_cast<size_t>(q * (us.size() - 1))]; };
  std::printf("%-44s n=%zu  median %8.1f us  p90 %8.1f us  p99 %8.1f us\n", what, us.size(),
              at(0.5), at(0.9), at(0.99));
}

std::unique_ptr<WorkerGroup> Group(const std::string& model, int tp) {
  WorkerGroupOptions o;
  o.model_path = model;
  o.world_size = tp;
  o.threads_per_worker = 1;
  o.kv_tokens = 256;
  o.max_restarts = 0;
  auto g = WorkerGroup::Create(o);
  if (!g.ok() || !(*g)->Start().ok()) {
    std::fprintf(stderr, "cannot start %d workers on %s\n", tp, model.c_str());
    std::exit(1);
  }
  return *std::move(g);
}

int Control(const std::string& model, int tp) {
  auto g = Group(model, tp);
  tessera::v1::StepRequest step;
  std::vector<double> us;
  for (int i = 0; i < 3000; ++i) {
    step.set_step_id(i + 1);
    auto t0 = Clock::now();
    auto r = g->RunStep(step);
    auto t1 = Clock::now();
    if (!r.ok()) return 1;
    if (i >= 200) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  Percentiles(("control round trip, empty step, tp " + std::to_string(tp)).c_str(), us);
  return 0;
}

// One all-reduce of n floats per iteration on tp threads, each with the communicator
// `connect(rank)` makes; rank 0's durations.
template <typename Connect>
std::vector<double> TimeAllReduce(int tp, size_t n, Connect connect) {
  std::vector<std::vector<double>> us(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<tessera::comm::Communicator> c = connect(r);
      std::vector<float> v(n, 1.0f);
      for (int i = 0; i < 2200; ++i) {
        auto t0 = Clock::now();
        if (!c->AllReduceSum(v.data(), n).ok()) std::exit(1);
        if (i >= 200) {
          us[r].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  return us[0];
}

int AllReduce(std::vector<size_t> sizes) {
  if (sizes.empty()) sizes = {768, 4096, 7168};
  for (int tp : {2, 4}) {
    for (size_t n : sizes) {
      const std::string what = std::to_string(n) + " floats, tp " + std::to_string(tp);
      gloo::rendezvous::HashStore store;
      Percentiles(("gloo all-reduce " + what).c_str(),
                  TimeAllReduce(tp, n, [&](int r) -> std::unique_ptr<tessera::comm::Communicator> {
                    auto c = tessera::comm::GlooCommunicator::Connect(store, r, tp, {});
                    if (!c.ok()) std::exit(1);
                    return *std::move(c);
                  }));
      auto group = tessera::ipc::ShmCollectives::Create(tp, size_t{4} << 20);
      if (!group.ok()) std::exit(1);
      Percentiles(("shared-memory all-reduce " + what).c_str(),
                  TimeAllReduce(tp, n, [&](int r) -> std::unique_ptr<tessera::comm::Communicator> {
                    auto g = tessera::ipc::ShmCollectives::Attach(dup((*group)->fd()), r,
                                                                  std::chrono::seconds(60));
                    if (!g.ok()) std::exit(1);
                    return std::make_unique<tessera::comm::ShmCommunicator>(*std::move(g));
                  }));
    }
  }
  return 0;
}

int Load(const std::string& model, int tp) {
  auto t0 = Clock::now();
  auto g = Group(model, tp);
  double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("tp %d: group ready in %.2f s (spawn + rendezvous + load)\n", tp, wall);
  for (const auto& r : g->ranks()) {
    std::printf(
        "  rank %d: load %.2f s, read %.1f MiB (%.1f mapped + %.1f pread), peak RSS %.1f "
        "MiB\n",
        r.rank, r.info.load_seconds(), r.info.weight_bytes_read() / 1048576.0,
        r.info.mapped_bytes() / 1048576.0, r.info.pread_bytes() / 1048576.0,
        r.info.peak_rss_bytes() / 1048576.0);
  }
  return 0;
}

// The floor of a step's round trip on this machine, without a model or the serving loop: the
// controller posts a message and sleeps until the answer; the worker, woken by it, is busy
// `busy` (the step's compute) and answers, then waits for the next one, sleeping or first
// polling for `poll`. What the serving loop measures as its control plane is this plus
// the parsing and scheduling on either side.
int Wake(const std::vector<int>& busy_us) {
  using tessera::ipc::Mailbox;
  using tessera::ipc::ShmChannel;
  constexpr int kRounds = 2000;
  for (int poll_us : {0, 500}) {
    for (int busy : busy_us) {
      auto channel = ShmChannel::Create(4096);
      if (!channel.ok()) return 1;
      ShmChannel& c = **channel;
      const pid_t child = fork();
      if (child < 0) return 1;
      if (child == 0) {
        auto poll = std::chrono::microseconds(poll_us);
        for (int i = 0; i < kRounds; ++i) {
          while (c.Take(Mailbox::kToWorker, [](const char*, size_t) {}) ==
                 ShmChannel::Taken::kNothing) {
            c.Wait(Mailbox::kToWorker, std::chrono::seconds(10), poll);
          }
          const auto until = Clock::now() + std::chrono::microseconds(busy);
          while (Clock::now() < until) {
          }
          if (!c.Post(Mailbox::kToController, 1, [](char* p) { *p = 1; }).ok()) _exit(1);
        }
        _exit(0);
      }
      std::vector<double> us;
      for (int i = 0; i < kRounds; ++i) {
        const auto t0 = Clock::now();
        if (!c.Post(Mailbox::kToWorker, 1, [](char* p) { *p = 1; }).ok()) return 1;
        while (c.Take(Mailbox::kToController, [](const char*, size_t) {}) ==
               ShmChannel::Taken::kNothing) {
          c.Wait(Mailbox::kToController, std::chrono::seconds(10));
        }
        const double round_trip =
            std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        if (i >= 100) us.push_back(round_trip - busy);
      }
      int status = 0;
      waitpid(child, &status, 0);
      Percentiles(("hand-off beyond " + std::to_string(busy) + " us busy, worker " +
                   (poll_us > 0 ? "polls" : "sleeps"))
                      .c_str(),
                  us);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "control" && argc >= 3) return Control(argv[2], argc > 3 ? std::atoi(argv[3]) : 2);
  if (mode == "load" && argc >= 3) return Load(argv[2], argc > 3 ? std::atoi(argv[3]) : 1);
  if (mode == "allreduce") {
    std::vector<size_t> sizes;
    for (int i = 2; i < argc; ++i) sizes.push_back(std::strtoull(argv[i], nullptr, 10));
    return AllReduce(sizes);
  }
  if (mode == "wake") {
    std::vector<int> busy;
    for (int i = 2; i < argc; ++i) busy.push_back(std::atoi(argv[i]));
    if (busy.empty()) busy = {0, 2000, 20000};
    return Wake(busy);
  }
  std::fprintf(stderr,
               "usage: workers_bench control MODEL [TP] | allreduce [N...] | load MODEL [TP] | "
               "wake [BUSY_US...]\n");
  return 2;
}
