#include <climits>

#include "common/model/constants.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/launcher_checks.h"
#include "kernels/cuda/selection_kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kTokensPerBlock = 4;  // MoeRoutingLaunch: one warp per token

// The best (value, index) over the warp: higher value, then lower index.
__device__ void WarpArgMax(float* v, int* idx) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, *v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, *idx, o);
    if (ov > *v || (ov == *v && oi < *idx)) {
      *v = ov;
      *idx = oi;
    }
  }
}

// Lane-strided argmax over values[0..n).
__device__ int ArgMax(const float* values, int n) {
  const int lane = threadIdx.x % kWarpSize;
  float best = -INFINITY;
  int at = INT_MAX;
  for (int i = lane; i < n; i += kWarpSize) {
    if (values[i] > best || (values[i] == best && i < at)) {
      best = values[i];
      at = i;
    }
  }
  WarpArgMax(&best, &at);
  return at;
}

__global__ void __launch_bounds__(kTokensPerBlock* kWarpSize) MoeRouteKernel(MoeRoutingArgs a) {
  __shared__ float probs[kTokensPerBlock][kMoeMaxExperts];
  __shared__ float scores[kTokensPerBlock][kMoeMaxExperts];
  __shared__ float group_scores[kTokensPerBlock][kMoeMaxExperts / 2];
  const float kNaN = __int_as_float(0x7fffffff);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kTokensPerBlock + warp;
  if (t >= a.tokens) return;
  const int E = a.experts;
  const float* z = a.logits + t * E;
  float* p = probs[warp];
  float* q = scores[warp];

  // 2. probabilities.
  if (a.gating == MoeGating::kSoftmax) {
    float m = -INFINITY;
    for (int e = lane; e < E; e += kWarpSize) m = fmaxf(m, z[e]);
    m = device::WarpMax(m);
    float sum = 0.0f;
    for (int e = lane; e < E; e += kWarpSize) sum += expf(z[e] - m);
    sum = device::WarpSum(sum);
    for (int e = lane; e < E; e += kWarpSize) p[e] = expf(z[e] - m) / sum;
  } else {
    for (int e = lane; e < E; e += kWarpSize) p[e] = 1.0f / (1.0f + expf(-z[e]));
  }
  // 3. selection scores (the bias chooses, never weighs).
  for (int e = lane; e < E; e += kWarpSize) q[e] = p[e] + (a.bias ? a.bias[e] : 0.0f);
  __syncwarp();

  // 4. group-limited selection: keep the topk_groups groups with the best top-2 sums.
  if (a.groups > 1) {
    const int size = E / a.groups;
    float* g = group_scores[warp];
    for (int gi = lane; gi < a.groups; gi += kWarpSize) {
      float best = -INFINITY, second = -INFINITY;
      for (int e = gi * size; e < (gi + 1) * size; ++e) {
        if (q[e] > best) {
          second = best;
          best = q[e];
        } else if (q[e] > second) {
          second = q[e];
        }
      }
      g[gi] = best + second;
    }
    __syncwarp();
    // Chosen groups become NaN, which the argmax never picks again (NaN is neither greater
    // nor equal); what is NaN at the end was kept.
    for (int r = 0; r < a.topk_groups; ++r) {
      const int gi = ArgMax(g, a.groups);
      if (gi >= a.groups) break;  // every group score NaN (NaN logits): none left to keep
      __syncwarp();
      if (lane == 0) g[gi] = kNaN;
      __syncwarp();
    }
    for (int e = lane; e < E; e += kWarpSize) {
      if (!isnan(g[e / size])) q[e] = -INFINITY;
    }
    __syncwarp();
  }

  // 5-6. top-k by selection score; weights are the unbiased probabilities.
  float weight_of_lane = 0.0f;  // lane j holds selection j's weight
  float sum = 0.0f;
  for (int j = 0; j < a.used; ++j) {
    const int e = ArgMax(q, E);
    // Every score NaN (NaN logits): no expert, id -1 (the grouped products give zeros).
    const bool none = e >= E;
    const float w = none ? 0.0f : p[e];
    __syncwarp();
    if (lane == 0) {
      a.ids[t * a.used + j] = none ? -1 : e;
      if (!none) q[e] = kNaN;  // out of the running
    }
    __syncwarp();
    if (lane == j) weight_of_lane = w;
    sum += w;
  }
  // 7-8. normalization and scaling.
  if (a.norm_weights)
    weight_of_lane /= fmaxf(sum, static_cast<float>(model::kExpertWeightSumFloor));
  if (a.weights_scale != 0.0f && a.weights_scale != 1.0f) weight_of_lane *= a.weights_scale;
  if (lane < a.used) a.weights[t * a.used + lane] = weight_of_lane;
}

}  // namespace

absl::Status MoeRoute(const MoeRoutingArgs& a, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckMoeRoute(a);
  if (!c.ok()) return c.status();
  MoeRouteKernel<<<static_cast<unsigned>(c->grid_x), c->block, 0, stream>>>(a);
  return LaunchStatus("moe routing");
}

}  // namespace tessera::cuda
