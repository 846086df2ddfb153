#include "controller/workers/gpu_plan.h"

#include <limits>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tessera::workers {

absl::StatusOr<std::vector<int>> PickGpus(const std::vector<std::string>& requested, int n_visible,
                                          int tp) {
  const std::string visible = n_visible <= 0 ? "no GPU is visible"
                              : n_visible == 1
                                  ? "1 GPU is visible: 0"
                                  : absl::StrCat(n_visible, " GPUs are visible: 0-", n_visible - 1);
  if (requested.empty()) {
    if (n_visible < tp) {
      return absl::InvalidArgumentError(
          absl::StrCat("tp is ", tp, " but only ", n_visible,
                       " GPU(s) are visible; lower --tp, or run on CPU with --cpu-workers ", tp));
    }
    return ConsecutiveGpus(0, tp);
  }
  std::vector<int> gpus;
  std::set<int> seen;
  for (const std::string& id : requested) {
    int gpu = -1;
    if (!absl::SimpleAtoi(id, &gpu) || gpu < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("gpus: '", id, "' is not a CUDA device number (0, 1, ...)"));
    }
    if (!seen.insert(gpu).second) {
      return absl::InvalidArgumentError(absl::StrCat("gpus: device ", gpu, " is listed twice"));
    }
    if (gpu >= n_visible) {
      return absl::InvalidArgumentError(
          absl::StrCat("gpus: device ", gpu, " does not exist (", visible, ")"));
    }
    gpus.push_back(gpu);
  }
  if (static_cast<int>(gpus.size()) < tp) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpus lists ", gpus.size(), " device(s) but tp is ", tp));
  }
  gpus.resize(tp);
  return gpus;
}

absl::StatusOr<Placement> PlaceRanks(const PlacementInputs& in) {
  Placement p;
  if (in.cpu_workers) return p;
  if (!in.build_has_cuda) {
    if (!in.gpus.empty()) {
      p.warnings.push_back(
          "--gpus is set but this build has no CUDA backend; each rank runs on CPU cores");
    }
    return p;
  }
  absl::StatusOr<std::vector<int>> gpus;
  if (in.external_workers) {
    // The devices are on the workers' hosts: only the list itself can be checked here.
    if (in.gpus.empty()) return p;
    gpus = PickGpus(in.gpus, std::numeric_limits<int>::max(), in.tp);
  } else {
    if (in.n_visible <= 0) {
      if (!in.gpus.empty()) {
        p.warnings.push_back(
            "--gpus is set but no CUDA device is visible; each rank runs on CPU cores");
      }
      return p;
    }
    gpus = PickGpus(in.gpus, in.n_visible, in.tp);
  }
  if (!gpus.ok()) return gpus.status();
  p.gpus = *std::move(gpus);
  p.comm_backend = GpuCommBackend(in.tp, in.build_has_nccl, &p.warnings);
  return p;
}

std::string GpuCommBackend(int tp, bool build_has_nccl, std::vector<std::string>* warnings) {
  if (tp <= 1) return "gloo";  // a group of one calls no collective
  if (build_has_nccl) return "nccl";
  warnings->push_back(absl::StrCat("this build has no NCCL: the ", tp,
                                   " GPU workers all-reduce over Gloo through host memory "
                                   "(slower)"));
  return "gloo";
}

std::vector<int> ConsecutiveGpus(int first, int tp) {
  std::vector<int> gpus;
  for (int r = 0; r < tp; ++r) gpus.push_back(first + r);
  return gpus;
}

std::string ChildCudaVisibleDevices(const char* parent, int ordinal) {
  if (parent != nullptr && *parent != '\0') {
    std::vector<std::string> entries = absl::StrSplit(parent, ',');
    if (ordinal >= 0 && ordinal < static_cast<int>(entries.size())) {
      return std::string(absl::StripAsciiWhitespace(entries[ordinal]));
    }
  }
  return std::to_string(ordinal);
}

absl::StatusOr<int> ParseDeviceFlag(const std::string& value) {
  if (value == "cpu") return -1;
  if (value == "cuda") return 0;
  absl::string_view rest(value);
  int gpu = -1;
  if (absl::ConsumePrefix(&rest, "cuda:") && absl::SimpleAtoi(rest, &gpu) && gpu >= 0) {
    return gpu;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", value, "' is not cpu, cuda or cuda:N (a CUDA device number)"));
}

}  // namespace tessera::workers
