// tessera-worker: one rank of a model. Started by tesserad (or by hand with --controller
// for ranks on other machines); everything else arrives over the control stream.
//
//   tessera-worker --controller HOST:PORT [--rank R] [--generation G] [--die-with-parent]
//                  [--step-channel-fd N] [--collectives-fd N]
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/ipc/shm_channel.h"
#include "common/ipc/shm_collectives.h"
#include "common/util/monotonic.h"
#include "common/util/proc_stats.h"
#include "grpcpp/grpcpp.h"
#include "tessera/v1/worker.grpc.pb.h"
#include "worker/comm/control_store.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/shm_communicator.h"
#include "worker/engine/step_engine.h"
#include "worker/executor/executor.h"
#include "worker/process/cuda_ordinal.h"
#ifdef TESSERA_HAVE_NCCL
#include "common/model/constants.h"
#include "worker/comm/nccl_communicator.h"
#endif

namespace tessera::worker {
namespace {

namespace v1 = tessera::v1;
using Stream = grpc::ClientReaderWriter<v1::WorkerMessage, v1::ControllerMessage>;

constexpr char kUsage[] =
    "usage: tessera-worker --controller HOST:PORT [--rank R] [--generation G] "
    "[--comm-interface ADDR] [--connect-timeout S] [--die-with-parent]\n"
    "\n"
    "One rank of a Tessera model. tesserad starts its workers itself; start one by hand to\n"
    "put a rank on another machine: tesserad --external-workers ... waits for them.\n"
    "A rank runs on the GPU the controller names (tesserad --gpus; CUDA ordinal 0 when\n"
    "CUDA_VISIBLE_DEVICES shows one device, else that number), or else on CPU cores.\n"
    "\n"
    "  --controller HOST:PORT  tesserad's control service (its --control-host/--control-port)\n"
    "  --rank R                this worker's rank (default: the controller assigns one)\n"
    "  --comm-interface ADDR   the address this rank's Gloo connections bind to (default:\n"
    "                          what the controller says, 127.0.0.1 for local groups); on a\n"
    "                          multi-host group, this machine's address the others reach\n"
    "  --connect-timeout S     wait up to S seconds for the controller to listen (default 60)\n"
    "  --generation G          the worker group generation it was spawned for (internal)\n"
    "  --die-with-parent       exit when the parent process exits (internal)\n"
    "  --step-channel-fd N     the inherited shared-memory step channel (internal)\n"
    "  --collectives-fd N      the inherited shared-memory collective group of a CPU group\n"
    "                          spawned on one host, used instead of Gloo (internal)\n";

struct Flags {
  std::string controller;
  int rank = -1;
  uint64_t generation = 0;
  bool die_with_parent = false;
  std::string comm_interface;
  int connect_timeout_s = 60;
  int step_channel_fd = -1;
  int collectives_fd = -1;
};

// Steps that arrived over the control stream, for the step loop.
class StepInbox {
 public:
  void Push(v1::StepRequest step) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      steps_.push_back(std::move(step));
    }
    cv_.notify_one();
  }
  v1::StepRequest Pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !steps_.empty(); });
    v1::StepRequest step = std::move(steps_.front());
    steps_.pop_front();
    return step;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::StepRequest> steps_;
};

// Writes to the stream from several threads (heartbeats, progress, results).
class Sender {
 public:
  explicit Sender(Stream* stream) : stream_(stream) {}
  bool Send(const v1::WorkerMessage& m) {
    std::lock_guard<std::mutex> lock(mu_);
    return stream_->Write(m);
  }

 private:
  std::mutex mu_;
  Stream* stream_;
};

[[noreturn]] void Die(Sender* sender, const std::string& why) {
  std::fprintf(stderr, "tessera-worker: %s\n", why.c_str());
  if (sender != nullptr) {
    v1::WorkerMessage m;
    m.mutable_failure()->set_message(why);
    sender->Send(m);
  }
  std::fflush(stderr);
  // No destructors: a communicator whose peers are gone may block in its own.
  _exit(1);
}

executor::ComputeDtype ParseDtype(const std::string& d) {
  if (d == "float32") return executor::ComputeDtype::kFloat32;
  if (d == "bfloat16") return executor::ComputeDtype::kBFloat16;
  if (d == "float16") return executor::ComputeDtype::kFloat16;
  return executor::ComputeDtype::kAuto;
}

