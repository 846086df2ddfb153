// Block-wide selection by radix on float keys, shared by top-k (DSA indexer) and sampling.
//
// Floats map to unsigned keys that order like the floats (NaN lowest). A weighted radix
// select finds the key T at which the best-first cumulative weight reaches a target:
// W(key > T) < target ≤ W(key ≥ T) — with unit weights, T is the k-th largest key; with
// probabilities, it is top-p's cut. Ties at T are then taken in ascending index order, so
// the selection is deterministic.
#pragma once

#include <cub/block/block_scan.cuh>

#include <climits>
#include <cstdint>

namespace tessera::cuda::device {

__device__ __forceinline__ uint32_t OrderKey(float f) {
  if (isnan(f)) return 0;
  const uint32_t u = __float_as_uint(f + 0.0f);  // −0 becomes +0: they compare equal
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

template <int kThreads>
struct RadixSelectStorage {
  double hist[256];
  uint32_t prefix;
  double above;
  int cut;
  int last;
  double carry;
  typename cub::BlockScan<double, kThreads>::TempStorage scan;
};

// Finds T (see above) among the elements i < n with valid(i), weighing each by weight(i).
// Every thread returns T and W(key > T). When rounding leaves the target unreached, T is the
// smallest key present (everything is kept).
template <int kThreads, typename Valid, typename Weight>
__device__ void RadixSelect(int n, const float* x, Valid valid, Weight weight, double target,
                            RadixSelectStorage<kThreads>& s, uint32_t* threshold, double* above) {
  uint32_t prefix = 0, mask = 0;
  double acc = 0.0;  // W(key above the current prefix range)
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int d = threadIdx.x; d < 256; d += kThreads) s.hist[d] = 0.0;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += kThreads) {
      if (!valid(i)) continue;
      const uint32_t key = OrderKey(x[i]);
      if ((key & mask) == prefix) atomicAdd(&s.hist[(key >> shift) & 0xFF], weight(i));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int chosen = -1, lowest = -1;
      double cum = acc;
      for (int d = 255; d >= 0; --d) {
        if (s.hist[d] > 0.0) lowest = d;
        if (s.hist[d] > 0.0 && cum + s.hist[d] >= target) {
          chosen = d;
          break;
        }
        cum += s.hist[d];
      }
      if (chosen < 0) {  // target not reached (rounding): keep down to the smallest digit
        chosen = lowest < 0 ? 0 : lowest;
        cum = acc;
        for (int d = 255; d > chosen; --d) cum += s.hist[d];
      }
      s.prefix = prefix | (static_cast<uint32_t>(chosen) << shift);
      s.above = cum;
    }
    __syncthreads();
    prefix = s.prefix;
    acc = s.above;
    mask |= 0xFFu << shift;
    __syncthreads();
  }
  *threshold = prefix;
  *above = acc;
}

// The index of the tie (key == T, valid) at which the running weight of ties in index
// order first reaches `need` (> 0); the last tie when it never does; −1 without ties.
template <int kThreads, typename Valid, typename Weight>
__device__ int TieCut(int n, const float* x, Valid valid, Weight weight, uint32_t threshold,
                      double need, RadixSelectStorage<kThreads>& s) {
  using Scan = cub::BlockScan<double, kThreads>;
  if (threadIdx.x == 0) {
    s.last = -1;
    s.carry = 0.0;
  }
  for (int base = 0; base < n; base += kThreads) {
    if (threadIdx.x == 0) s.cut = INT_MAX;
    __syncthreads();
    const int i = base + threadIdx.x;
    const bool tie = i < n && valid(i) && OrderKey(x[i]) == threshold;
    const double w = tie ? weight(i) : 0.0;
    double inclusive, total;
    Scan(s.scan).InclusiveSum(w, inclusive, total);
    // Running sums grow with the index, so the smallest qualifying index is the cut.
    if (tie && s.carry + inclusive >= need) atomicMin(&s.cut, i);
    if (tie) atomicMax(&s.last, i);
    __syncthreads();
    const int cut = s.cut;
    const double carry = s.carry + total;
    __syncthreads();  // everyone has read s.cut and s.carry before they change
    if (cut != INT_MAX) return cut;
    if (threadIdx.x == 0) s.carry = carry;
  }
  __syncthreads();
  return s.last;
}

}  // namespace tessera::cuda::device
