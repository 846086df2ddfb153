// The SIMT emulator (kernels/cuda/simt/) against what CUDA guarantees: kernels written as for
// nvcc (this file goes through the same rewrite as kernels/cuda/*.cu) whose results follow
// from the CUDA programming guide — barriers order shared-memory accesses, a shuffle reads the
// partner lane's value, atomics count exactly, every (block, thread) runs once, launches a GPU
// refuses fail with its error — and the emulator's own checks (a thread reading without a
// barrier sees a different value in reverse order; deadlocks and lanes missing from a warp
// operation stop the process with a message).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/simt/simt.h"

namespace {

using tessera::simt::Order;

template <typename T>
class Device {
 public:
  explicit Device(size_t n, T fill = T()) : n_(n) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)), cudaSuccess);
    std::vector<T> host(n, fill);
    cudaMemcpy(p_, host.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~Device() { cudaFree(p_); }
  T* get() const { return p_; }
  std::vector<T> Host() const {
    std::vector<T> out(n_);
    cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return out;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

// Restores the forward order after a test that changes it.
class Simt : public ::testing::Test {
 protected:
  void TearDown() override { tessera::simt::SetOrder(Order::kForward); }
};

// Each thread writes its slot, waits, and reads its neighbour's.
__global__ void RotateKernel(const int* in, int* out) {
  __shared__ int s[256];
  s[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}

// The same without the barrier (a data race), in dynamic shared memory.
__global__ void RacyRotateKernel(const int* in, int* out) {
  extern __shared__ int s[];
  s[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}

TEST_F(Simt, BarriersOrderSharedMemoryInEitherOrder) {
  const int blocks = 3, threads = 256;
  std::vector<int> in(blocks * threads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i * 7 + 1);
  for (Order order : {Order::kForward, Order::kReverse}) {
    tessera::simt::SetOrder(order);
    Device<int> din(in.size()), dout(in.size(), -1);
    cudaMemcpy(din.get(), in.data(), in.size() * sizeof(int), cudaMemcpyHostToDevice);
    RotateKernel<<<blocks, threads>>>(din.get(), dout.get());
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    const std::vector<int> out = dout.Host();
    for (int b = 0; b < blocks; ++b) {
      for (int t = 0; t < threads; ++t) {
        ASSERT_EQ(out[b * threads + t], in[b * threads + (t + 1) % threads]) << b << " " << t;
      }
    }
  }
}

TEST_F(Simt, AMissingBarrierReadsDifferentlyInReverseOrder) {
  const int threads = 64;
  std::vector<int> in(threads);
  for (int i = 0; i < threads; ++i) in[i] = 1000 + i;
  std::vector<std::vector<int>> outs;
  for (Order order : {Order::kForward, Order::kReverse}) {
    tessera::simt::SetOrder(order);
    Device<int> din(threads), dout(threads, -1);
    cudaMemcpy(din.get(), in.data(), threads * sizeof(int), cudaMemcpyHostToDevice);
    RacyRotateKernel<<<1, threads, threads * sizeof(int)>>>(din.get(), dout.get());
    outs.push_back(dout.Host());
  }
  // Forward: thread t runs before t + 1 writes, so it reads the poison (−1); in reverse,
  // t + 1 has already written. The last thread reads thread 0's slot, the other way round.
  for (int t = 0; t + 1 < threads; ++t) {
    EXPECT_EQ(outs[0][t], -1) << t;
    EXPECT_EQ(outs[1][t], in[t + 1]) << t;
  }
  EXPECT_EQ(outs[0][threads - 1], in[0]);
  EXPECT_EQ(outs[1][threads - 1], -1);
}

// Butterfly sums with __shfl_xor_sync over segments of `width` lanes.
__global__ void ShuffleKernel(const float* in, float* out, int width) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = in[i];
  for (int o = width / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o, width);
  out[i] = v;
}

TEST_F(Simt, ShufflesExchangeWithinTheirSegment) {
  const int threads = 96;  // three warps
  std::vector<float> in(threads);
  for (int i = 0; i < threads; ++i) in[i] = static_cast<float>(i);  // exact sums in float
  for (int width : {32, 8, 2}) {
    Device<float> din(threads), dout(threads);
    cudaMemcpy(din.get(), in.data(), threads * sizeof(float), cudaMemcpyHostToDevice);
    ShuffleKernel<<<1, threads>>>(din.get(), dout.get(), width);
    const std::vector<float> out = dout.Host();
    for (int i = 0; i < threads; ++i) {
      float want = 0;
      const int seg = i / width * width;
      for (int j = seg; j < seg + width; ++j) want += in[j];
      EXPECT_EQ(out[i], want) << "lane " << i << ", width " << width;
    }
  }
}

// One increment per thread of every block into one counter, and a histogram by block.
__global__ void CountKernel(unsigned long long* total, int* per_block, int* lowest) {
  atomicAdd(total, 1ull);
  atomicAdd(&per_block[blockIdx.x + gridDim.x * blockIdx.y], 1);
  atomicMin(lowest, static_cast<int>(threadIdx.x + 1000 * blockIdx.x));
}

TEST_F(Simt, AtomicsCountEveryThreadOfEveryBlock) {
  const dim3 grid(37, 5), block(128);
  Device<unsigned long long> total(1, 0);
  Device<int> per_block(grid.x * grid.y, 0), lowest(1, 1 << 30);
  CountKernel<<<grid, block>>>(total.get(), per_block.get(), lowest.get());
  EXPECT_EQ(total.Host()[0], 37ull * 5 * 128);
  for (int c : per_block.Host()) EXPECT_EQ(c, 128);
  EXPECT_EQ(lowest.Host()[0], 0);
}

// Each (block, thread) of a 3-D launch records its global id once.
__global__ void CoordinatesKernel(int* hits) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  atomicAdd(&hits[block * blockDim.x * blockDim.y * blockDim.z + thread], 1);
}

TEST_F(Simt, EveryThreadOfA3dGridRunsOnce) {
  const dim3 grid(3, 2, 4), block(5, 3, 2);
  const size_t n = 3 * 2 * 4 * 5 * 3 * 2;
  Device<int> hits(n, 0);
  CoordinatesKernel<<<grid, block>>>(hits.get());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits.Host()[i], 1) << i;
}

__global__ void ReadSharedKernel(float* out) {
  extern __shared__ float dynamic[];
  out[threadIdx.x] = dynamic[threadIdx.x];
}

TEST_F(Simt, DynamicSharedMemoryStartsPoisoned) {
  Device<float> out(32, 0.0f);
  ReadSharedKernel<<<1, 32, 32 * sizeof(float)>>>(out.get());
  for (float v : out.Host()) EXPECT_TRUE(std::isnan(v));
}

__global__ void MarkKernel(int* flag) { *flag = 1; }

TEST_F(Simt, LaunchesAGpuRefusesFailAndRunNothing) {
  struct Bad {
    dim3 grid, block;
    size_t shared;
    cudaError_t error;
  };
  for (const Bad& bad : {Bad{dim3(1), dim3(1025), 0, cudaErrorInvalidConfiguration},
                         Bad{dim3(1), dim3(32, 32, 2), 0, cudaErrorInvalidConfiguration},
                         Bad{dim3(0), dim3(32), 0, cudaErrorInvalidConfiguration},
                         Bad{dim3(1, 65536), dim3(32), 0, cudaErrorInvalidConfiguration},
                         Bad{dim3(1), dim3(32), (48 << 10) + 4, cudaErrorInvalidValue}}) {
    Device<int> flag(1, 0);
    const int64_t before = tessera::simt::Launches();
    MarkKernel<<<bad.grid, bad.block, bad.shared>>>(flag.get());
    EXPECT_EQ(cudaGetLastError(), bad.error);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the error is cleared once read";
    EXPECT_EQ(flag.Host()[0], 0);
    EXPECT_EQ(tessera::simt::Launches(), before);
  }
  // The limits themselves are allowed.
  Device<int> flag(1, 0);
  MarkKernel<<<dim3(1, 65535), 1>>>(flag.get());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  MarkKernel<<<1, dim3(16, 2, 32), 48 << 10>>>(flag.get());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(flag.Host()[0], 1);
}

// Writes the last float of its dynamic shared memory and reads it back.
__global__ void LastSharedFloatKernel(float* out, int floats) {
  extern __shared__ __align__(128) float big[];
  big[floats - 1] = 7.0f;
  __syncthreads();
  *out = big[floats - 1];
}

// Above 48 KiB a kernel needs cudaFuncAttributeMaxDynamicSharedMemorySize raised first (up to
// the device's opt-in maximum, sharedMemPerBlockOptin), as on a GPU; the raise is per kernel.
TEST_F(Simt, SharedMemoryAbove48KiBNeedsTheOptIn) {
  const int floats = 100 << 8;  // 100 KiB
  Device<float> out(1, 0.0f);
  LastSharedFloatKernel<<<1, 32, floats * sizeof(float)>>>(out.get(), floats);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  int optin = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0),
            cudaSuccess);
  EXPECT_EQ(static_cast<size_t>(optin), prop.sharedMemPerBlockOptin);
  EXPECT_EQ(cudaFuncSetAttribute(reinterpret_cast<const void*>(&LastSharedFloatKernel),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, optin + 1),
            cudaErrorInvalidValue);
  cudaGetLastError();
  ASSERT_EQ(
      cudaFuncSetAttribute(reinterpret_cast<const void*>(&LastSharedFloatKernel),
                           cudaFuncAttributeMaxDynamicSharedMemorySize, floats * sizeof(float)),
      cudaSuccess);
  LastSharedFloatKernel<<<1, 32, floats * sizeof(float)>>>(out.get(), floats);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.Host()[0], 7.0f);
  // Another kernel keeps the 48 KiB limit.
  ReadSharedKernel<<<1, 32, floats * sizeof(float)>>>(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
}

TEST_F(Simt, CapturedLaunchesRunWhenTheGraphDoes) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  Device<int> flag(1, 0);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  MarkKernel<<<1, 1, 0, stream>>>(flag.get());
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(flag.Host()[0], 0) << "captured, not run";
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(flag.Host()[0], 1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Lane 0 waits for the block while the rest of its warp waits for the warp.
__global__ void DeadlockKernel(float* out) {
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    __syncwarp();
  }
  out[threadIdx.x] = 1.0f;
}

// Half the warp returns before the other half shuffles.
__global__ void HalfWarpShuffleKernel(float* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

TEST_F(Simt, DeadlocksAndPartialWarpsStopWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Device<float> out(32);
        DeadlockKernel<<<1, 32>>>(out.get());
      },
      "deadlock: .*thread \\(0,0,0\\) at __syncthreads");
  EXPECT_DEATH(
      {
        Device<float> out(32);
        HalfWarpShuffleKernel<<<1, 32>>>(out.get());
      },
      "returned while its warp waits");
}

TEST_F(Simt, DeviceFunctionsOutsideAKernelStopWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(__syncthreads(), "outside a kernel");
}

}  // namespace
