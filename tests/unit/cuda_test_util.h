// Helpers of the GPU kernel tests: a fixture that skips without a device, owning device
// buffers, and dtype conversion of host data.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/util/half.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_types.h"
#include "kernels/cuda/device.h"

namespace tessera::cuda::testing {

// True where the kernels run on the SIMT emulator (kernels/cuda/simt/: thread by thread on the
// host), which keeps the largest shapes smaller.
#ifdef TESSERA_CUDA_SIMT
inline constexpr bool kSimtEmulator = true;
#else
inline constexpr bool kSimtEmulator = false;
#endif

// Every GPU test derives from this: no device, no test (reported as skipped by ctest).
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ListDevices().empty()) GTEST_SKIP() << "no CUDA device visible; this test needs a GPU";
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  }
  void Sync() { ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); }
};

// Device memory freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes) != cudaSuccess) ptr_ = nullptr;
    bytes_ = bytes;
  }
  template <typename T>
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size() * sizeof(T)) {
    if (ptr_) cudaMemcpy(ptr_, host.data(), bytes_, cudaMemcpyHostToDevice);
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  template <typename T>
  std::vector<T> Download(size_t count) const {
    std::vector<T> out(count);
    cudaMemcpy(out.data(), ptr_, count * sizeof(T), cudaMemcpyDeviceToHost);
    return out;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Host floats in `dtype`'s bytes, and back; Round() is the value the device sees.
inline std::vector<uint8_t> Encode(const std::vector<float>& v, DType dtype) {
  std::vector<uint8_t> out(v.size() * DTypeBytes(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = dtype == DType::kF16 ? FloatToFp16(v[i]) : FloatToBf16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}
inline std::vector<float> Decode(const std::vector<uint8_t>& bytes, DType dtype) {
  const size_t n = bytes.size() / DTypeBytes(dtype);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      out[i] = dtype == DType::kF16 ? Fp16ToFloat(h) : Bf16ToFloat(h);
    }
  }
  return out;
}
inline std::vector<float> Round(const std::vector<float>& v, DType dtype) {
  return Decode(Encode(v, dtype), dtype);
}
// n samples of N(0, sd²).
inline std::vector<float> RandomVector(size_t n, std::mt19937_64& rng, float sd = 1.0f) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Relative precision of one rounding to `dtype` (half an ulp at 1).
inline double Epsilon(DType dtype) {
  return dtype == DType::kF32 ? 6e-8 : dtype == DType::kF16 ? 4.9e-4 : 3.9e-3;
}

// |got[i] − want[i]| ≤ Epsilon(dtype)·|want[i]| + 2e-6·max(scale_floor, |want[i]|) + the
// dtype's subnormal rounding (float16: 2^-25, half its smallest spacing; values below 2^-14
// lose relative precision): one rounding of the output plus float32 work, against a float64
// reference. Reports the first five elements out of bounds.
inline void ExpectCloseToFloat64(const float* got, const std::vector<double>& want, DType dtype,
                                 double scale_floor = 1.0) {
  int failures = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double bound = Epsilon(dtype) * std::fabs(want[i]) +
                         2e-6 * std::max(scale_floor, std::fabs(want[i])) +
                         (dtype == DType::kF16 ? 0x1p-25 : 0.0);
    if (!(std::fabs(got[i] - want[i]) <= bound) && failures++ < 5) {
      ADD_FAILURE() << "element " << i << ": gpu " << got[i] << ", float64 " << want[i];
    }
  }
  EXPECT_EQ(failures, 0);
}

}  // namespace tessera::cuda::testing
