// Builds without the CUDA toolkit: the GPU forward pass does not exist, and asking for it is
// an error that says so.
#include "absl/status/status.h"
#include "worker/executor/cuda_forward.h"

namespace tessera::executor {

struct CudaForward::State {};

CudaForward::CudaForward(std::unique_ptr<State> state) : state_(std::move(state)) {}
CudaForward::~CudaForward() = default;

absl::StatusOr<std::unique_ptr<CudaForward>> CudaForward::Create(Executor::Impl&, int*) {
  return absl::FailedPreconditionError(
      "this build has no CUDA backend (CMake found no CUDA toolkit, or TESSERA_CUDA=OFF): "
      "run on CPU, or rebuild where nvcc is installed");
}

absl::StatusOr<std::vector<std::vector<float>>> CudaForward::Step(const Batch&,
                                                                  std::vector<SampledToken>*) {
  return absl::FailedPreconditionError("this build has no CUDA backend");
}

absl::Status CudaForward::BroadcastHost(void*, size_t, comm::Communicator*) {
  return absl::FailedPreconditionError("this build has no CUDA backend");
}

std::string CudaForward::device_name() const { return "cpu"; }

}  // namespace tessera::executor
