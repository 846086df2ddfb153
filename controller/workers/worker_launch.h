// Starting a tessera-worker process for one rank, and saying how one ended. The worker gets
// its rank, generation and the control service's address on its command line, and at most
// two descriptors besides stdio: its shared-memory step channel and the group's
// shared-memory collectives (kStepChannelFd, kCollectivesFd).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/ipc/shm_channel.h"
#include "common/ipc/shm_collectives.h"

namespace tessera::workers {

// The descriptor numbers the step channel and the collective group have in a spawned
// worker.
constexpr int kStepChannelFd = 3;
constexpr int kCollectivesFd = 4;

struct WorkerLaunch {
  std::string binary;  // the tessera-worker to run
  // Where the control service listens; a wildcard host ("0.0.0.0", "::") is reached at
  // 127.0.0.1.
  std::string control_host;
  int control_port = 0;
  int rank = 0;
  uint64_t generation = 0;
  const ipc::ShmChannel* step_channel = nullptr;     // null: steps over the control stream
  const ipc::ShmCollectives* collectives = nullptr;  // null: collectives over the network
  int gpu = -1;  // the CUDA ordinal (of this process) the worker alone sees; -1: a CPU worker
};

// Forks and execs the worker (`--die-with-parent`, so it dies with this process); returns
// its pid. ResourceExhausted naming the rank when fork fails. A worker that cannot take its
// descriptors exits with status 126, one whose binary does not run with 127.
absl::StatusOr<pid_t> SpawnWorker(const WorkerLaunch& launch);

// How a waited-for process ended, from its wait status: "exited with status 1", "was killed
// by signal 9 (Killed)" or "stopped".
std::string DescribeWaitStatus(int wait_status);

}  // namespace tessera::workers
