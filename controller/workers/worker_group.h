// The controller's side of the workers: it hosts the control service (one stream per
// worker, plus the rendezvous store Gloo and NCCL bootstrap through), spawns one
// tessera-worker per rank (or waits for external ones), supervises them and runs steps.
//
//   auto group = WorkerGroup::Create(options);   // starts the control service
//   absl::Status s = (*group)->Start();           // spawns, waits for "loaded" (or fails)
//   absl::StatusOr<v1::StepResult> r = (*group)->RunStep(step);
//
// Supervision: a worker that exits, crashes, disconnects or misses heartbeats for
// `heartbeat_timeout` fails the step in flight (UNAVAILABLE naming the rank and why); the
// whole group is then stopped and started again after an exponential backoff, up to
// `max_restarts` consecutive failures, after which the group stays down (not ready) with
// its reason. Spawned workers die with the controller (PR_SET_PDEATHSIG) and exit when
// their control stream breaks, so there are no orphans.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/constants.h"
#include "controller/serving/step_runner.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::workers {

struct WorkerGroupOptions {
  std::string model_path;
  int world_size = 1;
  // Wait for `world_size` workers started by hand (`tessera-worker --controller ...`)
  // instead of spawning them.
  bool external_workers = false;
  std::string worker_binary;  // tessera-worker to spawn
  std::string control_host = "127.0.0.1";
  int control_port = 0;  // 0: ephemeral
  std::string comm_backend = "gloo";
  std::string comm_interface = "127.0.0.1";  // the address Gloo ranks listen on
  int threads_per_worker = 0;                // 0: the cores of its CPU set
  bool pin_cpus = true;                      // disjoint core sets per worker where possible
  std::vector<int> gpus;                     // one per rank (NCCL); empty: CPU workers
  std::string dtype = "auto";
  bool exact = false;
  bool batch_invariant = true;           // see ExecutorOptions::batch_invariant
  bool load_mtp = false;                 // see ExecutorOptions::load_mtp (--speculative mtp)
  std::string expert_parallel = "auto";  // auto | on | off: ExecutorOptions::expert_parallel
  std::string weight_packing = "auto";   // auto | on | off: ExecutorOptions::weight_packing
  int kv_block_size = model::kDefaultKvBlockSize;
  int64_t kv_tokens = 0;
  double gpu_memory_utilization = 0.9;
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds heartbeat_timeout{5000};
  std::chrono::milliseconds rendezvous_timeout{60000};
  // Per direction, for each spawned worker's shared-memory step channel; 0: steps and
  // results go over the control stream. Larger messages take the stream either way.
  size_t step_channel_bytes = size_t{4} << 20;
  // Spawned CPU ranks (world_size > 1, no GPUs, comm_backend "gloo") run their collectives
  // through one shared memory mapping with this many bytes per rank and round (larger
  // collectives take several rounds); 0: over Gloo's TCP connections.
  size_t collective_slot_bytes = size_t{4} << 20;
  int max_restarts = 5;
  std::chrono::milliseconds restart_backoff{1000};
  std::chrono::milliseconds restart_backoff_max{30000};
  // Progress lines ("rank 1/2: loading 512 MiB of 1.0 GiB") and supervision events.
  std::function<void(const std::string&)> log;
};

struct RankState {
  int rank = 0;
  bool connected = false;
  bool loaded = false;
  pid_t pid = 0;  // 0 for external workers
  std::string hostname;
  uint64_t bytes_done = 0, bytes_total = 0;
  bool step_channel = false;  // steps pass through shared memory (see StartStep)
  tessera::v1::Loaded info;
};

// Where a step's time went, as the controller and the workers saw it.
struct StepTiming {
  double compute_seconds = 0;  // rank 0's time in the step (forward pass and sampling)
  // The duration of each of the step's all-reduces, in call order; each the longest any
  // rank saw for that call.
  std::vector<double> allreduce_seconds;
  // The control plane's two halves (negative where a rank did not report its clock): from
  // the hand-off of the step to the moment the last rank had taken it, and from the moment
  // the last rank finished computing to the moment the controller held every result.
  double to_workers_seconds = -1;
  double to_controller_seconds = -1;
  // The whole round trip: from the hand-off to every result in, less rank 0's compute.
  double control_seconds = 0;
};

// Observer hooks for metrics; each may be empty.
struct WorkerGroupEvents {
  std::function<void(int rank)> on_restart;
  // After each step, with its timing (StepTiming).
  std::function<void(const StepTiming& timing)> on_step;
  // Each time every rank has loaded (at start and after a restart), with the seconds the
  // load took from the workers' start.
  std::function<void(double load_seconds)> on_ready;
};

class WorkerGroup : public serving::StepRunner {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerGroup>> Create(WorkerGroupOptions options);
  ~WorkerGroup() override;

  // Brings the group up and waits for the first outcome: OK once every rank reported
  // loaded, else the error of that first attempt (the supervisor keeps retrying in the
  // background when max_restarts > 0).
  absl::Status Start();
  // Tells the workers to exit and waits for them (kills what is left after a grace period).
  void Shutdown();

  absl::StatusOr<tessera::v1::StepResult> RunStep(const tessera::v1::StepRequest& step) override;
  // Spawned workers take steps and return results through a shared-memory channel each
  // (a futex wake per direction); external workers, and messages too large for the
  // channel, use the control stream.
  absl::Status StartStep(const tessera::v1::StepRequest& step) override;
  absl::StatusOr<tessera::v1::StepResult> FinishStep() override;
  int block_size() const override;
  int n_blocks() const override;
  bool ready() const override;
  // The generation: each restart starts workers with empty KV caches.
  uint64_t cache_epoch() const override;

  // "host:port" of the control service (what external workers pass as --controller).
  std::string control_address() const;
  std::vector<RankState> ranks() const;
  int restarts() const;
  // Why the group is not ready ("loading", "restarting after ...", "gave up after ...").
  std::string state() const;
  void set_events(WorkerGroupEvents events);

  struct Impl;

 private:
  explicit WorkerGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The tessera-worker binary to spawn: `configured` when set, else $TESSERA_WORKER_BINARY,
// else beside the running executable, else in ../bin/ from it (the build tree's bin/),
// else "tessera-worker" from PATH. NotFound naming the places tried.
absl::StatusOr<std::string> FindWorkerBinary(const std::string& configured);

}  // namespace tessera::workers
