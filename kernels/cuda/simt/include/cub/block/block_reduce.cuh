// cub::BlockReduce for the SIMT emulator (kernels/cuda/simt/simt.h): the interface the kernels
// use, with cub's contract — every thread of the block calls it, the result is thread 0's
// only, and the storage may be reused after a __syncthreads. Reduces in thread order.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/simt/simt.h"

namespace cub {

template <typename T, int kThreads>
class BlockReduce {
 public:
  struct TempStorage {
    T values[kThreads];
  };

  explicit BlockReduce(TempStorage& storage) : s_(storage) {}

  template <typename Op>
  T Reduce(T v, Op op) {
    const int i = Linear();
    s_.values[i] = v;
    __syncthreads();
    if (i != 0) return v;  // cub: "the aggregate is returned only to thread 0"
    T acc = s_.values[0];
    for (int j = 1; j < kThreads; ++j) acc = op(acc, s_.values[j]);
    return acc;
  }

  T Sum(T v) {
    return Reduce(v, [](const T& a, const T& b) { return a + b; });
  }

 private:
  static int Linear() {
    if (static_cast<int>(blockDim.x * blockDim.y * blockDim.z) != kThreads) {
      std::fprintf(stderr, "simt: cub::BlockReduce<%d threads> in a block of %u\n", kThreads,
                   blockDim.x * blockDim.y * blockDim.z);
      std::abort();
    }
    return static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  }
  TempStorage& s_;
};

}  // namespace cub
