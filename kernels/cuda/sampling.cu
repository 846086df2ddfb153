#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cfloat>

#include "kernels/cuda/kernel_checks.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/radix_select.cuh"
#include "kernels/cuda/selection_kernels.h"

namespace tessera::cuda {
namespace {

// NaN counts as −inf and +inf as the largest float, as in worker/sampling.
__device__ __forceinline__ float Clean(float v) {
  if (isnan(v)) return -INFINITY;
  return v == INFINITY ? FLT_MAX : v;
}

struct ArgMaxPair {
  float v;
  int i;
};
struct ArgMaxOp {
  __device__ ArgMaxPair operator()(const ArgMaxPair& a, const ArgMaxPair& b) const {
    return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
  }
};

struct SamplingStorage {
  device::RadixSelectStorage<kSamplingThreads> select;
  union {
    typename cub::BlockReduce<ArgMaxPair, kSamplingThreads>::TempStorage argmax;
    typename cub::BlockReduce<double, kSamplingThreads>::TempStorage sum;
    typename cub::BlockScan<double, kSamplingThreads>::TempStorage scan;
  };
  ArgMaxPair best;
  double total;
  double carry;
  int token;
  int last;
};

// The survivors of top-k and top-p: key above the cut, or at it and not after its tie cut.
struct Cut {
  uint32_t threshold = 0;
  int tie_cut = INT_MAX;  // INT_MAX with threshold 0: everything passes
  __device__ bool Pass(const float* x, int i) const {
    const uint32_t key = device::OrderKey(x[i]);  // the keys RadixSelect ranked
    return key > threshold || (key == threshold && i <= tie_cut);
  }
};

__global__ void __launch_bounds__(kSamplingThreads)
    SampleKernel(const float* logits, int vocab, const GpuSamplingParams* params, int32_t* tokens) {
  __shared__ SamplingStorage s;
  const float* x = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const GpuSamplingParams p = params[blockIdx.x];

  // The best token (max logit, lowest id): greedy's answer, and top-p/min-p's reference.
  ArgMaxPair mine{-INFINITY, INT_MAX};
  for (int i = threadIdx.x; i < vocab; i += kSamplingThreads) {
    mine = ArgMaxOp()(mine, ArgMaxPair{Clean(x[i]), i});
  }
  const ArgMaxPair best =
      cub::BlockReduce<ArgMaxPair, kSamplingThreads>(s.argmax).Reduce(mine, ArgMaxOp());
  if (threadIdx.x == 0) s.best = best;
  __syncthreads();
  const float max = s.best.v;
  if (p.temperature < 1e-5f || max == -INFINITY) {
    if (threadIdx.x == 0) tokens[blockIdx.x] = s.best.i == INT_MAX ? 0 : s.best.i;
    return;
  }
  // Radix selection reads raw logits; Clean() is folded into the keys by OrderKey's NaN rule
  // (NaN lowest) and +inf ranks above every finite value already.
  Cut top_k;
  if (p.top_k > 0 && p.top_k < vocab) {
    auto all = [](int) { return true; };
    auto unit = [](int) { return 1.0; };
    double above = 0.0;
    device::RadixSelect<kSamplingThreads>(vocab, x, all, unit, p.top_k, s.select, &top_k.threshold,
                                          &above);
    top_k.tie_cut = device::TieCut<kSamplingThreads>(vocab, x, all, unit, top_k.threshold,
                                                     p.top_k - above, s.select);
  }
  // Top-p over the top-k survivors, at temperature 1.
  Cut top_p;
  if (p.top_p < 1.0f) {
    auto in_k = [&](int i) { return top_k.Pass(x, i); };
    auto w1 = [&](int i) { return static_cast<double>(expf(Clean(x[i]) - max)); };
    double z = 0.0;
    for (int i = threadIdx.x; i < vocab; i += kSamplingThreads) z += in_k(i) ? w1(i) : 0.0;
    z = cub::BlockReduce<double, kSamplingThreads>(s.sum).Sum(z);
    if (threadIdx.x == 0) s.total = z;
    __syncthreads();
    const double target = static_cast<double>(p.top_p) * s.total;
    double above = 0.0;
    device::RadixSelect<kSamplingThreads>(vocab, x, in_k, w1, target, s.select, &top_p.threshold,
                                          &above);
    top_p.tie_cut = device::TieCut<kSamplingThreads>(vocab, x, in_k, w1, top_p.threshold,
                                                     target - above, s.select);
  }
  auto survives = [&](int i) {
    return top_k.Pass(x, i) && top_p.Pass(x, i) &&
           (p.min_p <= 0.0f || expf(Clean(x[i]) - max) >= p.min_p);
  };
  // Weights at the temperature, and the draw in token-id order.
  const float inv_t = 1.0f / p.temperature;
  auto weight = [&](int i) {
    return survives(i) ? static_cast<double>(expf((Clean(x[i]) - max) * inv_t)) : 0.0;
  };
  double total = 0.0;
  for (int i = threadIdx.x; i < vocab; i += kSamplingThreads) total += weight(i);
  __syncthreads();
  total = cub::BlockReduce<double, kSamplingThreads>(s.sum).Sum(total);
  if (threadIdx.x == 0) {
    s.total = total;
    s.carry = 0.0;
    s.token = INT_MAX;
    s.last = s.best.i;
  }
  __syncthreads();
  const double target = p.uniform * s.total;
  for (int base = 0; base < vocab; base += kSamplingThreads) {
    const int i = base + threadIdx.x;
    const double w = i < vocab ? weight(i) : 0.0;
    double inclusive, chunk;
    cub::BlockScan<double, kSamplingThreads>(s.scan).InclusiveSum(w, inclusive, chunk);
    if (w > 0.0 && s.carry + inclusive > target) atomicMin(&s.token, i);
    if (w > 0.0) atomicMax(&s.last, i);
    __syncthreads();
    const int token = s.token;
    const double carry = s.carry + chunk;
    __syncthreads();
    if (token != INT_MAX) {
      if (threadIdx.x == 0) tokens[blockIdx.x] = token;
      return;
    }
    if (threadIdx.x == 0) s.carry = carry;
  }
  // Rounding left u·total unreached: the last survivor.
  if (threadIdx.x == 0) tokens[blockIdx.x] = s.last;
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__global__ void __launch_bounds__(kSamplingThreads)
    ChosenLogprobKernel(const float* logits, int vocab, const int32_t* tokens, float* logprobs) {
  __shared__ union {
    typename cub::BlockReduce<float, kSamplingThreads>::TempStorage max;
    typename cub::BlockReduce<double, kSamplingThreads>::TempStorage sum;
  } s;
  __shared__ float row_max;
  const float* x = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float mine = -INFINITY;
  for (int i = threadIdx.x; i < vocab; i += kSamplingThreads) mine = fmaxf(mine, Clean(x[i]));
  const float max = cub::BlockReduce<float, kSamplingThreads>(s.max).Reduce(mine, MaxOp());
  if (threadIdx.x == 0) row_max = max;
  __syncthreads();
  const float m = row_max;
  double z = 0.0;
  for (int i = threadIdx.x; i < vocab; i += kSamplingThreads) {
    z += static_cast<double>(expf(Clean(x[i]) - m));
  }
  z = cub::BlockReduce<double, kSamplingThreads>(s.sum).Sum(z);
  if (threadIdx.x == 0) {
    const int t = tokens[blockIdx.x];
    logprobs[blockIdx.x] = t < 0 || t >= vocab
                               ? NAN
                               : static_cast<float>(static_cast<double>(Clean(x[t]) - m) - log(z));
  }
}

}  // namespace

absl::Status ChosenLogprobs(const float* logits, int64_t sequences, int64_t vocab,
                            const int32_t* tokens, float* logprobs, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckSample(sequences, vocab, logits, logprobs, tokens);
  if (!c.ok()) return c.status();
  ChosenLogprobKernel<<<static_cast<unsigned>(c->grid_x), kSamplingThreads, 0, stream>>>(
      logits, static_cast<int>(vocab), tokens, logprobs);
  return LaunchStatus("chosen logprobs");
}

absl::Status Sample(const float* logits, int64_t sequences, int64_t vocab,
                    const GpuSamplingParams* params, int32_t* tokens, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckSample(sequences, vocab, logits, params, tokens);
  if (!c.ok()) return c.status();
  SampleKernel<<<static_cast<unsigned>(c->grid_x), kSamplingThreads, 0, stream>>>(
      logits, static_cast<int>(vocab), params, tokens);
  return LaunchStatus("sampling");
}

}  // namespace tessera::cuda
