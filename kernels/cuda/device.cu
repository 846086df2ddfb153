#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/device.h"

namespace tessera::cuda {
namespace {

__global__ void SaxpyKernel(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

absl::Status Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

}  // namespace

std::vector<DeviceInfo> ListDevices() {
  std::vector<DeviceInfo> out;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return out;
  }
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out.push_back({i, p.name, p.major, p.minor, p.totalGlobalMem});
  }
  return out;
}

absl::Status Saxpy(int device, float a, const std::vector<float>& x, std::vector<float>& y) {
  if (x.size() != y.size()) return absl::InvalidArgumentError("saxpy: x and y differ in size");
  if (x.empty()) return absl::OkStatus();  // a grid of zero blocks is a launch error
  const int n = static_cast<int>(x.size());
  const size_t bytes = x.size() * sizeof(float);
  // Device buffers are freed on every path.
  struct Buffers {
    float* x = nullptr;
    float* y = nullptr;
    ~Buffers() {
      if (x) cudaFree(x);
      if (y) cudaFree(y);
    }
  } d;
  if (auto s = Check(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) return s;
  if (auto s = Check(cudaMalloc(&d.x, bytes), "cudaMalloc x"); !s.ok()) return s;
  if (auto s = Check(cudaMalloc(&d.y, bytes), "cudaMalloc y"); !s.ok()) return s;
  if (auto s = Check(cudaMemcpy(d.x, x.data(), bytes, cudaMemcpyHostToDevice), "copy x"); !s.ok()) {
    return s;
  }
  if (auto s = Check(cudaMemcpy(d.y, y.data(), bytes, cudaMemcpyHostToDevice), "copy y"); !s.ok()) {
    return s;
  }
  SaxpyKernel<<<(n + 255) / 256, 256>>>(n, a, d.x, d.y);
  if (auto s = Check(cudaGetLastError(), "saxpy launch"); !s.ok()) return s;
  return Check(cudaMemcpy(y.data(), d.y, bytes, cudaMemcpyDeviceToHost), "copy y back");
}

}  // namespace tessera::cuda