int Run(const Flags& flags) {
  if (flags.die_with_parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) return 1;  // the parent is already gone
  }
  // A worker tesserad spawned gets its steps through shared memory; without the channel
  // (a worker started by hand, or a mapping that failed) they come over the stream.
  std::unique_ptr<ipc::ShmChannel> step_channel;
  if (flags.step_channel_fd >= 0) {
    auto attached = ipc::ShmChannel::Attach(flags.step_channel_fd);
    if (attached.ok()) {
      step_channel = *std::move(attached);
    } else {
      std::fprintf(stderr, "tessera-worker: no step channel (%s); steps come over gRPC\n",
                   std::string(attached.status().message()).c_str());
    }
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(flags.controller, grpc::InsecureChannelCredentials(), args);
  // The controller may not be listening yet (workers on other hosts often start first):
  // wait for it up to --connect-timeout.
  if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                 std::chrono::seconds(flags.connect_timeout_s))) {
    Die(nullptr, absl::StrCat("cannot reach the controller at ", flags.controller, " within ",
                              flags.connect_timeout_s, " s"));
  }
  std::unique_ptr<v1::WorkerControl::Stub> stub = v1::WorkerControl::NewStub(channel);
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream = stub->Connect(&ctx);
  Sender sender(stream.get());

  v1::WorkerMessage hello;
  hello.mutable_hello()->set_rank(flags.rank);
  hello.mutable_hello()->set_pid(getpid());
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  hello.mutable_hello()->set_hostname(host);
  hello.mutable_hello()->set_group_generation(flags.generation);
  if (!sender.Send(hello)) Die(nullptr, "cannot reach the controller at " + flags.controller);

  v1::ControllerMessage msg;
  if (!stream->Read(&msg) || !msg.has_setup()) {
    grpc::Status st = stream->Finish();
    Die(nullptr, absl::StrCat("the controller at ", flags.controller,
                              " sent no setup: ", st.error_message()));
  }
  const v1::WorkerSetup setup = msg.setup();
  const int rank = setup.rank(), world = setup.world_size();
  const std::string who = absl::StrCat("rank ", rank, "/", world);

  if (setup.cpu_affinity_size() > 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : setup.cpu_affinity()) CPU_SET(c, &set);
    sched_setaffinity(0, sizeof(set), &set);  // best effort: a restricted cgroup may refuse
  }

  // Heartbeats from their own thread, so that a long step does not look like a hang.
  std::atomic<bool> stop{false};
  std::thread heartbeat([&] {
    const auto interval =
        std::chrono::milliseconds(std::max<int64_t>(setup.heartbeat_interval_ms(), 10));
    uint64_t seq = 0;
    while (!stop.load()) {
      std::this_thread::sleep_for(interval);
      v1::WorkerMessage m;
      m.mutable_heartbeat()->set_seq(++seq);
      if (!sender.Send(m)) break;
    }
  });
  heartbeat.detach();

  // A setup that names a GPU runs the forward pass there. The CUDA ordinal follows what this
  // process sees: its one device when the controller set CUDA_VISIBLE_DEVICES.
  const bool on_gpu = setup.gpu() >= 0;
  const int cuda_ordinal =
      on_gpu ? CudaOrdinal(std::getenv("CUDA_VISIBLE_DEVICES"), setup.gpu()) : -1;
#ifndef TESSERA_HAVE_CUDA
  if (on_gpu) {
    Die(&sender, absl::StrCat(who, ": GPU ", setup.gpu(),
                              " was asked for but this build has no CUDA backend (run CPU "
                              "workers: tesserad --cpu-workers N)"));
  }
