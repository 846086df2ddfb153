// The inside of WorkerGroup, shared by the files that each do one of its jobs:
//   control_service.cc  the gRPC service the workers talk to (their control streams and the
//                       rendezvous store's handlers)
//   supervisor.cc       generations: spawning, watching, failing and restarting them
//   worker_group.cc     the public face: creation, shutdown, steps and the accessors
// Not for use outside controller/workers/.
//
// Locks: `mu` guards the group's state; a slot's `write_mu` serializes writes to its stream.
// Stream writes happen without `mu`; a Connect handler takes both (std::scoped_lock) when it
// lets go of its stream.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/ipc/shm_channel.h"
#include "common/ipc/shm_collectives.h"
#include "controller/workers/rendezvous_store.h"
#include "controller/workers/worker_group.h"
#include "grpcpp/grpcpp.h"
#include "tessera/v1/worker.grpc.pb.h"

namespace tessera::workers {

using Clock = std::chrono::steady_clock;
using ServerStream =
    grpc::ServerReaderWriter<tessera::v1::ControllerMessage, tessera::v1::WorkerMessage>;

// One worker's connection within the current generation.
struct Slot {
  // Owned by its Connect handler. Set with `mu` held, before anyone can write to the slot;
  // cleared with both `mu` and `write_mu` held (so a write in progress ends before the
  // handler returns). Either lock is enough to read it.
  ServerStream* stream = nullptr;
  std::mutex write_mu;
  RankState state;
  Clock::time_point last_seen;
  bool closed = false;            // the handler returned
  bool reported_failure = false;  // it sent a WorkerFailure
  std::optional<tessera::v1::StepResult> result;
  // A spawned worker's shared-memory step channel, used once it reports having mapped it.
  std::unique_ptr<ipc::ShmChannel> channel;
  bool channel_attached = false;
  // Its setup told it to poll for the next step after each result (WorkerSetup).
  bool polls_for_steps = false;
};

// Writes `message` to the slot's stream unless the stream is gone; false when it is gone
// or the write failed. Takes the slot's `write_mu`; never call it with the group's `mu` held
// (a write blocks while the worker does not read).
bool WriteToWorker(Slot& slot, const tessera::v1::ControllerMessage& message);

// What a step asks of the workers, as far as its duration goes: a decode step of the same
// sequences takes about as long as the one before it.
struct StepShape {
  int sequences = -1;
  int64_t tokens = -1;
  bool operator==(const StepShape&) const = default;
};

// The step between StartStep and FinishStep.
struct InFlightStep {
  uint64_t generation = 0;
  uint64_t step_id = 0;
  Clock::time_point handed_off;  // when StartStep began to send it
  std::vector<std::shared_ptr<Slot>> slots;
  StepShape shape;
  // How long the last step of this shape took, hand-off to results, and how far such
  // predictions have been off lately: the wait for the results polls around then (see
  // TakeChannelResults).
  std::optional<Clock::duration> expected;
  Clock::duration expected_error{};
};

std::string Mib(uint64_t bytes);

struct WorkerGroup::Impl final : public tessera::v1::WorkerControl::Service {
  WorkerGroupOptions options;
  std::unique_ptr<grpc::Server> server;
  int bound_port = 0;
  RendezvousStore store;  // its own lock; not guarded by `mu`

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
  std::thread supervisor;
  std::mutex step_mu;  // one step at a time: held from StartStep to FinishStep
  std::unique_lock<std::mutex> step_lock;
  std::optional<InFlightStep> in_flight;
  // The last finished step's shape and round trip (step_mu held).
  StepShape last_shape;
  Clock::duration last_round_trip{};
  // A moving average of |round trip - expected| over the predicted steps.
  Clock::duration prediction_error{};

  void Log(const std::string& line) {
    if (options.log) options.log(line);
  }
  // Marks the generation failed (first reason wins) and wakes everyone. mu held.
  void FailLocked(const std::string& why);
  void SoftFailLocked(const std::string& why);
  std::string ControlAddress() const;

  // --- the control service (control_service.cc) -------------------------------------

  grpc::Status StoreSet(grpc::ServerContext* ctx, const tessera::v1::StoreSetRequest* req,
                        tessera::v1::StoreSetResponse* resp) override;
  grpc::Status StoreGet(grpc::ServerContext* ctx, const tessera::v1::StoreGetRequest* req,
                        tessera::v1::StoreGetResponse* resp) override;
  grpc::Status Connect(grpc::ServerContext* ctx, ServerStream* stream) override;
  // Gives the worker that said `hello` a slot of the current generation (waiting for one
  // while the group is between generations) and fills in its setup; the error to end its
  // stream with otherwise.
  grpc::Status Admit(const tessera::v1::Hello& hello, ServerStream* stream,
                     std::shared_ptr<Slot>* slot, tessera::v1::WorkerSetup* setup);
  tessera::v1::WorkerSetup SetupLocked(int rank, uint64_t gen);
  // Records one message of rank `who` (of generation `gen`) in its slot. mu held.
  void HandleMessageLocked(Slot& slot, const tessera::v1::WorkerMessage& msg, uint64_t gen,
                           const std::string& who);
  void PlanCpus(int rank, tessera::v1::WorkerSetup* setup);

  // --- supervision (supervisor.cc) ---------------------------------------------------

  void Supervise();
  // Runs one generation: start, wait for loaded, then watch until it fails or we stop.
  // Returns the failure ("" when stopped).
  std::string RunGeneration();
  // Fresh slots, pids and rendezvous keys for the next generation, which takes workers.
  void BeginGenerationLocked();
  // The shared-memory collectives (where they apply) and one worker process per rank.
  void SpawnGenerationLocked();
  absl::Status SpawnLocked(int rank);
  struct LoadWatch {
    Clock::time_point start;              // of the generation
    Clock::time_point connect_deadline;   // for every rank to connect
    Clock::time_point last_progress_log;  // the last "loading: ..." line
  };
  // Load progress, the rendezvous deadline, and the step to ready once every rank loaded
  // (running events.on_ready without the lock). mu held.
  void WatchLoadLocked(std::unique_lock<std::mutex>& lock, LoadWatch& watch);
  // Tells this generation's workers to stop (the writes without the lock) and kills the
  // spawned ones unless the group is shutting down.
  void EndGenerationLocked(std::unique_lock<std::mutex>& lock, const std::string& why);
  void KillGenerationLocked();
  // Reaps dead workers (without waiting) and fails the generation with the cause.
  void ReapLocked();
  void CheckHeartbeatsLocked();
  // "" when the ranks agree on the KV cache's geometry, else the disagreement.
  std::string CheckGeometryLocked();
  // Waits, without the lock, for the spawned workers of the generation that ended.
  void WaitForOldWorkersLocked(std::unique_lock<std::mutex>& lock);
};

}  // namespace tessera::workers
