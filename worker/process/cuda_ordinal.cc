#include "worker/process/cuda_ordinal.h"

#include <cstring>

namespace tessera::worker {

int CudaOrdinal(const char* cuda_visible_devices, int setup_gpu) {
  const bool one_device = cuda_visible_devices != nullptr && *cuda_visible_devices != '\0' &&
                          std::strchr(cuda_visible_devices, ',') == nullptr;
  return one_device ? 0 : setup_gpu;
}

}  // namespace tessera::worker
