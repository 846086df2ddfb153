#include "controller/workers/worker_group.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/ipc/shm_channel.h"
#include "common/ipc/shm_collectives.h"
#include "common/util/monotonic.h"
#include "common/util/thread_name.h"
#include "controller/workers/gpu_plan.h"
#include "grpcpp/grpcpp.h"
#include "tessera/v1/worker.grpc.pb.h"

namespace tessera::workers {

namespace v1 = tessera::v1;
using Clock = std::chrono::steady_clock;
using ServerStream = grpc::ServerReaderWriter<v1::ControllerMessage, v1::WorkerMessage>;

namespace {

std::string Describe(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exited with status ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const char* name = strsignal(sig);
    return absl::StrCat("was killed by signal ", sig, name ? absl::StrCat(" (", name, ")") : "");
  }
  return "stopped";
}

std::string Mib(uint64_t bytes) { return absl::StrCat(bytes / (1024 * 1024), " MiB"); }

// The descriptor numbers the step channel and the collective group have in a spawned
// worker.
constexpr int kStepChannelFd = 3;
constexpr int kCollectivesFd = 4;
static_assert(kStepChannelFd == 3 && kCollectivesFd == 4,
              "SpawnLocked closes every other descriptor from 3 up around these two");
// How long a wait for results sleeps before it looks at the group's state again (a
// failure also wakes it at once).
constexpr auto kResultPoll = std::chrono::milliseconds(20);

}  // namespace

// One worker's connection within the current generation.
struct Slot {
  ServerStream* stream = nullptr;  // owned by its Connect handler
  std::mutex write_mu;
  RankState state;
  Clock::time_point last_seen;
  bool closed = false;            // the handler returned
  bool reported_failure = false;  // it sent a WorkerFailure
  std::optional<v1::StepResult> result;
  // A spawned worker's shared-memory step channel, used once it reports having mapped it.
  std::unique_ptr<ipc::ShmChannel> channel;
  bool channel_attached = false;
};

// The step between StartStep and FinishStep.
struct InFlightStep {
  uint64_t generation = 0;
  uint64_t step_id = 0;
  Clock::time_point handed_off;  // when StartStep began to send it
  std::vector<std::shared_ptr<Slot>> slots;
};

struct WorkerGroup::Impl final : public v1::WorkerControl::Service {
  WorkerGroupOptions options;
  std::unique_ptr<grpc::Server> server;
  int bound_port = 0;

  mutable std::mutex mu;
  std::condition_variable cv;
  uint64_t generation = 0;
  std::vector<std::shared_ptr<Slot>> slots;  // per rank, this generation
  std::vector<pid_t> pids;                   // spawned, this generation
  // The spawned CPU ranks' collectives through shared memory, this generation (one mapping
  // for the group; each rank maps it from its descriptor kCollectivesFd).
  std::unique_ptr<ipc::ShmCollectives> collectives;
  bool up = false;      // every rank loaded, no failure since
  std::string failure;  // this generation's first failure
  // A failure a worker reported (or its stream closing) is held back briefly: when a peer
  // died, the survivors' "all-reduce failed" arrives first, and the death is the cause.
  std::string soft_failure;
  Clock::time_point soft_since;
  std::string state = "starting";
  int restarts = 0;
  bool shutting_down = false;
  bool first_outcome = false;
  bool came_up = false;    // this generation reached ready
  bool accepting = false;  // slots of the current generation exist and take workers
  absl::Status first_status;
  WorkerGroupEvents events;
  std::map<std::string, std::string> store;  // rendezvous keys
  std::thread supervisor;
  std::mutex step_mu;  // one step at a time: held from StartStep to FinishStep
  std::unique_lock<std::mutex> step_lock;
  std::optional<InFlightStep> in_flight;

  void Log(const std::string& line) {
    if (options.log) options.log(line);
  }

  // Marks the generation failed (first reason wins) and wakes everyone. mu held.
  void FailLocked(const std::string& why) {
    if (!failure.empty()) return;
    failure = why;
    up = false;
    cv.notify_all();
    // A step's wait for results on a channel wakes and sees the failure.
    for (const auto& s : slots) {
      if (s->channel != nullptr) s->channel->Wake(ipc::Mailbox::kToController);
    }
  }

  void SoftFailLocked(const std::string& why) {
    if (!soft_failure.empty() || !failure.empty()) return;
    soft_failure = why;
    soft_since = Clock::now();
  }

  // --- the control service ---------------------------------------------------------