#endif

  // Join the group first (fast), then load: a rank that never arrives fails everyone's
  // rendezvous early, before minutes of loading.
  const auto timeout =
      std::chrono::milliseconds(std::max<int64_t>(setup.rendezvous_timeout_ms(), 1000));
  comm::ControlStore store(stub.get(), timeout);
  std::unique_ptr<comm::Communicator> communicator;
  std::string collectives;  // how they travel, for the Loaded report
  if (world > 1) {
    if (setup.comm_backend() != "nccl" && flags.collectives_fd >= 0) {
      // Every rank of a spawned group got the same mapping: all take this path, or (a
      // failure here) the group fails and restarts.
      auto group = ipc::ShmCollectives::Attach(flags.collectives_fd, rank, timeout);
      if (!group.ok()) Die(&sender, absl::StrCat(who, ": ", group.status().message()));
      communicator = std::make_unique<comm::ShmCommunicator>(*std::move(group));
      // Joined first, as with Gloo's rendezvous: a rank that never arrives fails the group
      // before minutes of loading.
      if (absl::Status s = communicator->Barrier(); !s.ok()) {
        Die(&sender, absl::StrCat(who, ": joining the group: ", s.message()));
      }
      collectives = "shared memory";
    } else if (setup.comm_backend() == "nccl") {
#ifdef TESSERA_HAVE_NCCL
      if (!on_gpu) Die(&sender, who + ": NCCL was asked for but the setup names no GPU");
      auto c = comm::NcclCommunicator::Connect(store, setup.store_prefix(), rank, world,
                                               cuda_ordinal, timeout);
      if (!c.ok()) Die(&sender, absl::StrCat(who, ": ", c.status().message()));
      communicator = *std::move(c);
      collectives = "nccl";
#else
      Die(&sender, who + ": NCCL was asked for but this build has no CUDA/NCCL");
#endif
    } else {
      comm::GlooOptions g;
      g.interface_address = !flags.comm_interface.empty()    ? flags.comm_interface
                            : setup.comm_interface().empty() ? "127.0.0.1"
                                                             : setup.comm_interface();
      g.prefix = setup.store_prefix();
      g.timeout = timeout;
      auto c = comm::GlooCommunicator::Connect(store, rank, world, g);
      if (!c.ok()) Die(&sender, absl::StrCat(who, ": ", c.status().message()));
      communicator = *std::move(c);
      collectives = "gloo";
    }
  }

  executor::ExecutorOptions o;
  o.exact = setup.exact();
  o.dtype = ParseDtype(setup.dtype());
  o.threads = setup.threads();
  o.kv_block_size = setup.kv_block_size() > 0 ? setup.kv_block_size() : model::kDefaultKvBlockSize;
  o.kv_tokens = setup.kv_tokens();
  o.batch_invariant = !setup.allow_batch_variance();
  o.load_mtp = setup.load_mtp();
  if (!setup.weight_packing().empty()) {
    std::optional<executor::WeightPacking> packing =
        executor::ParseWeightPacking(setup.weight_packing());
    if (!packing) {
      Die(&sender, absl::StrCat(who, ": weight_packing '", setup.weight_packing(),
                                "' is not one of auto, on, off"));
    }
    o.weight_packing = *packing;
  }
  if (!setup.expert_parallel().empty()) {
    std::optional<model::ExpertParallel> ep = model::ParseExpertParallel(setup.expert_parallel());
    if (!ep) {
      Die(&sender, absl::StrCat(who, ": expert_parallel '", setup.expert_parallel(),
                                "' is not one of auto, on, off"));
    }
    o.expert_parallel = *ep;
  }
  o.tp_rank = rank;
  o.tp_size = world;
  o.comm = communicator.get();
  if (on_gpu) {
    o.device = executor::Device::kCuda;
    o.gpu = cuda_ordinal;
    if (setup.gpu_memory_utilization() > 0) {
      o.gpu_memory_utilization = setup.gpu_memory_utilization();
    }
  }
  auto last_progress = std::chrono::steady_clock::now();
  o.on_load_progress = [&](uint64_t done, uint64_t total) {
    auto now = std::chrono::steady_clock::now();
    if (done != total && now - last_progress < std::chrono::milliseconds(100)) return;
    last_progress = now;
    v1::WorkerMessage m;
    m.mutable_progress()->set_bytes_done(done);
    m.mutable_progress()->set_bytes_total(total);
    sender.Send(m);
  };
  const uint64_t rchar_before = util::ReadCharBytes();
  const auto load_start = std::chrono::steady_clock::now();
  auto ex = executor::Executor::Create(setup.model_path(), o);
  if (!ex.ok()) Die(&sender, absl::StrCat(who, ": ", ex.status().message()));
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  std::vector<std::string> parts;
  for (size_t i = 0; i < (*ex)->file().part_count(); ++i) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::canonical((*ex)->file().part(i).path(), ec);
    parts.push_back(ec ? (*ex)->file().part(i).path() : p.string());
  }
  const uint64_t pread_bytes = util::ReadCharBytes() - rchar_before;
  const uint64_t mapped_bytes = util::MappedResidentBytes(parts);
  const uint64_t bytes_read = pread_bytes + mapped_bytes;
  const int threads = (*ex)->threads();
  const std::string device = (*ex)->device_name();
  StepEngine engine(*std::move(ex), rank);
  engine.PrepareStructuredOutput();

  v1::WorkerMessage loaded;
  loaded.mutable_loaded()->set_n_blocks(engine.executor().n_blocks());
  loaded.mutable_loaded()->set_block_size(engine.executor().block_size());
  loaded.mutable_loaded()->set_weight_bytes_read(bytes_read);
  loaded.mutable_loaded()->set_mapped_bytes(mapped_bytes);
  loaded.mutable_loaded()->set_pread_bytes(pread_bytes);
  loaded.mutable_loaded()->set_load_seconds(load_seconds);
  loaded.mutable_loaded()->set_peak_rss_bytes(util::PeakRssBytes());
  loaded.mutable_loaded()->set_threads(threads);
  loaded.mutable_loaded()->set_device(device);
  loaded.mutable_loaded()->set_step_channel(step_channel != nullptr);
  loaded.mutable_loaded()->set_collectives(collectives);
  if (!sender.Send(loaded)) Die(nullptr, who + ": the controller went away");
  std::fprintf(
      stderr,
      "tessera-worker %s: loaded %s on %s in %.2f s (%llu bytes read: %llu mapped, %llu by "
      "pread)\n",
      who.c_str(), setup.model_path().c_str(), device.c_str(), load_seconds,
      static_cast<unsigned long long>(bytes_read), static_cast<unsigned long long>(mapped_bytes),
      static_cast<unsigned long long>(pread_bytes));
  if (!engine.executor().kernel_summary().empty()) {
    std::fprintf(stderr, "tessera-worker %s: kernels: %s\n", who.c_str(),
                 engine.executor().kernel_summary().c_str());
  }

  // The stream's reader: shutdown, steps too large for the channel, the controller gone.
  StepInbox inbox;
  std::thread reader([&] {
    v1::ControllerMessage m;
    while (stream->Read(&m)) {
      if (m.has_shutdown()) {
        stop = true;
        std::fflush(stderr);
        _exit(0);
      }
      if (m.has_step()) inbox.Push(std::move(*m.mutable_step()));
    }
    // The controller disappeared (or closed our stream): no orphans.
    std::fprintf(stderr, "tessera-worker %s: the controller closed the control stream; exiting\n",
                 who.c_str());
    std::fflush(stderr);
    _exit(1);
  });
  reader.detach();

  // How long the worker polls for the next step after posting a result, where the
  // controller asks for it: the controller's answer (applying the result, scheduling,
  // building the next step) comes within this under load, and a polling worker takes it at
  // once, where a sleeping one on an idle vCPU must first be woken through the hypervisor
  // (60-90 µs measured on a 2-vCPU VM).
  const auto hand_off_poll =
      setup.poll_for_steps() ? std::chrono::microseconds(500) : std::chrono::microseconds(0);
  // Called right after each result is posted (and once after loading).
  auto next_step = [&]() -> v1::StepRequest {
    if (step_channel == nullptr) return inbox.Pop();
    v1::StepRequest step;
    auto poll = hand_off_poll;  // the first wait only
    while (true) {
      bool parsed = true;
      switch (step_channel->Take(ipc::Mailbox::kToWorker, [&](const char* p, size_t n) {
        parsed = step.ParseFromArray(p, n);
      })) {
        case ipc::ShmChannel::Taken::kMessage:
          if (!parsed) Die(&sender, who + ": a step from the step channel does not parse");
          return step;
        case ipc::ShmChannel::Taken::kElsewhere:
          return inbox.Pop();
        case ipc::ShmChannel::Taken::kNothing:
          step_channel->Wait(ipc::Mailbox::kToWorker, std::chrono::seconds(1), poll);
          poll = std::chrono::microseconds(0);
          break;
      }
    }
  };
  auto send_result = [&](const v1::WorkerMessage& out) {
    if (step_channel == nullptr) return sender.Send(out);
    const v1::StepResult& res = out.step_result();
    const size_t size = res.ByteSizeLong();
    // Too large for the mailbox: the result goes by the stream, and the mailbox says so.
    absl::Status posted = step_channel->PostOrSendElsewhere(
        ipc::Mailbox::kToController, size,
        [&](char* p) { res.SerializeToArray(p, static_cast<int>(size)); },
        [&] { return sender.Send(out); });
    if (absl::IsUnavailable(posted)) return false;
    if (!posted.ok()) Die(&sender, absl::StrCat(who, ": step channel: ", posted.message()));
    return true;
  };

  std::map<uint64_t, std::string> request_of;  // sequence -> request id, for errors
  while (true) {
    const v1::StepRequest step = next_step();
    const auto t0 = std::chrono::steady_clock::now();
    for (const v1::StepSequence& q : step.seqs()) {
      if (!q.request_id().empty()) request_of[q.seq_id()] = q.request_id();
    }
    absl::StatusOr<v1::StepResult> r = engine.Run(step);
    v1::WorkerMessage out;
    v1::StepResult* res = out.mutable_step_result();
    if (r.ok()) {
      *res = *std::move(r);
    } else {
      // Name the requests the failed step carried.
      std::string ids;
      for (const v1::StepSequence& q : step.seqs()) {
        auto it = request_of.find(q.seq_id());
        if (it != request_of.end()) ids += (ids.empty() ? "" : ", ") + it->second;
      }
      res->set_step_id(step.step_id());
      res->set_error(absl::StrCat(r.status().message(),
                                  ids.empty() ? "" : absl::StrCat(" (requests ", ids, ")")));
    }
    for (uint64_t id : step.release_seq_ids()) request_of.erase(id);
    const auto t1 = std::chrono::steady_clock::now();
    res->set_compute_seconds(std::chrono::duration<double>(t1 - t0).count());
    res->set_taken_ns(MonotonicNanos(t0));
    res->set_finished_ns(MonotonicNanos(t1));
    if (communicator) {
      for (double seconds : communicator->TakeAllReduceSeconds()) {
        res->add_allreduce_seconds(seconds);
      }
    }
    if (!send_result(out)) Die(nullptr, who + ": the controller went away");
    // A failed collective leaves the group unusable: report and go.
    if (!r.ok() && (absl::IsUnavailable(r.status()) || absl::IsDeadlineExceeded(r.status()))) {
      Die(&sender, absl::StrCat(who, ": ", r.status().message()));
    }
  }
}

}  // namespace
}  // namespace tessera::worker

