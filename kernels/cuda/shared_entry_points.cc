// Host entry points that queue no kernel of their own, and so are the same on the GPU and in
// the CUDA emulator (whose fake runtime provides cudaGetLastError and cudaGetErrorString):
// built into both tessera_cuda and tessera_cuda_emu.
#include <map>
#include <mutex>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_types.h"
#include "kernels/cuda/glue_kernels.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/nn_kernels.h"

namespace tessera::cuda {

absl::Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::InternalError(absl::StrCat("cuda ", what, ": ", cudaGetErrorString(error)));
}

namespace {

DeviceLimits QueryDeviceLimits(int device) {
  DeviceLimits limits;
  auto get = [&](cudaDeviceAttr attr, auto* out) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, attr, device) == cudaSuccess && v > 0) {
      *out = static_cast<std::remove_pointer_t<decltype(out)>>(v);
    } else {
      cudaGetLastError();
    }
  };
  get(cudaDevAttrMaxThreadsPerBlock, &limits.max_threads_per_block);
  get(cudaDevAttrMaxSharedMemoryPerBlock, &limits.max_shared_bytes);
  get(cudaDevAttrMaxSharedMemoryPerBlockOptin, &limits.max_shared_optin);
  get(cudaDevAttrMaxGridDimX, &limits.max_grid_x);
  get(cudaDevAttrMaxGridDimY, &limits.max_grid_y);
  get(cudaDevAttrMultiProcessorCount, &limits.multiprocessors);
  return limits;
}

}  // namespace

DeviceLimits CurrentDeviceLimits() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return DeviceLimits{};
  }
  // A device's attributes do not change while the process runs: read once per device.
  static std::mutex mutex;
  static auto* known = new std::map<int, DeviceLimits>;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known->find(device);
  if (it == known->end()) it = known->emplace(device, QueryDeviceLimits(device)).first;
  return it->second;
}

absl::Status RmsNorm(const void* x, const float* w, int64_t rows, int64_t n, float eps, DType dtype,
                     void* y, cudaStream_t stream) {
  // Contiguous rows are the strided kernel's stride == n case (one kernel for both).
  absl::StatusOr<LaunchConfig> c = RowLaunch("rmsnorm", rows, n);
  if (!c.ok()) return c.status();
  return RmsNormStrided(x, n, w, rows, n, eps, dtype, y, n, stream);
}

}  // namespace tessera::cuda
