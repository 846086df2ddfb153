// The gRPC service the workers talk to: the rendezvous store's two calls, and one control
// stream per worker (Hello, then its WorkerSetup, then its progress, "loaded", heartbeats,
// step results and failures).
#include <sched.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "controller/workers/worker_group_impl.h"

namespace tessera::workers {

namespace v1 = tessera::v1;

namespace {

// The log line of a rank that reported loaded.
std::string LoadedLine(const std::string& who, const v1::Loaded& loaded, bool step_channel) {
  const std::string& device = loaded.device();
  return absl::StrCat(
      who, ": loaded", device.empty() ? "" : absl::StrCat(" on ", device), " in ",
      loaded.load_seconds(), " s, read ", Mib(loaded.weight_bytes_read()), ", peak RSS ",
      Mib(loaded.peak_rss_bytes()), ", ", loaded.n_blocks(), " KV blocks of ", loaded.block_size(),
      " tokens", step_channel ? ", steps through shared memory" : "",
      loaded.collectives().empty() ? ""
                                   : absl::StrCat(", collectives over ", loaded.collectives()));
}

}  // namespace

grpc::Status WorkerGroup::Impl::StoreSet(grpc::ServerContext*, const v1::StoreSetRequest* req,
                                         v1::StoreSetResponse*) {
  store.Set(req->key(), req->value());
  return grpc::Status::OK;
}

grpc::Status WorkerGroup::Impl::StoreGet(grpc::ServerContext* ctx, const v1::StoreGetRequest* req,
                                         v1::StoreGetResponse* resp) {
  const std::vector<std::string> keys(req->keys().begin(), req->keys().end());
  absl::StatusOr<std::string> value = store.Get(keys, std::chrono::milliseconds(req->timeout_ms()),
                                                [ctx] { return ctx->IsCancelled(); });
  if (!value.ok()) {
    // absl's codes are gRPC's, number for number.
    return grpc::Status(static_cast<grpc::StatusCode>(value.status().code()),
                        std::string(value.status().message()));
  }
  if (!req->wait_only() && req->keys_size() > 0) resp->set_value(*std::move(value));
  return grpc::Status::OK;
}

grpc::Status WorkerGroup::Impl::Connect(grpc::ServerContext*, ServerStream* stream) {
  v1::WorkerMessage msg;
  if (!stream->Read(&msg) || !msg.has_hello()) {
    return grpc::Status(grpc::INVALID_ARGUMENT, "the first message must be Hello");
  }
  const v1::Hello hello = msg.hello();
  std::shared_ptr<Slot> slot;
  v1::ControllerMessage out;
  if (grpc::Status admitted = Admit(hello, stream, &slot, out.mutable_setup()); !admitted.ok()) {
    return admitted;
  }
  const uint64_t gen = out.setup().group_generation();
  const std::string who = absl::StrCat("rank ", out.setup().rank(), "/", options.world_size);
  WriteToWorker(*slot, out);
  Log(absl::StrCat(who, ": worker connected from ", hello.hostname(), " (pid ", hello.pid(), ")"));
  while (stream->Read(&msg)) {
    std::lock_guard<std::mutex> lock(mu);
    HandleMessageLocked(*slot, msg, gen, who);
  }
  {
    // With the slot's write lock too: a write in progress on this stream ends before the
    // stream does, and none starts after.
    std::scoped_lock lock(slot->write_mu, mu);
    slot->stream = nullptr;
    slot->closed = true;
    if (gen == generation && !shutting_down) {
      SoftFailLocked(absl::StrCat("worker ", who, " closed its control stream"));
    }
    cv.notify_all();
  }
  return grpc::Status::OK;
}

grpc::Status WorkerGroup::Impl::Admit(const v1::Hello& hello, ServerStream* stream,
                                      std::shared_ptr<Slot>* slot_out, v1::WorkerSetup* setup) {
  std::unique_lock<std::mutex> lock(mu);
  // A worker may connect before the group (re)starts, e.g. an external one started
  // first or during a restart's backoff: it waits for the next generation's slots.
  cv.wait_for(lock, options.rendezvous_timeout, [&] { return accepting || shutting_down; });
  if (!accepting) {
    return grpc::Status(grpc::UNAVAILABLE, "the controller is not taking workers now");
  }
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
  Slot& slot = *slots[rank];
  if (slot.stream != nullptr || slot.closed) {
    return grpc::Status(grpc::ALREADY_EXISTS, absl::StrCat("rank ", rank, " is taken"));
  }
  slot.stream = stream;
  slot.state.connected = true;
  slot.state.hostname = hello.hostname();
  slot.last_seen = Clock::now();
  *setup = SetupLocked(rank, generation);
  slot.polls_for_steps = setup->poll_for_steps();
  *slot_out = slots[rank];
  cv.notify_all();
  return grpc::Status::OK;
}

v1::WorkerSetup WorkerGroup::Impl::SetupLocked(int rank, uint64_t gen) {
  v1::WorkerSetup setup;
  setup.set_rank(rank);
  setup.set_world_size(options.world_size);
  setup.set_model_path(options.model_path);
  setup.set_comm_backend(options.comm_backend);
  setup.set_store_prefix(absl::StrCat("g", gen, "/"));
  setup.set_comm_interface(options.comm_interface);
  setup.set_dtype(options.dtype);
  setup.set_exact(options.exact);
  setup.set_allow_batch_variance(!options.batch_invariant);
  setup.set_load_mtp(options.load_mtp);
  setup.set_weight_packing(options.weight_packing);
  setup.set_expert_parallel(options.expert_parallel);
  setup.set_kv_block_size(options.kv_block_size);
  setup.set_kv_tokens(options.kv_tokens);
  setup.set_heartbeat_interval_ms(options.heartbeat_interval.count());
  setup.set_rendezvous_timeout_ms(options.rendezvous_timeout.count());
  setup.set_gpu(options.gpus.empty() ? -1 : options.gpus[rank % options.gpus.size()]);
  setup.set_gpu_memory_utilization(options.gpu_memory_utilization);
  setup.set_group_generation(gen);
  PlanCpus(rank, &setup);
  return setup;
}

void WorkerGroup::Impl::HandleMessageLocked(Slot& slot, const v1::WorkerMessage& msg, uint64_t gen,
                                            const std::string& who) {
  slot.last_seen = Clock::now();
  if (msg.has_progress()) {
    slot.state.bytes_done = msg.progress().bytes_done();
    slot.state.bytes_total = msg.progress().bytes_total();
  } else if (msg.has_loaded()) {
    slot.state.loaded = true;
    slot.state.info = msg.loaded();
    slot.state.bytes_done = slot.state.bytes_total;
    slot.channel_attached = msg.loaded().step_channel() && slot.channel != nullptr;
    slot.state.step_channel = slot.channel_attached;
    Log(LoadedLine(who, msg.loaded(), slot.channel_attached));
  } else if (msg.has_step_result()) {
    slot.result = msg.step_result();
  } else if (msg.has_failure()) {
    slot.reported_failure = true;
    if (gen == generation) {
      SoftFailLocked(absl::StrCat("worker ", who, ": ", msg.failure().message()));
    }
  }
  cv.notify_all();
}

// Disjoint core sets: the controller's allowed CPUs divided evenly among local ranks.
void WorkerGroup::Impl::PlanCpus(int rank, v1::WorkerSetup* setup) {
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
  // A rank polling for its next step holds a CPU, yielding it between polls. While the ranks
  // have a CPU each, polling pays: a rank asleep on an idle vCPU is woken 40-130 µs late
  // (`workers_bench wake`), and with the controller now sleeping through the step and polling
  // only around its expected end, TP 2 on 2 vCPUs took its control plane from a median of
  // 68-158 µs to 38-121 µs (bench/README.md). More ranks than CPUs: no polling.
  setup->set_poll_for_steps(n <= static_cast<int>(cpus.size()));
}

}  // namespace tessera::workers
