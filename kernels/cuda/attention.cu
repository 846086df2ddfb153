#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/launcher_checks.h"

namespace tessera::cuda {
namespace {

// One block per (query, head), kAttentionWarps warps. Each warp walks every
// kAttentionWarps-th key with an online softmax (running max m, sum l, output acc); lane l
// owns dimensions l + 32·j, j < kPerLane. The warps then merge their (m, l, acc) in shared
// memory: o = Σ_w acc_w e^{m_w − M} / Σ_w l_w e^{m_w − M}.
template <typename T, int kPerLane>
__global__ void __launch_bounds__(kAttentionWarps* kWarpSize)
    PagedAttentionKernel(PagedAttentionArgs a) {
  extern __shared__ float merge[];  // per warp: m, l, acc[kPerLane · 32]
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t qi = blockIdx.x;
  const int h = blockIdx.y;
  const int kv_head =
      a.group > 0 ? (a.head0 + h) / a.group - a.head0 / a.group : h / (a.heads / a.kv_heads);
  const T* q = static_cast<const T*>(a.q) + qi * a.q_token_stride + static_cast<int64_t>(h) * a.d_k;
  float qv[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int d = lane + kWarpSize * j;
    qv[j] = d < a.d_k ? device::ToFloat(q[d]) : 0.0f;
  }
  const int seq = a.query_seq[qi];
  const int kv_len = a.query_kv_len[qi];
  const int32_t* table = a.block_table + static_cast<int64_t>(seq) * a.max_blocks;
  const int count = a.selected ? a.selected_per_query : kv_len;
  const T* kbase = static_cast<const T*>(a.k.base);
  const T* vbase = static_cast<const T*>(a.v.base);

  float m = -INFINITY, l = 0.0f, acc[kPerLane] = {};
  for (int n = warp; n < count; n += kAttentionWarps) {
    const int pos = a.selected ? a.selected[qi * a.selected_per_query + n] : n;
    if (pos < 0 || pos >= kv_len) continue;
    const int64_t block = table[pos / a.block_size];
    const int slot = pos % a.block_size;
    const T* k = kbase + block * a.k.block_stride + slot * a.k.token_stride +
                 static_cast<int64_t>(kv_head) * a.k.head_stride;
    float dot = 0.0f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int d = lane + kWarpSize * j;
      if (d < a.d_k) dot += qv[j] * device::ToFloat(k[d]);
    }
    const float s = device::WarpSum(dot) * a.scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 on the first key (m = −inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
    const T* v = vbase + block * a.v.block_stride + slot * a.v.token_stride +
                 static_cast<int64_t>(kv_head) * a.v.head_stride;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int d = lane + kWarpSize * j;
      acc[j] = acc[j] * correction + (d < a.d_v ? p * device::ToFloat(v[d]) : 0.0f);
    }
    m = m_new;
  }

  float* mine = merge + warp * (2 + kPerLane * kWarpSize);
  if (lane == 0) {
    mine[0] = m;
    mine[1] = l;
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) mine[2 + lane + kWarpSize * j] = acc[j];
  __syncthreads();
  if (warp != 0) return;
  float big = -INFINITY;
  for (int w = 0; w < kAttentionWarps; ++w) big = fmaxf(big, merge[w * (2 + kPerLane * kWarpSize)]);
  T* out = static_cast<T*>(a.out) + qi * a.out_token_stride + static_cast<int64_t>(h) * a.d_v;
  float total = 0.0f, o[kPerLane] = {};
  if (big != -INFINITY) {
    for (int w = 0; w < kAttentionWarps; ++w) {
      const float* theirs = merge + w * (2 + kPerLane * kWarpSize);
      const float f = expf(theirs[0] - big);  // 0 for a warp that saw no key
      total += theirs[1] * f;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) o[j] += theirs[2 + lane + kWarpSize * j] * f;
    }
  }
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int d = lane + kWarpSize * j;
    if (d < a.d_v) out[d] = device::FromFloat<T>(o[j] * inv);
  }
}