int main(int argc, char** argv) {
  tessera::worker::Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tessera-worker: %s needs a value\n%s", name, tessera::worker::kUsage);
        std::exit(2);
      }
      return argv[++i];
    };
    // The inherited descriptor number `name` gives; false after saying what is wrong.
    auto descriptor = [&](const char* name, int* fd) {
      if (absl::SimpleAtoi(value(name), fd) && *fd >= 0) return true;
      std::fprintf(stderr, "tessera-worker: %s must be a descriptor number\n", name);
      return false;
    };
    if (a == "--help" || a == "-h") {
      std::fputs(tessera::worker::kUsage, stdout);
      return 0;
    } else if (a == "--controller") {
      flags.controller = value("--controller");
    } else if (a == "--rank") {
      if (!absl::SimpleAtoi(value("--rank"), &flags.rank) || flags.rank < 0) {
        std::fprintf(stderr, "tessera-worker: --rank must be a rank number\n");
        return 2;
      }
    } else if (a == "--generation") {
      if (!absl::SimpleAtoi(value("--generation"), &flags.generation)) {
        std::fprintf(stderr, "tessera-worker: --generation must be a number\n");
        return 2;
      }
    } else if (a == "--connect-timeout") {
      if (!absl::SimpleAtoi(value("--connect-timeout"), &flags.connect_timeout_s) ||
          flags.connect_timeout_s < 1) {
        std::fprintf(stderr, "tessera-worker: --connect-timeout must be a number of seconds\n");
        return 2;
      }
    } else if (a == "--comm-interface") {
      flags.comm_interface = value("--comm-interface");
    } else if (a == "--step-channel-fd") {
      if (!descriptor("--step-channel-fd", &flags.step_channel_fd)) return 2;
    } else if (a == "--collectives-fd") {
      if (!descriptor("--collectives-fd", &flags.collectives_fd)) return 2;
    } else if (a == "--die-with-parent") {
      flags.die_with_parent = true;
    } else {
      std::fprintf(stderr, "tessera-worker: unknown argument '%s'\n%s", a.c_str(),
                   tessera::worker::kUsage);
      return 2;
    }
  }
  if (flags.controller.empty()) {
    std::fprintf(stderr, "tessera-worker: --controller HOST:PORT is required\n%s",
                 tessera::worker::kUsage);
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  return tessera::worker::Run(flags);
}
