// nvcuda::wmma for the SIMT emulator (kernels/cuda/simt/simt.h): 16 × 16 × 16 fragments,
// spread over the warp as on a GPU — lane l holds elements l, l + 32, ... of the row-major tile
// (CUDA leaves the mapping opaque; any kernel that relies on one is wrong on some GPU), so a
// lane that reads what another lane stored needs a __syncwarp as on the device. Each operation
// first waits for the warp, as the *_sync operations do; mma_sync gathers the operands through
// per-warp scratch and accumulates in float, in k order.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/cuda/simt/simt.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

inline float ToFloat(float v) { return v; }
inline float ToFloat(__half v) { return __half2float(v); }
inline float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

constexpr int kLanes = 32, kPerLane = 256 / kLanes;

inline int LinearThread() {
  return static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "only 16 x 16 x 16 fragments are emulated");
  static constexpr int num_elements = kPerLane;
  float x[kPerLane];  // this lane's elements: x[j] is tile element lane + 32·j (row-major)
};

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, float v) {
  for (float& e : f.x) e = v;
}

template <typename Use, typename T, typename Layout, typename P>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const P* p, unsigned ldm) {
  static_assert(!std::is_same_v<Use, accumulator>, "accumulators load with a layout");
  __syncwarp();
  constexpr bool kRowMajor = std::is_same_v<Layout, row_major>;
  const unsigned lane = static_cast<unsigned>(LinearThread() % kLanes);
  for (unsigned j = 0; j < kPerLane; ++j) {
    const unsigned e = lane + kLanes * j, r = e / 16, c = e % 16;
    f.x[j] = ToFloat(kRowMajor ? p[r * ldm + c] : p[r + c * ldm]);
  }
}

// An accumulator from float memory (row- or column-major).
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p,
                             unsigned ldm, layout_t layout) {
  __syncwarp();
  const unsigned lane = static_cast<unsigned>(LinearThread() % kLanes);
  for (unsigned j = 0; j < kPerLane; ++j) {
    const unsigned e = lane + kLanes * j, r = e / 16, c = e % 16;
    f.x[j] = p[layout == mem_row_major ? r * ldm + c : r + c * ldm];
  }
}

// Fragments hold their tile row-major whatever the memory layout they were loaded from.
template <typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, T, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  // Operands of every warp of the block (up to 32), gathered tile-wide.
  __shared__ float operands[32][2][256];
  __syncwarp();
  const int tid = LinearThread(), lane = tid % kLanes;
  float(&tiles)[2][256] = operands[tid / kLanes];
  for (int j = 0; j < kPerLane; ++j) {
    tiles[0][lane + kLanes * j] = a.x[j];
    tiles[1][lane + kLanes * j] = b.x[j];
  }
  __syncwarp();
  float out[kPerLane];
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + kLanes * j, r = e / 16, col = e % 16;
    float acc = c.x[j];
    for (int k = 0; k < 16; ++k) acc += tiles[0][r * 16 + k] * tiles[1][k * 16 + col];
    out[j] = acc;
  }
  __syncwarp();  // every lane has read the operands before the next product writes them
  for (int j = 0; j < kPerLane; ++j) d.x[j] = out[j];
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout) {
  __syncwarp();
  const unsigned lane = static_cast<unsigned>(LinearThread() % kLanes);
  for (unsigned j = 0; j < kPerLane; ++j) {
    const unsigned e = lane + kLanes * j, r = e / 16, c = e % 16;
    p[layout == mem_row_major ? r * ldm + c : r + c * ldm] = f.x[j];
  }
}

}  // namespace nvcuda::wmma