template <typename T>
absl::Status LaunchAttention(const PagedAttentionArgs& a, const LaunchConfig& c, int per_lane,
                             cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(c.grid_x), static_cast<unsigned>(c.grid_y));
  switch (per_lane) {
    case 2:
      PagedAttentionKernel<T, 2><<<grid, c.block, c.shared_bytes, stream>>>(a);
      break;
    case 4:
      PagedAttentionKernel<T, 4><<<grid, c.block, c.shared_bytes, stream>>>(a);
      break;
    case 8:
      PagedAttentionKernel<T, 8><<<grid, c.block, c.shared_bytes, stream>>>(a);
      break;
    case 18:
      PagedAttentionKernel<T, 18><<<grid, c.block, c.shared_bytes, stream>>>(a);
      break;
    default:
      return absl::InternalError(
          absl::StrCat("cuda attention: no kernel for ", per_lane, " values per lane"));
  }
  return LaunchStatus("paged attention");
}

// The lane's share (dimensions lane + 32·p) of query row q as float, zeros past d_k; its
// accumulators zeroed.
template <typename T, int kPerLane>
__device__ __forceinline__ void LoadQuery(const T* q, int d_k, int lane, float (&qv)[kPerLane],
                                          float (&acc)[kPerLane]) {
#pragma unroll
  for (int p = 0; p < kPerLane; ++p) {
    const int d = lane + kWarpSize * p;
    qv[p] = d < d_k ? device::ToFloat(q[d]) : 0.0f;
    acc[p] = 0.0f;
  }
}

// The block stages keys i < n of a tile into shared memory as float (and their values unless
// they are the keys' first d_v values): key i is cache position pos_of(i) of KV head kv_head,
// skipped where that is negative.
template <typename T, typename PosOf>
__device__ __forceinline__ void StageKeys(const PagedAttentionArgs& a, const int32_t* table,
                                          int kv_head, int n, PosOf pos_of, float* keys,
                                          float* values, bool values_in_keys) {
  auto stage = [&](const PagedCache& c, int width, float* out) {
    const T* base = static_cast<const T*>(c.base);
    for (int idx = threadIdx.x; idx < n * width; idx += blockDim.x) {
      const int i = idx / width, d = idx % width, pos = pos_of(i);
      if (pos < 0) continue;
      const int64_t block = table[pos / a.block_size];
      out[i * width + d] =
          device::ToFloat(base[block * c.block_stride + (pos % a.block_size) * c.token_stride +
                               static_cast<int64_t>(kv_head) * c.head_stride + d]);
    }
  };
  stage(a.k, a.d_k, keys);
  if (!values_in_keys) stage(a.v, a.d_v, values);
}

// One key of a warp's online softmax over keys and values staged in shared memory (float):
// the score (lanes over the dimensions, then the warp sum), then the running max m, sum l and
// the lane's d_v values acc (a correction of 0 on the first key, where m = −inf).
template <int kPerLane>
__device__ __forceinline__ void AttendKey(const float (&qv)[kPerLane], const float* key,
                                          const float* value, const PagedAttentionArgs& a, int lane,
                                          float& m, float& l, float (&acc)[kPerLane]) {
  float dot = 0.0f;
#pragma unroll
  for (int p = 0; p < kPerLane; ++p) {
    const int d = lane + kWarpSize * p;
    if (d < a.d_k) dot += qv[p] * key[d];
  }
  const float s = device::WarpSum(dot) * a.scale;
  const float m_new = fmaxf(m, s);
  const float correction = expf(m - m_new);
  const float pr = expf(s - m_new);
  l = l * correction + pr;
#pragma unroll
  for (int p = 0; p < kPerLane; ++p) {
    const int d = lane + kWarpSize * p;
    acc[p] = acc[p] * correction + (d < a.d_v ? pr * value[d] : 0.0f);
  }
  m = m_new;
}

// Prefill: one block per (tile of kTiledQueries queries, query head). Warp w owns queries
// w and w + kTiledWarps of the tile (registers: its queries and their running m, l, acc);
// lane l owns dimensions l + 32·j. Per key tile, the block copies the keys (and values) of
// kTiledKeys positions into shared memory as float, then each warp walks them in order for
// each of its queries (only the keys that query sees).
constexpr int kTiledPerWarp = kTiledQueries / kTiledWarps;
static_assert(kTiledQueries % kTiledWarps == 0, "whole queries per warp");

