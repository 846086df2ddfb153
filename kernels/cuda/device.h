// CUDA device discovery and a minimal kernel used to prove a device works end to end.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  size_t total_memory = 0;
};

// The visible CUDA devices; an empty list (not an error) when there is no driver or GPU.
std::vector<DeviceInfo> ListDevices();

// Computes y = a*x + y on device `device` and copies y back: a whole round trip through
// allocation, transfer and a kernel launch. Errors name the CUDA call that failed.
absl::Status Saxpy(int device, float a, const std::vector<float>& x, std::vector<float>& y);

}  // namespace tessera::cuda
