// Which CUDA devices the ranks of a worker group run on: the choice from --gpus, the
// visible devices and the tensor-parallel size, and the CUDA_VISIBLE_DEVICES a spawned
// worker gets. Pure logic (no CUDA calls), so it is tested on machines without a GPU.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::workers {

// The devices for `tp` ranks, rank r on the r-th: the first `tp` of `requested` (CUDA
// ordinals as this process sees them, "0", "1", ...) or, when `requested` is empty, devices
// 0..tp-1 of the `n_visible` visible ones. InvalidArgument naming the problem: an entry that
// is not a device number (UUIDs are not accepted), a device listed twice, a device beyond
// the visible ones, fewer devices than `tp`.
absl::StatusOr<std::vector<int>> PickGpus(const std::vector<std::string>& requested, int n_visible,
                                          int tp);

// What tesserad knows when it decides where its ranks run.
struct PlacementInputs {
  int tp = 1;
  bool cpu_workers = false;       // --cpu-workers N given: CPU, whatever is visible
  std::vector<std::string> gpus;  // --gpus
  bool external_workers = false;  // ranks on other hosts: local devices say nothing
  bool build_has_cuda = false;    // the CUDA backend is compiled in
  bool build_has_nccl = false;    // and NCCL with it
  int n_visible = 0;              // CUDA devices this process sees
};

struct Placement {
  std::vector<int> gpus;              // one per rank; empty: CPU workers
  std::string comm_backend = "gloo";  // "nccl" between GPU ranks when the build has it
  std::vector<std::string> warnings;  // for the log: a request that cannot be honoured
};

// GPU workers when the build has CUDA, --cpu-workers is not given and GPUs are visible
// (with external workers: when --gpus names them, ids on the workers' hosts); otherwise
// CPU workers, with a warning when --gpus asked for GPUs. Errors: a --gpus list PickGpus
// rejects, or fewer visible GPUs than tp.
absl::StatusOr<Placement> PlaceRanks(const PlacementInputs& in);

// How `tp` GPU ranks all-reduce: "nccl" when the build has it (or tp is 1: no collective),
// else "gloo" through host memory, with a warning appended to `warnings`.
std::string GpuCommBackend(int tp, bool build_has_nccl, std::vector<std::string>* warnings);

// `tp` consecutive devices from `first` (what `tessera generate --device cuda:N --tp T` uses).
std::vector<int> ConsecutiveGpus(int first, int tp);

// The CUDA_VISIBLE_DEVICES value that shows a spawned worker exactly device `ordinal` of
// this process. When this process's own CUDA_VISIBLE_DEVICES (`parent`, null when unset)
// lists devices, ordinal N is its N-th entry (an id or a UUID), since the child's numbering
// would otherwise restart from the physical devices; else the ordinal itself.
std::string ChildCudaVisibleDevices(const char* parent, int ordinal);

// "cpu" -> -1, "cuda" -> 0, "cuda:N" -> N (the `--device` flag of the offline commands).
// InvalidArgument for anything else.
absl::StatusOr<int> ParseDeviceFlag(const std::string& value);

}  // namespace tessera::workers