template <typename T, int kPerLane>
__global__ void __launch_bounds__(kTiledWarps* kWarpSize)
    TiledAttentionKernel(PagedAttentionArgs a, bool values_in_keys) {
  extern __shared__ float tile[];  // keys [kTiledKeys][d_k], then values [kTiledKeys][d_v]
  float* keys = tile;
  float* values = values_in_keys ? tile : tile + kTiledKeys * a.d_k;
  const int v_row = values_in_keys ? a.d_k : a.d_v;  // floats between two values' rows
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kTiledQueries;
  const int h = blockIdx.y;
  const int kv_head =
      a.group > 0 ? (a.head0 + h) / a.group - a.head0 / a.group : h / (a.heads / a.kv_heads);
  const int32_t* table = a.block_table + static_cast<int64_t>(a.query_seq[first]) * a.max_blocks;
  const int64_t in_tile = min(static_cast<int64_t>(kTiledQueries), a.queries - first);

  float qv[kTiledPerWarp][kPerLane], acc[kTiledPerWarp][kPerLane];
  float m[kTiledPerWarp], l[kTiledPerWarp];
  int len[kTiledPerWarp];
  int longest = 0;  // keys visible to any query of the tile (the same in every thread)
  for (int t = 0; t < in_tile; ++t) longest = max(longest, a.query_kv_len[first + t]);
#pragma unroll
  for (int j = 0; j < kTiledPerWarp; ++j) {
    const int64_t qi = first + warp + kTiledWarps * j;
    len[j] = qi < a.queries ? a.query_kv_len[qi] : 0;
    m[j] = -INFINITY;
    l[j] = 0.0f;
    LoadQuery<T, kPerLane>(static_cast<const T*>(a.q) +
                               (qi < a.queries ? qi : first) * a.q_token_stride +
                               static_cast<int64_t>(h) * a.d_k,
                           a.d_k, lane, qv[j], acc[j]);
  }
  for (int k0 = 0; k0 < longest; k0 += kTiledKeys) {
    const int n = min(kTiledKeys, longest - k0);
    StageKeys<T>(
        a, table, kv_head, n, [&](int i) { return k0 + i; }, keys, values, values_in_keys);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTiledPerWarp; ++j) {
      const int visible = min(n, len[j] - k0);  // the same for the whole warp
      for (int i = 0; i < visible; ++i) {
        AttendKey<kPerLane>(qv[j], keys + i * a.d_k, values + i * v_row, a, lane, m[j], l[j],
                            acc[j]);
      }
    }
    __syncthreads();  // every warp is done with the tile before the next overwrites it
  }
#pragma unroll
  for (int j = 0; j < kTiledPerWarp; ++j) {
    const int64_t qi = first + warp + kTiledWarps * j;
    if (qi >= a.queries) continue;
    T* out = static_cast<T*>(a.out) + qi * a.out_token_stride + static_cast<int64_t>(h) * a.d_v;
    const float inv = l[j] > 0.0f ? 1.0f / l[j] : 0.0f;  // no visible key: zeros
#pragma unroll
    for (int p = 0; p < kPerLane; ++p) {
      const int d = lane + kWarpSize * p;
      if (d < a.d_v) out[d] = device::FromFloat<T>(acc[j][p] * inv);
    }
  }
}

template <typename T>
absl::Status LaunchTiled(const PagedAttentionArgs& a, const LaunchConfig& c, int per_lane,
                         bool values_in_keys, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(c.grid_x), static_cast<unsigned>(c.grid_y));
  switch (per_lane) {
    case 2:
      TiledAttentionKernel<T, 2><<<grid, c.block, c.shared_bytes, stream>>>(a, values_in_keys);
      break;
    case 4:
      TiledAttentionKernel<T, 4><<<grid, c.block, c.shared_bytes, stream>>>(a, values_in_keys);
      break;
    case 8:
      TiledAttentionKernel<T, 8><<<grid, c.block, c.shared_bytes, stream>>>(a, values_in_keys);
      break;
    case 18:
      TiledAttentionKernel<T, 18><<<grid, c.block, c.shared_bytes, stream>>>(a, values_in_keys);
      break;
    default:
      return absl::InternalError(
          absl::StrCat("cuda tiled attention: no kernel for ", per_lane, " values per lane"));
  }
  return LaunchStatus("tiled attention");
}

// Prefill on tensor cores: block (tile of kMmaRows (query, head) rows, KV head). The rows
// are the prompt's queries × the KV head's local query heads, query-major; row r of the tile
// has its query's causal length len[r] (0 past the last row). Per tile of kMmaKeys keys:
//   1. the block copies the keys and values (16-bit, as they are; zero rows past the keys;
//      MLA: the values are the key tile's first d_v columns);
//   2. warp w computes scores S[16·(w/2) ..][16·(w%2) ..] = Q·Kᵀ on tensor cores;
//   3. each row's online softmax: warp w takes rows w, w + kMmaWarps, ...; lane j key j:
//      m' = max(m, max_j s_j·scale), P_j = e^{s_j·scale − m'} rounded to T (0 where the key is
//      not visible), l' = l·e^{m − m'} + Σ_j P_j, the correction e^{m − m'} kept per row;
//   4. the block scales the float accumulators O by their row's correction;
//   5. O += P·V on tensor cores, fragment by fragment (load, multiply, store).
// At the end o = O / l (zeros where no key was visible). A key tile past a row's length adds
// P = 0 with correction 1, exactly nothing, so a row's result depends on its own query and keys
// only: not on its tile-mates, nor on where its prompt was cut into chunks.
namespace wmma = nvcuda::wmma;