  grpc::Status StoreSet(grpc::ServerContext*, const v1::StoreSetRequest* req,
                        v1::StoreSetResponse*) override {
    std::lock_guard<std::mutex> lock(mu);
    store[req->key()] = req->value();
    cv.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status StoreGet(grpc::ServerContext* ctx, const v1::StoreGetRequest* req,
                        v1::StoreGetResponse* resp) override {
    std::unique_lock<std::mutex> lock(mu);
    const auto deadline =
        Clock::now() + std::chrono::milliseconds(std::max<int64_t>(req->timeout_ms(), 1));
    auto missing = [&] {
      std::vector<std::string> m;
      for (const std::string& k : req->keys()) {
        if (!store.contains(k)) m.push_back(k);
      }
      return m;
    };
    while (!missing().empty()) {
      if (ctx->IsCancelled() || shutting_down) return grpc::Status(grpc::CANCELLED, "cancelled");
      if (cv.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(200))) ==
              std::cv_status::timeout &&
          Clock::now() >= deadline) {
        // Gloo's keys end in the rank that publishes them.
        std::vector<std::string> ranks;
        for (const std::string& k : missing()) {
          size_t i = k.find_last_not_of("0123456789");
          ranks.push_back(i + 1 < k.size() ? absl::StrCat("rank ", k.substr(i + 1))
                                           : absl::StrCat("key '", k, "'"));
        }
        return grpc::Status(grpc::DEADLINE_EXCEEDED,
                            absl::StrCat("rendezvous: ", absl::StrJoin(ranks, ", "),
                                         " never arrived within ", req->timeout_ms(), " ms"));
      }
    }
    if (!req->wait_only() && req->keys_size() > 0) resp->set_value(store[req->keys(0)]);
    return grpc::Status::OK;
  }

  grpc::Status Connect(grpc::ServerContext* ctx, ServerStream* stream) override {
    v1::WorkerMessage msg;
    if (!stream->Read(&msg) || !msg.has_hello()) {
      return grpc::Status(grpc::INVALID_ARGUMENT, "the first message must be Hello");
    }
    const v1::Hello hello = msg.hello();
    std::shared_ptr<Slot> slot;
    uint64_t gen;
    v1::WorkerSetup setup;
    {
      std::unique_lock<std::mutex> lock(mu);
      // A worker may connect before the group (re)starts, e.g. an external one started
      // first or during a restart's backoff: it waits for the next generation's slots.
      cv.wait_for(lock, options.rendezvous_timeout, [&] { return accepting || shutting_down; });
      if (!accepting) {
        return grpc::Status(grpc::UNAVAILABLE, "the controller is not taking workers now");
      }
      gen = generation;
      if (shutting_down) return grpc::Status(grpc::UNAVAILABLE, "the controller is stopping");
      if (!options.external_workers && hello.group_generation() != generation) {
        return grpc::Status(grpc::FAILED_PRECONDITION,
                            absl::StrCat("worker of generation ", hello.group_generation(),
                                         " is stale (now ", generation, ")"));
      }
      int rank = hello.rank();
      if (rank < 0) {  // external worker without --rank: the first free one
        for (int r = 0; r < options.world_size && rank < 0; ++r) {
          if (slots[r]->stream == nullptr && !slots[r]->closed) rank = r;
        }
        if (rank < 0) return grpc::Status(grpc::RESOURCE_EXHAUSTED, "every rank is taken");
      }
      if (rank >= options.world_size) {
        return grpc::Status(
            grpc::INVALID_ARGUMENT,
            absl::StrCat("rank ", rank, " is outside the group of ", options.world_size));
      }
      slot = slots[rank];
      if (slot->stream != nullptr || slot->closed) {
        return grpc::Status(grpc::ALREADY_EXISTS, absl::StrCat("rank ", rank, " is taken"));
      }
      slot->stream = stream;
      slot->state.connected = true;
      slot->state.hostname = hello.hostname();
      slot->last_seen = Clock::now();
      setup.set_rank(rank);
      setup.set_world_size(options.world_size);
      setup.set_model_path(options.model_path);
      setup.set_comm_backend(options.comm_backend);
      setup.set_store_prefix(absl::StrCat("g", gen, "/"));
      setup.set_comm_interface(options.comm_interface);
      setup.set_dtype(options.dtype);
      setup.set_exact(options.exact);
      setup.set_allow_batch_variance(!options.batch_invariant);
      setup.set_weight_packing(options.weight_packing);
      setup.set_kv_block_size(options.kv_block_size);
      setup.set_kv_tokens(options.kv_tokens);
      setup.set_heartbeat_interval_ms(options.heartbeat_interval.count());
      setup.set_rendezvous_timeout_ms(options.rendezvous_timeout.count());
      setup.set_gpu(options.gpus.empty() ? -1 : options.gpus[rank % options.gpus.size()]);
      setup.set_gpu_memory_utilization(options.gpu_memory_utilization);
      setup.set_group_generation(gen);
      PlanCpus(rank, &setup);
      cv.notify_all();
    }
    const int rank = setup.rank();
    const std::string who = absl::StrCat("rank ", rank, "/", options.world_size);
    v1::ControllerMessage out;
    *out.mutable_setup() = setup;
    {
      std::lock_guard<std::mutex> w(slot->write_mu);
      stream->Write(out);
    }
    Log(absl::StrCat(who, ": worker connected from ", hello.hostname(), " (pid ", hello.pid(),
                     ")"));
    while (stream->Read(&msg)) {
      std::lock_guard<std::mutex> lock(mu);
      slot->last_seen = Clock::now();
      if (msg.has_progress()) {
        slot->state.bytes_done = msg.progress().bytes_done();
        slot->state.bytes_total = msg.progress().bytes_total();
      } else if (msg.has_loaded()) {
        slot->state.loaded = true;
        slot->state.info = msg.loaded();
        slot->state.bytes_done = slot->state.bytes_total;
        slot->channel_attached = msg.loaded().step_channel() && slot->channel != nullptr;
        slot->state.step_channel = slot->channel_attached;
        const std::string& device = msg.loaded().device();
        Log(absl::StrCat(who, ": loaded", device.empty() ? "" : absl::StrCat(" on ", device),
                         " in ", msg.loaded().load_seconds(), " s, read ",
                         Mib(msg.loaded().weight_bytes_read()), ", peak RSS ",
                         Mib(msg.loaded().peak_rss_bytes()), ", ", msg.loaded().n_blocks(),
                         " KV blocks of ", msg.loaded().block_size(), " tokens",
                         slot->channel_attached ? ", steps through shared memory" : "",
                         msg.loaded().collectives().empty()
                             ? ""
                             : absl::StrCat(", collectives over ", msg.loaded().collectives())));
      } else if (msg.has_step_result()) {
        slot->result = msg.step_result();
      } else if (msg.has_failure()) {
        slot->reported_failure = true;
        if (gen == generation) {
          SoftFailLocked(absl::StrCat("worker ", who, ": ", msg.failure().message()));
        }
      }
      cv.notify_all();
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      slot->stream = nullptr;
      slot->closed = true;
      if (gen == generation && !shutting_down) {
        SoftFailLocked(absl::StrCat("worker ", who, " closed its control stream"));
      }
      cv.notify_all();
    }
    (void)ctx;
    return grpc::Status::OK;
  }

  // Disjoint core sets: the controller's allowed CPUs divided evenly among local ranks.
  void PlanCpus(int rank, v1::WorkerSetup* setup) {
    std::vector<int> cpus;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
      }
    }
    const int n = options.world_size;
    int threads = options.threads_per_worker;
    if (!options.external_workers && options.pin_cpus && options.gpus.empty() &&
        static_cast<int>(cpus.size()) >= n) {
      const size_t b = cpus.size() * rank / n, e = cpus.size() * (rank + 1) / n;
      for (size_t i = b; i < e; ++i) setup->add_cpu_affinity(cpus[i]);
      if (threads <= 0) threads = static_cast<int>(e - b);
    }
    if (threads <= 0) threads = std::max<int>(1, static_cast<int>(cpus.size()) / n);
    setup->set_threads(options.external_workers && options.threads_per_worker <= 0 ? 0 : threads);
    // A rank polling for its next step holds a CPU; with every CPU so held, the controller
    // waited about 66 µs for one (TP 2 on 2 vCPUs), three times a futex hand-off.
    setup->set_poll_for_steps(n < static_cast<int>(cpus.size()));
  }

  // --- lifecycle -------------------------------------------------------------------

  absl::Status SpawnLocked(int rank) {
    std::vector<std::string> args = {options.worker_binary,
                                     "--controller",
                                     absl::StrCat("127.0.0.1:", bound_port),
                                     "--rank",
                                     std::to_string(rank),
                                     "--generation",
                                     std::to_string(generation),
                                     "--die-with-parent"};
    if (options.control_host != "0.0.0.0" && options.control_host != "::") {
      args[2] = absl::StrCat(options.control_host, ":", bound_port);
    }
    // Steps and results go through shared memory; without it (memfd refused) over the stream.
    // A step's tokens and a result's sampled tokens take kilobytes; a mailbox's pages are
    // touched only as messages use them.
    absl::StatusOr<std::unique_ptr<ipc::ShmChannel>> channel =
        absl::UnavailableError("step_channel_bytes is 0");
    if (options.step_channel_bytes > 0) {
      channel = ipc::ShmChannel::Create(options.step_channel_bytes);
    }
    if (channel.ok()) {
      slots[rank]->channel = *std::move(channel);
      args.push_back("--step-channel-fd");
      args.push_back(std::to_string(kStepChannelFd));
    } else if (options.step_channel_bytes > 0) {
      Log(absl::StrCat("rank ", rank, "/", options.world_size, ": no shared-memory step channel (",
                       channel.status().message(), "); steps go over gRPC"));
    }
    const ipc::ShmChannel* shared = slots[rank]->channel.get();
    const ipc::ShmCollectives* group = collectives.get();
    if (group != nullptr) {
      args.push_back("--collectives-fd");
      args.push_back(std::to_string(kCollectivesFd));
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string cuda_env;
    if (!options.gpus.empty()) {
      cuda_env = absl::StrCat("CUDA_VISIBLE_DEVICES=",
                              ChildCudaVisibleDevices(std::getenv("CUDA_VISIBLE_DEVICES"),
                                                      options.gpus[rank % options.gpus.size()]));
    }
    const long max_fd = sysconf(_SC_OPEN_MAX);
    pid_t pid = fork();
    if (pid < 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot start worker rank ", rank, ": fork: ", std::strerror(errno)));
    }
    if (pid == 0) {
      // The worker needs only stdio. Inheriting the controller's other descriptors would keep
      // its listening sockets open after a drain closes them (new clients then hang in the
      // kernel's backlog instead of being refused) and its connections open after it closes
      // them. The step channel and the collective group alone are passed on, as
      // descriptors kStepChannelFd and kCollectivesFd (their own descriptors are numbered
      // above both, so neither dup2 closes the other's source); whichever of the two the
      // worker does not get is closed like the rest.
      if (shared != nullptr && !shared->ShareWithChild(kStepChannelFd)) _exit(126);
      if (group != nullptr && !group->ShareWithChild(kCollectivesFd)) _exit(126);
      if (shared == nullptr) close(kStepChannelFd);
      if (group == nullptr) close(kCollectivesFd);
      if (close_range(kCollectivesFd + 1, ~0U, 0) != 0) {
        for (long fd = kCollectivesFd + 1; fd < max_fd; ++fd) close(static_cast<int>(fd));
      }
      if (!cuda_env.empty()) putenv(cuda_env.data());
      execv(argv[0], argv.data());
      _exit(127);
    }
    pids.push_back(pid);
    slots[rank]->state.pid = pid;
    return absl::OkStatus();
  }

  void KillGenerationLocked() {
    for (pid_t p : pids) kill(p, SIGKILL);
  }

  // Reaps the spawned workers; a death fails the generation. mu held. When several are
  // found dead at once, the cause is named first: a worker killed by a signal, then one
  // that exited without reporting a failure, before those that exited after reporting one
  // (a peer's death breaks their collectives).
  void ReapLocked() {
    struct Death {
      int rank;
      pid_t pid;
      int status;
      int priority;
    };
    std::vector<Death> deaths;
    for (auto it = pids.begin(); it != pids.end();) {
      int status = 0;
      if (waitpid(*it, &status, WNOHANG) == *it) {
        int rank = -1;
        for (size_t i = 0; i < slots.size(); ++i) {
          if (slots[i]->state.pid == *it) rank = static_cast<int>(i);
        }
        const bool reported = rank >= 0 && slots[rank]->reported_failure;
        deaths.push_back({rank, *it, status, WIFSIGNALED(status) ? 0 : reported ? 2 : 1});
        it = pids.erase(it);
      } else {
        ++it;
      }
    }
    if (deaths.empty()) return;
    std::stable_sort(deaths.begin(), deaths.end(),
                     [](const Death& a, const Death& b) { return a.priority < b.priority; });
    // The reason reaches clients (a failed request's status, /ready), which have no use for
    // process ids: it names ranks, and the pids go to the operator's log only.
    std::string why;
    for (const Death& d : deaths) {
      const std::string rank = absl::StrCat("worker rank ", d.rank, "/", options.world_size);
      Log(absl::StrCat(rank, " (pid ", d.pid, ") ", Describe(d.status)));
      why += absl::StrCat(why.empty() ? "" : "; then ", rank, " ", Describe(d.status));
    }
    if (deaths.front().priority != 0) {
      // Workers that exited (rather than being killed): often the consequence of a peer's
      // death that is not reaped yet (a collective broke when the peer's sockets closed,
      // before the kernel made it a zombie). Held back briefly like a reported failure, so
      // that the peer's signal is named first when it comes.
      SoftFailLocked(why);
      return;
    }
    if (!soft_failure.empty() && failure.empty()) why += "; reported: " + soft_failure;
    FailLocked(why);
  }

  void CheckHeartbeatsLocked() {
    const auto now = Clock::now();
    for (size_t r = 0; r < slots.size(); ++r) {
      const Slot& s = *slots[r];
      if (s.stream == nullptr) continue;
      if (now - s.last_seen > options.heartbeat_timeout) {
        FailLocked(absl::StrCat("worker rank ", r, "/", options.world_size,
                                " stopped answering (no heartbeat for ",
                                std::chrono::duration<double>(now - s.last_seen).count(), " s)"));
      }
    }
  }

  // Runs one generation: start, wait for loaded, then watch until it fails or we stop.
  // Returns the failure ("" when stopped).
  std::string RunGeneration() {
    std::unique_lock<std::mutex> lock(mu);
    ++generation;
    failure.clear();
    soft_failure.clear();
    store.clear();
    slots.clear();
    pids.clear();
    for (int r = 0; r < options.world_size; ++r) {
      slots.push_back(std::make_shared<Slot>());
      slots.back()->state.rank = r;
    }
    accepting = true;
    cv.notify_all();
    state = "loading";
    came_up = false;
    const auto load_start = Clock::now();
    if (!options.external_workers) {
      collectives.reset();
      if (options.world_size > 1 && options.gpus.empty() && options.comm_backend == "gloo" &&
          options.collective_slot_bytes > 0) {
        auto group = ipc::ShmCollectives::Create(options.world_size, options.collective_slot_bytes);
        if (group.ok()) {
          collectives = *std::move(group);
        } else {
          Log(absl::StrCat("no shared-memory collectives (", group.status().message(),
                           "); the ranks all-reduce over Gloo (TCP)"));
        }
      }
      for (int r = 0; r < options.world_size; ++r) {
        if (absl::Status s = SpawnLocked(r); !s.ok()) {
          FailLocked(std::string(s.message()));
          break;
        }
      }
      Log(absl::StrCat("started ", options.world_size, " worker(s) for ", options.model_path,
                       " (generation ", generation, ")"));
    } else {
      Log(absl::StrCat("waiting for ", options.world_size, " external worker(s) at ",
                       ControlAddress()));
    }
    const auto connect_deadline = Clock::now() + options.rendezvous_timeout;
    auto last_progress_log = Clock::now();
    while (!shutting_down && failure.empty()) {
      cv.wait_for(lock, std::chrono::milliseconds(50));
      ReapLocked();
      CheckHeartbeatsLocked();
      if (!soft_failure.empty() && failure.empty() &&
          Clock::now() - soft_since > std::chrono::milliseconds(300)) {
        FailLocked(soft_failure);
      }
      if (!up) {
        bool all_loaded = true;
        std::vector<std::string> unconnected;
        uint64_t done = 0, total = 0;
        for (const auto& s : slots) {
          all_loaded = all_loaded && s->state.loaded;
          if (!s->state.connected) unconnected.push_back(std::to_string(s->state.rank));
          done += s->state.bytes_done;
          total += s->state.bytes_total;
        }
        if (!unconnected.empty() && Clock::now() > connect_deadline) {
          FailLocked(absl::StrCat("rendezvous: rank(s) ", absl::StrJoin(unconnected, ", "),
                                  " never connected within ",
                                  options.rendezvous_timeout.count() / 1000.0, " s"));
          break;
        }
        if (total > 0 && Clock::now() - last_progress_log > std::chrono::seconds(2)) {
          last_progress_log = Clock::now();
          Log(absl::StrCat("loading: ", Mib(done), " of ", Mib(total), " (",
                           static_cast<int>(100.0 * done / total), "%)"));
        }
        if (all_loaded) {
          std::string mismatch = CheckGeometryLocked();
          if (!mismatch.empty()) {
            FailLocked(mismatch);
            break;
          }
          up = true;
          came_up = true;
          state = "ready";
          if (!first_outcome) {
            first_outcome = true;
            first_status = absl::OkStatus();
          }
          cv.notify_all();
          if (events.on_ready) {
            const double seconds = std::chrono::duration<double>(Clock::now() - load_start).count();
            const std::function<void(double)> on_ready = events.on_ready;
            lock.unlock();  // the event runs without the group's lock
            on_ready(seconds);
            lock.lock();
          }
        }
      }
    }
    std::string why = shutting_down ? "" : failure;
    up = false;
    accepting = false;
    // Stop this generation's workers: spawned ones are killed, external ones told to exit.
    for (auto& s : slots) {
      if (s->stream != nullptr) {
        v1::ControllerMessage m;
        m.mutable_shutdown()->set_reason(why.empty() ? "controller stopping" : why);
        std::lock_guard<std::mutex> w(s->write_mu);
        s->stream->Write(m);
      }
    }
    if (!shutting_down) KillGenerationLocked();
    return why;
  }

  // Ranks that planned their cache from their own free GPU memory (kv_tokens 0) may end
  // with different block counts; the group then uses the smallest (see n_blocks()).
  std::string CheckGeometryLocked() {
    const v1::Loaded& a = slots[0]->state.info;
    const bool planned_per_rank = options.kv_tokens == 0 && !options.gpus.empty();
    for (const auto& s : slots) {
      if ((!planned_per_rank && s->state.info.n_blocks() != a.n_blocks()) ||
          s->state.info.block_size() != a.block_size()) {
        return absl::StrCat("ranks disagree on the KV cache: rank 0 has ", a.n_blocks(),
                            " blocks of ", a.block_size(), ", rank ", s->state.rank, " ",
                            s->state.info.n_blocks(), " of ", s->state.info.block_size());
      }
    }
    return "";
  }

  void Supervise() {
    int consecutive = 0;
    while (true) {
      std::string why = RunGeneration();
      std::unique_lock<std::mutex> lock(mu);
      if (shutting_down) break;
      // A group that served before it failed starts a fresh count: only failures in a
      // row (a model that cannot load, a crash at once) exhaust max_restarts.
      if (came_up) consecutive = 0;
      Log(absl::StrCat("worker group failed: ", why));
      if (!first_outcome) {
        first_outcome = true;
        first_status = absl::UnavailableError(why);
        cv.notify_all();
      }
      ++consecutive;
      if (consecutive > options.max_restarts) {
        state = absl::StrCat("gave up after ", consecutive, " failure(s); last: ", why);
        Log(state);
        cv.notify_all();
        // Stay down; reap what is left and wait for shutdown.
        while (!shutting_down) {
          ReapLocked();
          cv.wait_for(lock, std::chrono::milliseconds(200));
        }
        break;
      }
      auto backoff = options.restart_backoff * (1 << std::min(consecutive - 1, 16));
      backoff = std::min<std::chrono::milliseconds>(backoff, options.restart_backoff_max);
      state = absl::StrCat("restarting in ", backoff.count() / 1000.0, " s after: ", why);
      Log(state);
      ++restarts;
      if (events.on_restart) {
        for (int r = 0; r < options.world_size; ++r) events.on_restart(r);
      }
      const auto until = Clock::now() + backoff;
      while (!shutting_down && Clock::now() < until) {
        ReapLocked();
        cv.wait_until(lock, until);
      }
      // Let the old children go before the next generation starts.
      for (pid_t p : pids) waitpid(p, nullptr, 0);
      pids.clear();
      if (shutting_down) break;
    }
  }

  std::string ControlAddress() const {
    std::string host = options.control_host;
    if (host == "0.0.0.0" || host == "::") {
      char name[256] = {0};
      gethostname(name, sizeof(name) - 1);
      host = name;
    }
    return absl::StrCat(host, ":", bound_port);
  }
};

