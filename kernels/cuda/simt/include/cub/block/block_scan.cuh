// cub::BlockScan for the SIMT emulator (kernels/cuda/simt/simt.h): inclusive and exclusive
// sums with the block's total in every thread, cub's contract (every thread calls it; the
// storage may be reused after a __syncthreads). Sums in thread order.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/simt/simt.h"

namespace cub {

template <typename T, int kThreads>
class BlockScan {
 public:
  struct TempStorage {
    T values[kThreads];
    T prefix[kThreads + 1];  // prefix[i]: the sum of values[0 .. i)
  };

  explicit BlockScan(TempStorage& storage) : s_(storage) {}

  void InclusiveSum(T in, T& out, T& aggregate) {
    const int i = Scan(in, aggregate);
    out = s_.prefix[i + 1];
  }
  void InclusiveSum(T in, T& out) {
    T aggregate;
    InclusiveSum(in, out, aggregate);
  }
  void ExclusiveSum(T in, T& out, T& aggregate) {
    const int i = Scan(in, aggregate);
    out = s_.prefix[i];
  }
  void ExclusiveSum(T in, T& out) {
    T aggregate;
    ExclusiveSum(in, out, aggregate);
  }

 private:
  int Scan(T in, T& aggregate) {
    if (static_cast<int>(blockDim.x * blockDim.y * blockDim.z) != kThreads) {
      std::fprintf(stderr, "simt: cub::BlockScan<%d threads> in a block of %u\n", kThreads,
                   blockDim.x * blockDim.y * blockDim.z);
      std::abort();
    }
    const int i =
        static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
    s_.values[i] = in;
    __syncthreads();
    if (i == 0) {
      s_.prefix[0] = T();
      for (int j = 0; j < kThreads; ++j) s_.prefix[j + 1] = s_.prefix[j] + s_.values[j];
    }
    __syncthreads();
    aggregate = s_.prefix[kThreads];
    return i;
  }
  TempStorage& s_;
};

}  // namespace cub