// The block's dynamic shared memory, as MmaAttentionSharedBytes lays it out. Every array
// starts at a multiple of 32 bytes (head dims are multiples of 16), as WMMA requires.
template <typename T>
struct MmaTiles {
  T *q, *k, *v;  // [kMmaRows][d_k], [kMmaKeys][d_k], [kMmaKeys][ldv] (MLA: v = k)
  int ldv;       // elements between two value rows
  float* s;      // [kMmaRows][kMmaKeys]
  T* p;          // [kMmaRows][kMmaKeys]
  float* o;      // [kMmaRows][d_v]
  float *m, *l, *correction;
  int* len;

  __device__ MmaTiles(uint8_t* base, int d_k, int d_v, bool values_in_keys) {
    q = reinterpret_cast<T*>(base);
    k = q + kMmaRows * d_k;
    v = values_in_keys ? k : k + kMmaKeys * d_k;
    ldv = values_in_keys ? d_k : d_v;
    s = reinterpret_cast<float*>(values_in_keys ? v + kMmaKeys * d_k : v + kMmaKeys * d_v);
    p = reinterpret_cast<T*>(s + kMmaRows * kMmaKeys);
    o = reinterpret_cast<float*>(p + kMmaRows * kMmaKeys);
    m = o + kMmaRows * d_v;
    l = m + kMmaRows;
    correction = l + kMmaRows;
    len = reinterpret_cast<int*>(correction + kMmaRows);
  }
};
static_assert(kMmaRows == 32 && kMmaKeys == 32 && kMmaWarps == 4,
              "warp w scores rows 16·(w/2) and keys 16·(w%2); a lane per key in the softmax");

