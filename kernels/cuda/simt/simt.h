// The SIMT emulator: the CUDA kernels of kernels/cuda/*.cu, their own source, run on the host.
//
// The CUDA emulator (kernels/cuda/emu/) computes each kernel's contract in plain C++, which
// checks the executor's host code but not the kernels. This one compiles the .cu files
// themselves with the host compiler (rewrite.cmake turns `k<<<grid, block, shared,
// stream>>>(args)` and `extern __shared__` into the calls below; this header is included
// first, with -include) and runs every launch as CUDA does: a grid of blocks, a block of
// threads, each thread a fiber with its own stack, switched at __syncthreads, __syncwarp and
// warp shuffles. Shared memory is per block, atomics are atomic, and the launch limits a GPU
// enforces (1,024 threads, 48 KiB of dynamic shared memory without opt-in, grid dimensions)
// fail the launch the same way. So a barrier missing, a shuffle only part of a warp reaches,
// an index out of a block's range or a launch a GPU would refuse shows up in tests on
// machines without a GPU.
//
// Fibers run one at a time in a block (blocks run in parallel on host threads), from one
// barrier to the next, in thread order or — SetOrder(kReverse), or TESSERA_SIMT_ORDER=reverse
// — in reverse order: a thread that reads what another writes without a barrier between them
// reads the new value in one order and the old one in the other, so running a test in both
// orders exposes it. Floating-point results differ from a GPU's only where the device's math
// functions (expf, ...) round differently from the host's.
//
// Linked instead of the CUDA runtime, cuBLAS and the device kernels (target
// tessera_cuda_simt); never part of a program users run.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tessera::simt {

// The order fibers run between two barriers.
enum class Order { kForward, kReverse };
void SetOrder(Order order);
Order CurrentOrder();

// Launches counted since the process started (tests check that kernels did run here).
int64_t Launches();

// The calling fiber's coordinates.
const uint3& ThreadIdx();
const uint3& BlockIdx();
const dim3& BlockDim();
const dim3& GridDim();

// __syncthreads: waits until every thread of the block that has not returned arrives.
void SyncThreads();
// __syncwarp: the same for the lanes of this thread's warp (all 32: the kernels pass no mask).
void SyncWarp(unsigned mask);
// __shfl_xor_sync for values of up to 8 bytes: the value of lane (lane ^ lane_mask).
uint64_t ShuffleXor(unsigned mask, uint64_t bits, int lane_mask, int width);
// The block's dynamic shared memory (the launch's third parameter), poisoned with 0xff bytes
// (NaN floats, −1 integers) before the block starts.
void* DynamicShared();

template <typename T>
T* DynamicSharedAs() {
  return static_cast<T*>(DynamicShared());
}

// A grid to run: `block_body` runs once per thread of every block.
struct Launch {
  dim3 grid, block;
  size_t shared_bytes = 0;
  cudaStream_t stream = nullptr;
  const void* kernel = nullptr;  // its dynamic shared memory limit (cudaFuncSetAttribute)
};
// Checks the launch as a GPU would (sets the runtime's last error and runs nothing when it
// fails), then runs the grid now or records it into the graph the stream captures.
void Run(const Launch& launch, std::function<void()> thread_body);

// k<<<grid, block, shared, stream>>>(args) becomes
// k << Config(grid, block, shared, stream) << Args(args): the arguments are converted to the
// kernel's parameter types and copied, as a launch copies them.
struct Config {
  Launch launch;
  Config(dim3 grid, dim3 block, size_t shared_bytes = 0, cudaStream_t stream = nullptr)
      : launch{grid, block, shared_bytes, stream} {}
};

template <typename... A>
struct ArgPack {
  std::tuple<A...> values;
};
template <typename... A>
ArgPack<A&&...> Args(A&&... a) {
  return {std::forward_as_tuple(std::forward<A>(a)...)};
}

template <typename... P>
struct PendingLaunch {
  void (*kernel)(P...);
  Launch launch;

  template <typename... A>
  void operator<<(ArgPack<A...> args) const {
    static_assert(sizeof...(A) == sizeof...(P), "a kernel launch with the wrong argument count");
    auto params = std::apply(
        [](auto&&... a) { return std::tuple<std::decay_t<P>...>(std::forward<decltype(a)>(a)...); },
        std::move(args.values));
    Run(launch, [k = kernel, params]() { std::apply(k, params); });
  }
};

template <typename... P>
PendingLaunch<P...> operator<<(void (*kernel)(P...), const Config& config) {
  PendingLaunch<P...> p{kernel, config.launch};
  p.launch.kernel = reinterpret_cast<const void*>(kernel);
  return p;
}

template <typename T>
T Shuffle(unsigned mask, T v, int lane_mask, int width) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles of up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = ShuffleXor(mask, bits, lane_mask, width);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

}  // namespace tessera::simt

// The CUDA language on the host. The runtime headers above define these for nvcc; here they
// are plain C++.
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __constant__
#undef __launch_bounds__
#undef __forceinline__
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(...)
// Per block: every fiber of a block runs on the same host thread, one block at a time.
#define __shared__ static thread_local

#define threadIdx (::tessera::simt::ThreadIdx())
#define blockIdx (::tessera::simt::BlockIdx())
#define blockDim (::tessera::simt::BlockDim())
#define gridDim (::tessera::simt::GridDim())

inline void __syncthreads() { ::tessera::simt::SyncThreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::tessera::simt::SyncWarp(mask); }
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return ::tessera::simt::Shuffle(mask, v, lane_mask, width);
}

template <typename T, typename U>
T atomicAdd(T* p, U v) {
  return std::atomic_ref<T>(*p).fetch_add(static_cast<T>(v));
}
template <typename T, typename U>
T atomicMin(T* p, U v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (static_cast<T>(v) < old && !a.compare_exchange_weak(old, static_cast<T>(v))) {
  }
  return old;
}
template <typename T, typename U>
T atomicMax(T* p, U v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (old < static_cast<T>(v) && !a.compare_exchange_weak(old, static_cast<T>(v))) {
  }
  return old;
}

// CUDA's integer and float min / max for the device, over the common type of the operands.
template <typename A, typename B>
inline auto min(A a, B b) -> std::common_type_t<A, B> {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(a) : static_cast<C>(b);
}
template <typename A, typename B>
inline auto max(A a, B b) -> std::common_type_t<A, B> {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(b) < static_cast<C>(a) ? static_cast<C>(a) : static_cast<C>(b);
}

// CUDA's math functions in the global namespace.
using std::isfinite;
using std::isinf;
using std::isnan;

inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