WorkerGroup::WorkerGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WorkerGroup::~WorkerGroup() { Shutdown(); }

absl::StatusOr<std::unique_ptr<WorkerGroup>> WorkerGroup::Create(WorkerGroupOptions options) {
  if (options.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a group of ", options.world_size, " ranks"));
  }
  if (!options.external_workers) {
    auto bin = FindWorkerBinary(options.worker_binary);
    if (!bin.ok()) return bin.status();
    options.worker_binary = *bin;
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(
      absl::StrCat(impl->options.control_host, ":", impl->options.control_port),
      grpc::InsecureServerCredentials(), &impl->bound_port);
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  builder.RegisterService(impl.get());
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->bound_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", impl->options.control_host, ":",
                                               impl->options.control_port,
                                               " for the worker control service"));
  }
  return std::unique_ptr<WorkerGroup>(new WorkerGroup(std::move(impl)));
}

absl::Status WorkerGroup::Start() {
  Impl& g = *impl_;
  g.supervisor = std::thread([&g] {
    NameThisThread("tessera-workers");
    g.Supervise();
  });
  std::unique_lock<std::mutex> lock(g.mu);
  g.cv.wait(lock, [&] { return g.first_outcome || g.shutting_down; });
  return g.first_status;
}

void WorkerGroup::Shutdown() {
  Impl& g = *impl_;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (g.shutting_down && !g.supervisor.joinable() && g.server == nullptr) return;
    g.shutting_down = true;
    g.cv.notify_all();
  }
  if (g.supervisor.joinable()) g.supervisor.join();
  // Workers got Shutdown on their streams; give them a moment, then make sure.
  std::vector<pid_t> pids;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    pids = g.pids;
    g.pids.clear();
  }
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  for (pid_t p : pids) {
    while (waitpid(p, nullptr, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (g.server != nullptr) {
    g.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    g.server.reset();
  }
}

absl::StatusOr<v1::StepResult> WorkerGroup::RunStep(const v1::StepRequest& step) {
  if (absl::Status started = StartStep(step); !started.ok()) return started;
  return FinishStep();
}

absl::Status WorkerGroup::StartStep(const v1::StepRequest& step) {
  Impl& g = *impl_;
  std::unique_lock<std::mutex> one_step(g.step_mu);
  InFlightStep f;
  f.step_id = step.step_id();
  f.handed_off = Clock::now();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (!g.up) return absl::UnavailableError(absl::StrCat("the workers are not ready: ", g.state));
    f.slots = g.slots;
    f.generation = g.generation;
    for (auto& s : f.slots) s->result.reset();
  }
  std::string bytes;  // the step serialized once for the channels
  bool serialized = false;
  v1::ControllerMessage m;  // the step as a stream message, built when one needs it
  auto write_stream = [&](Slot& s) {
    if (!m.has_step()) *m.mutable_step() = step;
    std::lock_guard<std::mutex> w(s.write_mu);
    return s.stream != nullptr && s.stream->Write(m);
  };
  for (auto& s : f.slots) {
    absl::Status sent;
    if (s->channel_attached) {
      if (!serialized) {
        step.SerializeToString(&bytes);
        serialized = true;
      }
      // Too large for the mailbox: it goes by the stream, and the mailbox says so.
      sent = s->channel->PostOrSendElsewhere(
          ipc::Mailbox::kToWorker, bytes.size(),
          [&](char* p) { std::memcpy(p, bytes.data(), bytes.size()); },
          [&] { return write_stream(*s); });
    } else if (!write_stream(*s)) {
      sent = absl::UnavailableError("the stream is closed");
    }
    if (!sent.ok()) {
      std::lock_guard<std::mutex> lock(g.mu);
      g.FailLocked(
          absl::IsUnavailable(sent)
              ? absl::StrCat("worker rank ", s->state.rank, " cannot be reached")
              : absl::StrCat("worker rank ", s->state.rank, " step channel: ", sent.message()));
      break;
    }
  }
  // A failure is the step's result: FinishStep reports it.
  g.in_flight = std::move(f);
  g.step_lock = std::move(one_step);
  return absl::OkStatus();
}

absl::StatusOr<v1::StepResult> WorkerGroup::FinishStep() {
  Impl& g = *impl_;
  if (!g.in_flight.has_value()) {
    return absl::FailedPreconditionError("FinishStep without a started step");
  }
  std::unique_lock<std::mutex> one_step = std::move(g.step_lock);
  const InFlightStep f = *std::exchange(g.in_flight, std::nullopt);
  auto stopped = [&] {  // g.mu held
    return g.generation != f.generation || !g.failure.empty() || g.shutting_down;
  };
  // Results through the channels; a result that went by the stream arrives like the
  // results of ranks without a channel.
  for (const auto& s : f.slots) {
    if (!s->channel_attached) continue;
    while (true) {
      v1::StepResult r;
      bool parsed = false;
      const ipc::ShmChannel::Taken taken = s->channel->Take(
          ipc::Mailbox::kToController,
          [&](const char* p, size_t n) { parsed = r.ParseFromArray(p, static_cast<int>(n)); });
      if (taken == ipc::ShmChannel::Taken::kElsewhere) break;
      {
        std::lock_guard<std::mutex> lock(g.mu);
        if (taken == ipc::ShmChannel::Taken::kMessage) {
          if (parsed) {
            s->result = std::move(r);
          } else {
            g.FailLocked(absl::StrCat("worker rank ", s->state.rank,
                                      " sent a step result that does not parse"));
          }
          break;
        }
        if (stopped()) break;
      }
      // FailLocked wakes this wait.
      s->channel->Wait(ipc::Mailbox::kToController, kResultPoll);
    }
  }
  std::unique_lock<std::mutex> lock(g.mu);
  g.cv.wait(lock, [&] {
    if (stopped()) return true;
    for (auto& s : f.slots) {
      if (!s->result.has_value()) return false;
    }
    return true;
  });
  if (stopped()) {
    return absl::UnavailableError(g.failure.empty() ? "the controller is stopping" : g.failure);
  }
  const Clock::time_point results_in = Clock::now();
  v1::StepResult r0 = *f.slots[0]->result;
  StepTiming timing;
  timing.compute_seconds = r0.compute_seconds();
  // Each all-reduce as the rank that waited longest in it saw it.
  std::vector<double>& allreduce = timing.allreduce_seconds;
  allreduce.assign(r0.allreduce_seconds().begin(), r0.allreduce_seconds().end());
  // The workers' clock stamps, where every rank gave them and they fall inside the step.
  const int64_t handed_off_ns = MonotonicNanos(f.handed_off);
  const int64_t results_in_ns = MonotonicNanos(results_in);
  int64_t last_taken = 0, last_finished = 0;
  bool stamped = true;
  for (auto& s : f.slots) {
    const int64_t taken = s->result->taken_ns(), finished = s->result->finished_ns();
    stamped = stamped && taken >= handed_off_ns && finished >= taken && finished <= results_in_ns;
    last_taken = std::max(last_taken, taken);
    last_finished = std::max(last_finished, finished);
  }
  timing.control_seconds =
      std::max(0.0, std::chrono::duration<double>(results_in - f.handed_off).count() -
                        timing.compute_seconds);
  if (stamped) {
    timing.to_workers_seconds = static_cast<double>(last_taken - handed_off_ns) * 1e-9;
    timing.to_controller_seconds = static_cast<double>(results_in_ns - last_finished) * 1e-9;
  }
  for (auto& s : f.slots) {
    if (!s->result->error().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", f.step_id, " on rank ", s->state.rank, ": ", s->result->error()));
    }
    const auto& calls = s->result->allreduce_seconds();
    if (static_cast<size_t>(calls.size()) != allreduce.size()) continue;  // not the same calls
    for (int i = 0; i < calls.size(); ++i) allreduce[i] = std::max(allreduce[i], calls[i]);
  }
  if (g.events.on_step) g.events.on_step(timing);
  return r0;
}

int WorkerGroup::block_size() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->slots.empty() ? 0 : impl_->slots[0]->state.info.block_size();
}