template <typename T>
__global__ void __launch_bounds__(kMmaWarps* kWarpSize)
    MmaAttentionKernel(PagedAttentionArgs a, bool values_in_keys) {
  extern __shared__ __align__(128) uint8_t mma_shared[];
  const MmaTiles<T> sh(mma_shared, a.d_k, a.d_v, values_in_keys);
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int kv_head = blockIdx.y;
  int h_begin = 0, h_end = 0;
  KvHeadRun(a.heads, a.kv_heads, a.head0, a.group, kv_head, &h_begin, &h_end);
  const int per_kv = h_end - h_begin;
  const int64_t rows = a.queries * per_kv;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kMmaRows;
  if (per_kv <= 0 || row0 >= rows) return;  // a run shorter than the grid's (the whole block)
  const int32_t* table = a.block_table + static_cast<int64_t>(a.query_seq[0]) * a.max_blocks;
  const T zero = device::FromFloat<T>(0.0f);
  const int d_k = a.d_k, d_v = a.d_v;

  for (int idx = tid; idx < kMmaRows * d_k; idx += blockDim.x) {
    const int r = idx / d_k, d = idx % d_k;
    const int64_t e = row0 + r;
    sh.q[idx] =
        e < rows ? static_cast<const T*>(a.q)[(e / per_kv) * a.q_token_stride +
                                              static_cast<int64_t>(h_begin + e % per_kv) * d_k + d]
                 : zero;
  }
  for (int r = tid; r < kMmaRows; r += blockDim.x) {
    const int64_t e = row0 + r;
    sh.len[r] = e < rows ? a.query_kv_len[e / per_kv] : 0;
    sh.m[r] = -INFINITY;
    sh.l[r] = 0.0f;
  }
  for (int idx = tid; idx < kMmaRows * d_v; idx += blockDim.x) sh.o[idx] = 0.0f;
  __syncthreads();
  int longest = 0;  // keys visible to any row of the tile (the same in every thread)
  for (int r = 0; r < kMmaRows; ++r) longest = max(longest, sh.len[r]);

  const int wr = warp / 2 * 16, wk = warp % 2 * 16;  // this warp's 16 score rows and keys
  auto stage = [&](const PagedCache& c, int width, T* out, int k0, int n) {
    const T* base = static_cast<const T*>(c.base);
    for (int idx = tid; idx < kMmaKeys * width; idx += blockDim.x) {
      const int i = idx / width, d = idx % width, pos = k0 + i;
      out[idx] = i < n ? base[table[pos / a.block_size] * c.block_stride +
                              (pos % a.block_size) * c.token_stride +
                              static_cast<int64_t>(kv_head) * c.head_stride + d]
                       : zero;
    }
  };
  for (int k0 = 0; k0 < longest; k0 += kMmaKeys) {
    const int n = min(kMmaKeys, longest - k0);
    stage(a.k, d_k, sh.k, k0, n);
    if (!values_in_keys) stage(a.v, d_v, sh.v, k0, n);
    __syncthreads();
    {  // S = Q·Kᵀ: B[d][key] = k[key][d], column-major.
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
      wmma::fill_fragment(sf, 0.0f);
      for (int d0 = 0; d0 < d_k; d0 += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> qf;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> kf;
        wmma::load_matrix_sync(qf, sh.q + wr * d_k + d0, d_k);
        wmma::load_matrix_sync(kf, sh.k + wk * d_k + d0, d_k);
        wmma::mma_sync(sf, qf, kf, sf);
      }
      wmma::store_matrix_sync(sh.s + wr * kMmaKeys + wk, sf, kMmaKeys, wmma::mem_row_major);
    }
    __syncthreads();
    for (int r = warp; r < kMmaRows; r += kMmaWarps) {
      const bool visible = lane < n && k0 + lane < sh.len[r];
      const float score = visible ? sh.s[r * kMmaKeys + lane] * a.scale : -INFINITY;
      const float m_old = sh.m[r];
      const float m_new = fmaxf(m_old, device::WarpMax(score));
      float p = 0.0f, correction = 1.0f;  // no key seen yet: nothing to scale
      if (m_new != -INFINITY) {
        p = visible ? expf(score - m_new) : 0.0f;
        correction = expf(m_old - m_new);  // 0 on the row's first visible keys
      }
      const T pt = device::FromFloat<T>(p);
      sh.p[r * kMmaKeys + lane] = pt;
      const float sum = device::WarpSum(device::ToFloat(pt));  // every lane has read m, l
      if (lane == 0) {
        sh.m[r] = m_new;
        sh.l[r] = sh.l[r] * correction + sum;
        sh.correction[r] = correction;
      }
    }
    __syncthreads();
    for (int idx = tid; idx < kMmaRows * d_v; idx += blockDim.x) {
      sh.o[idx] *= sh.correction[idx / d_v];
    }
    __syncthreads();
    // O += P·V: B[key][d] = v[key][d], row-major; the warps take the fragments in turn.
    const int col_frags = d_v / 16;
    for (int f = warp; f < 2 * col_frags; f += kMmaWarps) {
      const int ro = f / col_frags * 16, co = f % col_frags * 16;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
      wmma::load_matrix_sync(of, sh.o + ro * d_v + co, d_v, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kMmaKeys; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> pf;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> vf;
        wmma::load_matrix_sync(pf, sh.p + ro * kMmaKeys + kk, kMmaKeys);
        wmma::load_matrix_sync(vf, sh.v + kk * sh.ldv + co, sh.ldv);
        wmma::mma_sync(of, pf, vf, of);
      }
      wmma::store_matrix_sync(sh.o + ro * d_v + co, of, d_v, wmma::mem_row_major);
    }
    __syncthreads();  // O is whole, and every warp is done with the tiles before the next
  }
  for (int idx = tid; idx < kMmaRows * d_v; idx += blockDim.x) {
    const int r = idx / d_v, d = idx % d_v;
    const int64_t e = row0 + r;
    if (e >= rows) continue;
    const float l = sh.l[r];
    T* out = static_cast<T*>(a.out) + (e / per_kv) * a.out_token_stride +
             static_cast<int64_t>(h_begin + e % per_kv) * d_v;
    out[d] = device::FromFloat<T>(l > 0.0f ? sh.o[idx] / l : 0.0f);
  }
}

// Raises the kernel's dynamic shared memory limit when its tile needs more than 48 KiB (MLA's
// latent), then launches it.
template <typename T>
absl::Status LaunchMma(const PagedAttentionArgs& a, const LaunchConfig& c, bool values_in_keys,
                       cudaStream_t stream) {
  if (c.shared_bytes > 48 * 1024) {
    const absl::Status raised =
        CudaStatus(cudaFuncSetAttribute(reinterpret_cast<const void*>(&MmaAttentionKernel<T>),
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(c.shared_bytes)),
                   "cudaFuncSetAttribute (tensor-core attention's shared memory)");
    if (!raised.ok()) return raised;
  }
  const dim3 grid(static_cast<unsigned>(c.grid_x), static_cast<unsigned>(c.grid_y));
  MmaAttentionKernel<T><<<grid, c.block, c.shared_bytes, stream>>>(a, values_in_keys);
  return LaunchStatus("tensor-core attention");
}

// Decode (flash-decoding): block (query, head block, split). The head block is up to
// kDecodeHeads consecutive local heads of one KV head (a run of the group, cut in blocks);
// warp w owns heads w and w + kTiledWarps of it. The split's keys stream through shared
// memory kTiledKeys at a time (positions first: −1 for unused or invisible selections), and
// each warp runs its heads' online softmax over them in key order; the partial (m, l, acc)
// goes to the workspace at ((query · heads + head) · kDecodeMaxSplits + split) · (d_v + 2).
// The splits: DecodeSplits / DecodeSplitLength (launch_config.h).
template <typename T, int kPerLane>
__global__ void __launch_bounds__(kTiledWarps* kWarpSize)
    DecodeAttentionKernel(PagedAttentionArgs a, bool values_in_keys, float* partials) {
  extern __shared__ float tile[];  // keys [kTiledKeys][d_k], values, then positions
  float* keys = tile;
  float* values = values_in_keys ? tile : tile + kTiledKeys * a.d_k;
  int* positions =
      reinterpret_cast<int*>(tile + kTiledKeys * (a.d_k + (values_in_keys ? 0 : a.d_v)));
  const int v_row = values_in_keys ? a.d_k : a.d_v;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t qi = blockIdx.x;
  // This block's heads: run g of the local heads sharing KV head g, block c of it.
  const int group = a.group > 0 ? a.group : a.heads / a.kv_heads;
  const int per_run = (group + kDecodeHeads - 1) / kDecodeHeads;
  const int g = blockIdx.y / per_run, c = blockIdx.y % per_run;
  int run_begin = 0, run_end = 0;
  KvHeadRun(a.heads, a.kv_heads, a.head0, a.group, g, &run_begin, &run_end);
  const int h_begin = run_begin + c * kDecodeHeads;
  const int h_end = min(run_end, h_begin + kDecodeHeads);
  if (h_begin >= h_end) return;
  const int kv_head = g;
  const int kv_len = a.query_kv_len[qi];
  const int count = a.selected ? a.selected_per_query : kv_len;
  const int splits = DecodeSplits(count);
  const int split = blockIdx.z;
  if (split >= splits) return;
  const int len = DecodeSplitLength(count, splits);
  const int n_begin = split * len, n_end = min(count, n_begin + len);
  const int32_t* table = a.block_table + static_cast<int64_t>(a.query_seq[qi]) * a.max_blocks;

  float qv[kTiledPerWarp][kPerLane], acc[kTiledPerWarp][kPerLane];
  float m[kTiledPerWarp], l[kTiledPerWarp];
#pragma unroll
  for (int j = 0; j < kTiledPerWarp; ++j) {
    const int h = h_begin + warp + kTiledWarps * j;
    m[j] = -INFINITY;
    l[j] = 0.0f;
    LoadQuery<T, kPerLane>(static_cast<const T*>(a.q) + qi * a.q_token_stride +
                               static_cast<int64_t>(h < h_end ? h : h_begin) * a.d_k,
                           a.d_k, lane, qv[j], acc[j]);
  }
  for (int n0 = n_begin; n0 < n_end; n0 += kTiledKeys) {
    const int n = min(kTiledKeys, n_end - n0);
    for (int i = threadIdx.x; i < kTiledKeys; i += blockDim.x) {
      int pos = -1;
      if (i < n) {
        pos = a.selected ? a.selected[qi * a.selected_per_query + n0 + i] : n0 + i;
        if (pos >= kv_len) pos = -1;
      }
      positions[i] = pos;
    }
    __syncthreads();
    StageKeys<T>(
        a, table, kv_head, n, [&](int i) { return positions[i]; }, keys, values, values_in_keys);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTiledPerWarp; ++j) {
      if (h_begin + warp + kTiledWarps * j >= h_end) continue;  // the whole warp
      for (int i = 0; i < n; ++i) {
        if (positions[i] < 0) continue;
        AttendKey<kPerLane>(qv[j], keys + i * a.d_k, values + i * v_row, a, lane, m[j], l[j],
                            acc[j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < kTiledPerWarp; ++j) {
    const int h = h_begin + warp + kTiledWarps * j;
    if (h >= h_end) continue;
    float* out = partials + ((qi * a.heads + h) * kDecodeMaxSplits + split) * (a.d_v + 2);
    if (lane == 0) {
      out[0] = m[j];
      out[1] = l[j];
    }
#pragma unroll
    for (int p = 0; p < kPerLane; ++p) {
      const int d = lane + kWarpSize * p;
      if (d < a.d_v) out[2 + d] = acc[j][p];
    }
  }
}

// The splits of (query, head) combined: o = Σ_s acc_s e^{m_s − M} / Σ_s l_s e^{m_s − M}, in
// split order; zeros where no split saw a key.
template <typename T>
__global__ void DecodeMergeKernel(PagedAttentionArgs a, const float* partials) {
  const int64_t qi = blockIdx.x;
  const int h = blockIdx.y;
  const int count = a.selected ? a.selected_per_query : a.query_kv_len[qi];
  const int splits = DecodeSplits(count);
  const float* p = partials + (qi * a.heads + h) * kDecodeMaxSplits * (a.d_v + 2);
  float big = -INFINITY;
  for (int s = 0; s < splits; ++s) big = fmaxf(big, p[s * (a.d_v + 2)]);
  float total = 0.0f;
  if (big != -INFINITY) {
    for (int s = 0; s < splits; ++s)
      total += p[s * (a.d_v + 2) + 1] * expf(p[s * (a.d_v + 2)] - big);
  }
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  T* out = static_cast<T*>(a.out) + qi * a.out_token_stride + static_cast<int64_t>(h) * a.d_v;
  for (int d = threadIdx.x; d < a.d_v; d += blockDim.x) {
    float o = 0.0f;
    if (big != -INFINITY) {
      for (int s = 0; s < splits; ++s) {
        const float* ps = p + s * (a.d_v + 2);
        o += ps[2 + d] * expf(ps[0] - big);
      }
    }
    out[d] = device::FromFloat<T>(o * inv);
  }
}

template <typename T>
absl::Status LaunchDecode(const PagedAttentionArgs& a, const LaunchConfig& c, int per_lane,
                          bool values_in_keys, float* partials, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(c.grid_x), static_cast<unsigned>(c.grid_y),
                  static_cast<unsigned>(kDecodeMaxSplits));
  switch (per_lane) {
    case 2:
      DecodeAttentionKernel<T, 2>
          <<<grid, c.block, c.shared_bytes, stream>>>(a, values_in_keys, partials);
      break;
    case 4:
      DecodeAttentionKernel<T, 4>
          <<<grid, c.block, c.shared_bytes, stream>>>(a, values_in_keys, partials);
      break;
    case 8:
      DecodeAttentionKernel<T, 8>
          <<<grid, c.block, c.shared_bytes, stream>>>(a, values_in_keys, partials);
      break;
    case 18:
      DecodeAttentionKernel<T, 18>
          <<<grid, c.block, c.shared_bytes, stream>>>(a, values_in_keys, partials);
      break;
    default:
      return absl::InternalError(
          absl::StrCat("cuda decode attention: no kernel for ", per_lane, " values per lane"));
  }
  if (absl::Status s = LaunchStatus("decode attention"); !s.ok()) return s;
  const dim3 merge(static_cast<unsigned>(a.queries), static_cast<unsigned>(a.heads));
  DecodeMergeKernel<T><<<merge, 128, 0, stream>>>(a, partials);
  return LaunchStatus("decode attention merge");
}

// Block: (query, 8 warps of keys); the query's heads × dim values sit in shared memory and
// each warp scores one key at a time (lanes over the dimensions).
constexpr int kIndexerWarps = 8;

__global__ void IndexerScoreKernel(IndexerScoreArgs a) {
  extern __shared__ float qs[];  // heads × dim, then heads weights
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t qi = blockIdx.x;
  const int hd = a.heads * a.dim;
  for (int i = threadIdx.x; i < hd; i += blockDim.x) qs[i] = a.q[qi * hd + i];
  for (int i = threadIdx.x; i < a.heads; i += blockDim.x) qs[hd + i] = a.weights[qi * a.heads + i];
  __syncthreads();
  const int kv_len = a.query_kv_len[qi];
  const int32_t* table = a.block_table + static_cast<int64_t>(a.query_seq[qi]) * a.max_blocks;
  const float* kbase = static_cast<const float*>(a.keys.base);
  for (int64_t j = static_cast<int64_t>(blockIdx.y) * kIndexerWarps + warp; j < a.n_keys;
       j += static_cast<int64_t>(gridDim.y) * kIndexerWarps) {
    if (j >= kv_len) {
      if (lane == 0) a.scores[qi * a.n_keys + j] = -INFINITY;
      continue;
    }
    const float* k = kbase + table[j / a.block_size] * a.keys.block_stride +
                     (j % a.block_size) * a.keys.token_stride;
    float score = 0.0f;
    for (int h = 0; h < a.heads; ++h) {
      float dot = 0.0f;
      for (int d = lane; d < a.dim; d += kWarpSize) dot += qs[h * a.dim + d] * k[d];
      dot = device::WarpSum(dot);
      score += qs[hd + h] * fmaxf(dot, 0.0f);
    }
    if (lane == 0) a.scores[qi * a.n_keys + j] = score;
  }
}

}  // namespace

absl::Status PagedAttention(const PagedAttentionArgs& a, DType dtype, cudaStream_t stream) {
  int per_lane = 0;
  absl::StatusOr<LaunchConfig> c = CheckPagedAttention(a, &per_lane);
  if (!c.ok()) return c.status();
  absl::Status (*launch)(const PagedAttentionArgs&, const LaunchConfig&, int, cudaStream_t) =
      nullptr;
  TESSERA_DISPATCH_DTYPE(dtype, T, launch = &LaunchAttention<T>);
  return launch(a, *c, per_lane, stream);
}

absl::Status PagedAttentionTiled(const PagedAttentionArgs& a, DType dtype, cudaStream_t stream) {
  int per_lane = 0;
  absl::StatusOr<LaunchConfig> c = CheckTiledAttention(a, &per_lane);
  if (!c.ok()) return c.status();
  absl::Status (*launch)(const PagedAttentionArgs&, const LaunchConfig&, int, bool, cudaStream_t) =
      nullptr;
  TESSERA_DISPATCH_DTYPE(dtype, T, launch = &LaunchTiled<T>);
  return launch(a, *c, per_lane, ValuesInKeys(a), stream);
}

absl::Status PagedAttentionMma(const PagedAttentionArgs& a, DType dtype, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckMmaAttention(a, dtype, CurrentDeviceLimits());
  if (!c.ok()) return c.status();
  if (dtype == DType::kF16) return LaunchMma<__half>(a, *c, ValuesInKeys(a), stream);
  return LaunchMma<__nv_bfloat16>(a, *c, ValuesInKeys(a), stream);
}

absl::Status PagedAttentionDecode(const PagedAttentionArgs& a, float* workspace,
                                  int64_t workspace_floats, DType dtype, cudaStream_t stream) {
  int per_lane = 0;
  int64_t chunk = 0;
  absl::StatusOr<LaunchConfig> c =
      CheckDecodeAttention(a, workspace, workspace_floats, &per_lane, &chunk);
  if (!c.ok()) return c.status();
  absl::Status (*launch)(const PagedAttentionArgs&, const LaunchConfig&, int, bool, float*,
                         cudaStream_t) = nullptr;
  TESSERA_DISPATCH_DTYPE(dtype, T, launch = &LaunchDecode<T>);
  for (int64_t q0 = 0; q0 < a.queries; q0 += chunk) {
    const PagedAttentionArgs p = QueryRange(a, q0, std::min(chunk, a.queries - q0), dtype);
    LaunchConfig pc = *c;
    pc.grid_x = p.queries;
    if (absl::Status st = launch(p, pc, per_lane, ValuesInKeys(a), workspace, stream); !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

absl::Status IndexerScores(const IndexerScoreArgs& a, cudaStream_t stream) {
  absl::StatusOr<size_t> shared = CheckIndexerScores(a);
  if (!shared.ok()) return shared.status();
  const int64_t key_blocks =
      std::min<int64_t>((a.n_keys + kIndexerWarps - 1) / kIndexerWarps, 65535);
  const dim3 grid(static_cast<unsigned>(a.queries), static_cast<unsigned>(key_blocks));
  IndexerScoreKernel<<<grid, kIndexerWarps * kWarpSize, *shared, stream>>>(a);
  return LaunchStatus("indexer scores");
}

}  // namespace tessera::cuda