int WorkerGroup::n_blocks() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->slots.empty()) return 0;
  int n = impl_->slots[0]->state.info.n_blocks();
  for (const auto& s : impl_->slots) {
    if (s->state.loaded) n = std::min(n, s->state.info.n_blocks());
  }
  return n;
}

bool WorkerGroup::ready() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->up;
}

uint64_t WorkerGroup::cache_epoch() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->generation;
}

std::string WorkerGroup::control_address() const { return impl_->ControlAddress(); }

std::vector<RankState> WorkerGroup::ranks() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<RankState> out;
  for (const auto& s : impl_->slots) out.push_back(s->state);
  return out;
}

int WorkerGroup::restarts() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->restarts;
}

std::string WorkerGroup::state() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->state;
}

void WorkerGroup::set_events(WorkerGroupEvents events) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->events = std::move(events);
}

absl::StatusOr<std::string> FindWorkerBinary(const std::string& configured) {
  namespace fs = std::filesystem;
  std::vector<std::string> tried;
  auto usable = [&](const fs::path& p) {
    tried.push_back(p.string());
    return access(p.c_str(), X_OK) == 0;
  };
  if (!configured.empty()) {
    if (usable(configured)) return configured;
    return absl::NotFoundError(
        absl::StrCat("worker binary ", configured, " does not exist or is not executable"));
  }
  if (const char* env = std::getenv("TESSERA_WORKER_BINARY"); env != nullptr && *env) {
    if (usable(env)) return std::string(env);
  }
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path dir = self.parent_path();
    for (const fs::path& p :
         {dir / "tessera-worker", dir.parent_path() / "bin" / "tessera-worker"}) {
      if (usable(p)) return p.string();
    }
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (const auto& d : absl::StrSplit(std::string(path), ':')) {
      fs::path p = fs::path(std::string(d)) / "tessera-worker";
      if (access(p.c_str(), X_OK) == 0) return p.string();
    }
    tried.push_back("tessera-worker on PATH");
  }
  return absl::NotFoundError(absl::StrCat("cannot find the tessera-worker binary (tried ",
                                          absl::StrJoin(tried, ", "),
                                          "); set --worker-binary or TESSERA_WORKER_BINARY"));
}

}  // namespace tessera::workers
