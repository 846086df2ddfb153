// The CUDA kernels of kernels/cuda/*.h computed in plain C++ on the host, for the CUDA emulator
// (emu_runtime.h): every launcher runs the same argument checks as its .cu twin (the
// kernel_checks.h and launch_config.h functions, so that errors read the same) and returns
// them at call time; the work itself goes through emu::Launch as a closure holding its
// arguments by value, so that a stream under capture records it and a graph replay recomputes
// it from whatever the buffers then hold, as a real kernel launch would. Arithmetic is the
// kernels' in float32 (accumulation order may differ), with the same dtype rounding (round to
// nearest even), the same edge cases and the CPU reference decoder for weights (bit-exact with
// quant_decode.cuh).
#include <algorithm>
#include <array>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/model/constants.h"
#include "common/quant/dequantize.h"
#include "common/util/half.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/cuda_types.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/emu/emu_runtime.h"
#include "kernels/cuda/glue_kernels.h"
#include "kernels/cuda/kernel_checks.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/launcher_checks.h"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/nn_kernels.h"
#include "kernels/cuda/selection_kernels.h"

namespace tessera::cuda {
namespace {

constexpr float kInf = INFINITY;

// ---- Activations and weights ------------------------------------------------------------------

// Element i of an activation buffer of `dtype`, as float (exact).
float Load(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(p)[i];
    case DType::kF16:
      return Fp16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case DType::kBF16:
      return Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
  }
  return 0.0f;
}

// Stores v as element i, rounded to nearest even (device::FromFloat).
void Store(void* p, DType dtype, int64_t i, float v) {
  switch (dtype) {
    case DType::kF32:
      static_cast<float*>(p)[i] = v;
      return;
    case DType::kF16:
      static_cast<uint16_t*>(p)[i] = FloatToFp16(v);
      return;
    case DType::kBF16:
      static_cast<uint16_t*>(p)[i] = FloatToBf16(v);
      return;
  }
}

// v as storing it in `dtype` would leave it (the 16-bit tiles of the GEMMs).
float RoundTo(DType dtype, float v) {
  switch (dtype) {
    case DType::kF32:
      return v;
    case DType::kF16:
      return Fp16ToFloat(FloatToFp16(v));
    case DType::kBF16:
      return Bf16ToFloat(FloatToBf16(v));
  }
  return v;
}

// Decodes the first `n` elements of `type` at `src` (whole blocks) with the CPU reference. The
// launchers checked the type and sizes, so a failure here means the CPU lacks a decoder the GPU
// has: the values become NaN, loudly wrong rather than silently plausible.
void Decode(gguf::GgmlType type, const void* src, int64_t n, float* out) {
  const absl::StatusOr<QuantGeometry> g = CudaQuantGeometry(type);
  const size_t bytes =
      g.ok() ? static_cast<size_t>(n / g->block_elems) * static_cast<size_t>(g->block_bytes) : 0;
  const absl::Status s = quant::DequantizeToFloat(
      type, absl::MakeConstSpan(static_cast<const uint8_t*>(src), bytes), n, out);
  if (!s.ok()) std::fill(out, out + n, NAN);
}

// Row r of a weight matrix, decoded into out[0, cols).
void DecodeRow(const DeviceMatrix& w, const void* base, int64_t r, float* out) {
  Decode(w.type, static_cast<const uint8_t*>(base) + static_cast<size_t>(r) * w.row_bytes, w.cols,
         out);
}

// Elements [offset, offset + n) of an activation buffer, as float (exact).
void LoadRun(const void* p, DType dtype, int64_t offset, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = Load(p, dtype, offset + i);
}

// Dot reads only the emulator's own float copies (the device buffers are read, under the
// sanitizers' checks, by LoadRun and the decoder), so it is built optimized and uninstrumented
// even in Debug and sanitizer builds, where it otherwise took 80% of the time of the GPU
// executor's tests on the emulator.
#if defined(__clang__)
#define TESSERA_EMU_FAST __attribute__((no_sanitize("address", "undefined")))
#elif defined(__GNUC__)
#define TESSERA_EMU_FAST __attribute__((optimize("O2"), no_sanitize("address", "undefined")))
#else
#define TESSERA_EMU_FAST
#endif

// Float32 dot product in eight partial sums, so that the compiler can vectorize it. Not the
// kernels' order (their lanes sum elements lane + 32·p, or runs of 8, then reduce across the
// warp): bit-for-bit claims between two kernels (batch invariance, sorted vs per-choice
// products) hold here by construction and need a GPU run to be shown on the device.
TESSERA_EMU_FAST float Dot(const float* a, const float* b, int64_t n) {
  constexpr int kLanes = 8;
  float part[kLanes] = {};
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes) {
    for (int u = 0; u < kLanes; ++u) part[u] += a[k + u] * b[k + u];
  }
  for (; k < n; ++k) part[0] += a[k] * b[k];
  float s = 0.0f;
  for (float v : part) s += v;
  return s;
}

// y[b·rows + r] = W[r] · x[b·cols ...] for b < batch. `round_weights`: the weights are rounded
// to `act` first, as the GEMMs' dequantized scratch and shared-memory tiles hold them.
void Product(const DeviceMatrix& w, const void* x, DType act, int64_t batch, void* y,
             bool round_weights) {
  std::vector<float> row(static_cast<size_t>(w.cols)), xs(static_cast<size_t>(batch * w.cols));
  LoadRun(x, act, 0, batch * w.cols, xs.data());
  for (int64_t r = 0; r < w.rows; ++r) {
    DecodeRow(w, w.data, r, row.data());
    if (round_weights) {
      for (float& v : row) v = RoundTo(act, v);
    }
    for (int64_t b = 0; b < batch; ++b) {
      Store(y, act, b * w.rows + r, Dot(row.data(), xs.data() + b * w.cols, w.cols));
    }
  }
}

// GroupedGemv's work: member by member, so that each row of a member in use is decoded once.
// The sorted form takes the members' choices from order/offsets as given (so that a stale or
// wrong grouping gives wrong rows here too, as on the GPU); the other groups the ids itself.
// `round_weights` as in Product (GroupedGemmTiles' tiles hold them in `act`).
void GroupedProduct(const GroupedGemvArgs& a, DType act, int64_t x_stride, int64_t y_stride,
                    bool round_weights) {
  const DeviceMatrix& w = a.w;
  std::vector<std::vector<int64_t>> by_member(static_cast<size_t>(a.members));
  std::vector<int64_t> outside;
  if (a.order != nullptr) {
    for (int m = 0; m <= a.members; ++m) {
      for (int i = a.offsets[m]; i < a.offsets[m + 1]; ++i) {
        (m < a.members ? by_member[m] : outside).push_back(a.order[i]);
      }
    }
  } else {
    for (int64_t choice = 0; choice < a.tokens * a.used; ++choice) {
      const int m = a.ids[choice] - a.member0;
      (m >= 0 && m < a.members ? by_member[m] : outside).push_back(choice);
    }
  }
  for (int64_t choice : outside) {
    for (int64_t r = 0; r < w.rows; ++r) Store(a.y, act, choice * y_stride + r, 0.0f);
  }
  std::vector<float> row(static_cast<size_t>(w.cols)), xs;
  for (int m = 0; m < a.members; ++m) {
    const std::vector<int64_t>& choices = by_member[m];
    if (choices.empty()) continue;
    xs.resize(choices.size() * static_cast<size_t>(w.cols));
    for (size_t j = 0; j < choices.size(); ++j) {
      const int64_t x0 = (a.x_per_choice ? choices[j] : choices[j] / a.used) * x_stride;
      LoadRun(a.x, act, x0, w.cols, xs.data() + j * w.cols);
    }
    const void* member =
        static_cast<const uint8_t*>(w.data) + static_cast<size_t>(m) * a.member_bytes;
    for (int64_t r = 0; r < w.rows; ++r) {
      DecodeRow(w, member, r, row.data());
      if (round_weights) {
        for (float& v : row) v = RoundTo(act, v);
      }
      for (size_t j = 0; j < choices.size(); ++j) {
        Store(a.y, act, choices[j] * y_stride + r, Dot(row.data(), xs.data() + j * w.cols, w.cols));
      }
    }
  }
}

// device::BlockSum over a row of n values, as a block of `threads` (RowLaunch's, a multiple
// of 32) adds them: thread t sums values t, t + threads, ... in order; each warp combines its
// lanes with the xor butterfly of WarpSum; the warps' sums are added in order. The same
// summation tree as the GPU, so long rows keep its accuracy (a sequential float sum of 30000
// softmax terms drifts by ~3e-5 relative).
template <typename Value>
float BlockSum(int64_t n, int threads, Value value) {
  std::vector<float> lane(static_cast<size_t>(threads), 0.0f);
  for (int64_t i = 0; i < n; ++i) lane[i % threads] += value(i);
  float total = 0.0f;
  for (int w = 0; w < threads; w += kWarpSize) {
    float* v = lane.data() + w;
    for (int o = kWarpSize / 2; o > 0; o >>= 1) {
      float next[kWarpSize];
      for (int l = 0; l < kWarpSize; ++l) next[l] = v[l] + v[l ^ o];
      std::copy(next, next + kWarpSize, v);
    }
    total += v[0];
  }
  return total;
}

// ---- Selection helpers (radix_select.cuh, one thread) -----------------------------------------

// Floats as unsigned keys that order like them, NaN lowest, −0 equal to +0.
uint32_t OrderKey(float f) {
  if (std::isnan(f)) return 0;
  const uint32_t u = Float2Bits(f + 0.0f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// RadixSelect: the key T with W(key > T) < target ≤ W(key ≥ T) over the valid elements, found
// digit by digit as the kernel does (so that its fallback when rounding leaves the target
// unreached, and its skipping of zero-weight digits, are the same).
template <typename Valid, typename Weight>
void RadixSelect(int n, const float* x, Valid valid, Weight weight, double target,
                 uint32_t* threshold, double* above) {
  uint32_t prefix = 0, mask = 0;
  double acc = 0.0;
  std::array<double, 256> hist;
  for (int shift = 24; shift >= 0; shift -= 8) {
    hist.fill(0.0);
    for (int i = 0; i < n; ++i) {
      if (!valid(i)) continue;
      const uint32_t key = OrderKey(x[i]);
      if ((key & mask) == prefix) hist[(key >> shift) & 0xFF] += weight(i);
    }
    int chosen = -1, lowest = -1;
    double cum = acc;
    for (int d = 255; d >= 0; --d) {
      if (hist[d] > 0.0) lowest = d;
      if (hist[d] > 0.0 && cum + hist[d] >= target) {
        chosen = d;
        break;
      }
      cum += hist[d];
    }
    if (chosen < 0) {
      chosen = lowest < 0 ? 0 : lowest;
      cum = acc;
      for (int d = 255; d > chosen; --d) cum += hist[d];
    }
    prefix |= static_cast<uint32_t>(chosen) << shift;
    acc = cum;
    mask |= 0xFFu << shift;
  }
  *threshold = prefix;
  *above = acc;
}

// TieCut: the tie (key == T) at which the running weight of ties in index order first reaches
// `need`; the last tie when it never does; −1 without ties.
template <typename Valid, typename Weight>
int TieCut(int n, const float* x, Valid valid, Weight weight, uint32_t threshold, double need) {
  double carry = 0.0;
  int last = -1;
  for (int i = 0; i < n; ++i) {
    if (!valid(i) || OrderKey(x[i]) != threshold) continue;
    carry += weight(i);
    if (carry >= need) return i;
    last = i;
  }
  return last;
}

// The survivors of a top-k or top-p cut (sampling.cu's Cut).
struct Cut {
  uint32_t threshold = 0;
  int tie_cut = INT_MAX;
  bool Pass(const float* x, int i) const {
    const uint32_t key = OrderKey(x[i]);
    return key > threshold || (key == threshold && i <= tie_cut);
  }
};

}  // namespace

// ---- cuda_types.h -----------------------------------------------------------------------------

// Emulated launches cannot fail once their checks pass (those return at call time).
absl::Status LaunchStatus(const char*) { return absl::OkStatus(); }

// ---- device.h ---------------------------------------------------------------------------------

std::vector<DeviceInfo> ListDevices() {
  return {DeviceInfo{.index = 0,
                     .name = "CUDA emulator (CPU)",
                     .compute_major = 9,
                     .compute_minor = 0,
                     .total_memory = emu::kEmulatedDeviceBytes}};
}

absl::Status Saxpy(int device, float a, const std::vector<float>& x, std::vector<float>& y) {
  if (x.size() != y.size()) return absl::InvalidArgumentError("saxpy: x and y differ in size");
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaSetDevice: ", cudaGetErrorString(e)));
  }
  // Synchronous and on host vectors: nothing to queue.
  for (size_t i = 0; i < x.size(); ++i) y[i] = a * x[i] + y[i];
  return absl::OkStatus();
}

// ---- matmul_kernels.h -------------------------------------------------------------------------

absl::Status Dequantize(gguf::GgmlType type, const void* src, int64_t n, DType out, void* dst,
                        cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = DequantizeLaunch(type, n);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] {
    std::vector<float> v(static_cast<size_t>(n));
    Decode(type, src, n, v.data());
    for (int64_t i = 0; i < n; ++i) Store(dst, out, i, v[i]);
  });
  return absl::OkStatus();
}

absl::Status Gemv(const DeviceMatrix& w, const void* x, DType act, int64_t batch, void* y,
                  cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckGemv(w, batch);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] { Product(w, x, act, batch, y, /*round_weights=*/false); });
  return absl::OkStatus();
}

absl::Status GroupedGemv(const GroupedGemvArgs& a, DType act, cudaStream_t stream) {
  int64_t x_stride = 0, y_stride = 0;
  absl::StatusOr<LaunchConfig> c = CheckGroupedGemv(a, &x_stride, &y_stride);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] { GroupedProduct(a, act, x_stride, y_stride, /*round_weights=*/false); });
  return absl::OkStatus();
}

// SortByMemberKernel's contract; inside a bucket the choices stay in index order (the GPU's
// order there is unspecified and changes nothing).
absl::Status SortByMember(const int32_t* ids, int64_t n, int members, int member0, int32_t* order,
                          int32_t* offsets, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c =
      CheckSortByMember(n, members, ids != nullptr, order != nullptr, offsets != nullptr);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] {
    auto bucket = [&](int64_t i) {
      const int m = ids[i] - member0;
      return m >= 0 && m < members ? m : members;
    };
    std::vector<int32_t> cursor(static_cast<size_t>(members) + 2, 0);
    for (int64_t i = 0; i < n; ++i) ++cursor[bucket(i) + 1];
    for (int b = 0; b <= members; ++b) cursor[b + 1] += cursor[b];
    std::copy(cursor.begin(), cursor.end(), offsets);
    for (int64_t i = 0; i < n; ++i) order[cursor[bucket(i)]++] = static_cast<int32_t>(i);
  });
  return absl::OkStatus();
}

absl::Status MoeCombine(const void* y, const float* weights, int64_t tokens, int used, int64_t n,
                        DType act, void* out, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckMoeCombine(tokens, used, n);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] {
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t i = 0; i < n; ++i) {
        float sum = 0.0f;
        for (int j = 0; j < used; ++j) {
          sum += weights[t * used + j] * Load(y, act, (t * used + j) * n + i);
        }
        Store(out, act, t * n + i, sum);
      }
    }
  });
  return absl::OkStatus();
}

// The scratch and the cuBLAS handle are not touched: the product is computed directly, with
// the weights rounded to `act` as the dequantized scratch would hold them.
absl::Status GemmDequantized(cublasHandle_t, const DeviceMatrix& w, const void* x, DType act,
                             int64_t batch, void* y, void*, size_t scratch_bytes,
                             cudaStream_t stream) {
  absl::StatusOr<int64_t> chunk = CheckGemmDequantized(w, act, batch, scratch_bytes);
  if (!chunk.ok()) return chunk.status();
  emu::Launch(stream, [=] { Product(w, x, act, batch, y, /*round_weights=*/true); });
  return absl::OkStatus();
}

absl::Status GemmTiles(const DeviceMatrix& w, const void* x, DType act, int64_t batch, void* y,
                       cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckGemmTiles(w, act, batch);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] { Product(w, x, act, batch, y, /*round_weights=*/true); });
  return absl::OkStatus();
}

absl::Status GroupedGemmTiles(const GroupedGemvArgs& a, DType act, cudaStream_t stream) {
  int64_t x_stride = 0, y_stride = 0;
  absl::StatusOr<LaunchConfig> c = CheckGroupedGemmTiles(a, act, &x_stride, &y_stride);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] { GroupedProduct(a, act, x_stride, y_stride, /*round_weights=*/true); });
  return absl::OkStatus();
}

// ---- nn_kernels.h -----------------------------------------------------------------------------

absl::Status Rope(const RopeArgs& a, DType dtype, void* x, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckRope(a);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] {
    const int half = a.n_rot / 2;
    for (int64_t t = 0; t < a.tokens; ++t) {
      for (int h = 0; h < a.heads; ++h) {
        const int64_t head = t * a.token_stride + static_cast<int64_t>(h) * a.head_dim;
        for (int i = 0; i < half; ++i) {
          // Angles in double (positions reach 1e5+), as RopeKernel computes them.
          const double theta = static_cast<double>(a.positions[t]) * a.theta_scales[i];
          const float cs = static_cast<float>(std::cos(theta) * a.magnitude);
          const float sn = static_cast<float>(std::sin(theta) * a.magnitude);
          const int64_t ia = a.neox ? head + i : head + 2 * i;
          const int64_t ib = a.neox ? head + i + half : head + 2 * i + 1;
          const float x0 = Load(x, dtype, ia), x1 = Load(x, dtype, ib);
          Store(x, dtype, ia, x0 * cs - x1 * sn);
          Store(x, dtype, ib, x0 * sn + x1 * cs);
        }
      }
    }
  });
  return absl::OkStatus();
}

absl::Status Softmax(void* x, int64_t rows, int64_t n, DType dtype, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = RowLaunch("softmax", rows, n);
  if (!c.ok()) return c.status();
  const int threads = c->block;
  emu::Launch(stream, [=] {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = r * n;
      float m = -kInf;
      for (int64_t i = 0; i < n; ++i) m = std::fmax(m, Load(x, dtype, row + i));
      const float sum =
          BlockSum(n, threads, [&](int64_t i) { return std::exp(Load(x, dtype, row + i) - m); });
      const float inv = 1.0f / sum;
      for (int64_t i = 0; i < n; ++i) {
        Store(x, dtype, row + i, std::exp(Load(x, dtype, row + i) - m) * inv);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status SiluMul(const void* gate, const void* up, int64_t n, DType dtype, void* out,
                     cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = ElementwiseLaunch("silu_mul", n);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] {
    for (int64_t i = 0; i < n; ++i) {
      const float g = Load(gate, dtype, i);
      Store(out, dtype, i, g / (1.0f + std::exp(-g)) * Load(up, dtype, i));
    }
  });
  return absl::OkStatus();
}

absl::Status AddInPlace(void* y, const void* x, int64_t n, DType dtype, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = ElementwiseLaunch("add", n);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] {
    for (int64_t i = 0; i < n; ++i) Store(y, dtype, i, Load(y, dtype, i) + Load(x, dtype, i));
  });
  return absl::OkStatus();
}

absl::Status GatherRows(const DeviceMatrix& table, const int32_t* ids, int64_t n, DType dtype,
                        void* out, cudaStream_t stream) {
  if (absl::Status s = CheckGatherRows(table, ids, n, out); !s.ok()) return s;
  emu::Launch(stream, [=] {
    std::vector<float> row(static_cast<size_t>(table.cols));
    for (int64_t i = 0; i < n; ++i) {
      const int32_t id = ids[i];
      if (id >= 0 && id < table.rows) {
        DecodeRow(table, table.data, id, row.data());
      } else {
        std::fill(row.begin(), row.end(), 0.0f);
      }
      for (int64_t k = 0; k < table.cols; ++k) Store(out, dtype, i * table.cols + k, row[k]);
    }
  });
  return absl::OkStatus();
}

// ---- attention_kernels.h ----------------------------------------------------------------------

namespace {

// The element offset of position `pos` of KV head `kv_head` in cache `c`, through a sequence's
// block-table row `table`.
int64_t CacheOffset(const PagedAttentionArgs& a, const PagedCache& c, const int32_t* table, int pos,
                    int kv_head) {
  return table[pos / a.block_size] * c.block_stride + (pos % a.block_size) * c.token_stride +
         static_cast<int64_t>(kv_head) * c.head_stride;
}

// One query's head's online softmax over keys [n_begin, n_end) of its list, in order (the
// kernels' AttendKey steps), reading sequence `seq`'s block table: m, l and the d_v values
// into `out` (m, l, acc...).
void AttendKeys(const PagedAttentionArgs& a, DType dtype, int64_t qi, int seq, int h, int n_begin,
                int n_end, const float* qv, float* out) {
  const int kv_len = a.query_kv_len[qi];
  const int32_t* table = a.block_table + static_cast<int64_t>(seq) * a.max_blocks;
  const int kv_head =
      a.group > 0 ? (a.head0 + h) / a.group - a.head0 / a.group : h / (a.heads / a.kv_heads);
  std::vector<float> key(static_cast<size_t>(a.d_k));
  float m = -kInf, l = 0.0f;
  float* acc = out + 2;
  std::fill(acc, acc + a.d_v, 0.0f);
  for (int n = n_begin; n < n_end; ++n) {
    const int pos = a.selected ? a.selected[qi * a.selected_per_query + n] : n;
    if (pos < 0 || pos >= kv_len) continue;
    LoadRun(a.k.base, dtype, CacheOffset(a, a.k, table, pos, kv_head), a.d_k, key.data());
    const float s = Dot(qv, key.data(), a.d_k) * a.scale;
    const float m_new = std::fmax(m, s);
    const float correction = std::exp(m - m_new);
    const float p = std::exp(s - m_new);
    l = l * correction + p;
    const int64_t v0 = CacheOffset(a, a.v, table, pos, kv_head);
    for (int d = 0; d < a.d_v; ++d) {
      acc[d] = acc[d] * correction + p * Load(a.v.base, dtype, v0 + d);
    }
    m = m_new;
  }
  out[0] = m;
  out[1] = l;
}

// The merge kernel's output for (query qi, head h) from `splits` partials (m, l, acc...) of
// `stride` floats each: o = Σ_s acc_s e^{m_s − M} / Σ_s l_s e^{m_s − M}; zeros where no split
// saw a key. One split gives acc / l.
void StoreMerged(const PagedAttentionArgs& a, DType dtype, int64_t qi, int h, const float* p,
                 int splits, int64_t stride) {
  float big = -kInf;
  for (int s = 0; s < splits; ++s) big = std::fmax(big, p[s * stride]);
  float total = 0.0f;
  if (big != -kInf) {
    for (int s = 0; s < splits; ++s) total += p[s * stride + 1] * std::exp(p[s * stride] - big);
  }
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  const int64_t o0 = qi * a.out_token_stride + static_cast<int64_t>(h) * a.d_v;
  for (int d = 0; d < a.d_v; ++d) {
    float o = 0.0f;
    if (big != -kInf) {
      for (int s = 0; s < splits; ++s) o += p[s * stride + 2 + d] * std::exp(p[s * stride] - big);
    }
    Store(a.out, dtype, o0 + d, o * inv);
  }
}

// PagedAttention's work, and PagedAttentionTiled's (`tiled`: every query of a tile of
// kTiledQueries reads the block-table row of the tile's first query, as that kernel does):
// each (query, head) walks all its keys at once; a query that saw no key gets zeros.
void Attend(const PagedAttentionArgs& a, DType dtype, bool tiled) {
  std::vector<float> qv(static_cast<size_t>(a.d_k)), part(static_cast<size_t>(a.d_v) + 2);
  for (int64_t qi = 0; qi < a.queries; ++qi) {
    const int seq = a.query_seq[tiled ? qi / kTiledQueries * kTiledQueries : qi];
    const int count = a.selected ? a.selected_per_query : a.query_kv_len[qi];
    for (int h = 0; h < a.heads; ++h) {
      LoadRun(a.q, dtype, qi * a.q_token_stride + static_cast<int64_t>(h) * a.d_k, a.d_k,
              qv.data());
      AttendKeys(a, dtype, qi, seq, h, 0, count, qv.data(), part.data());
      StoreMerged(a, dtype, qi, h, part.data(), 1, a.d_v + 2);
    }
  }
}

// PagedAttentionMma's work: per (query, head), its online softmax by tiles of kMmaKeys keys
// as the kernel steps it (the tile's max first, then the probabilities rounded to `dtype`, the
// sum l of the rounded values); every query reads query_seq[0]'s block table.
void AttendMma(const PagedAttentionArgs& a, DType dtype) {
  const int32_t* table = a.block_table + static_cast<int64_t>(a.query_seq[0]) * a.max_blocks;
  std::vector<float> qv(static_cast<size_t>(a.d_k)), key(static_cast<size_t>(a.d_k)),
      acc(static_cast<size_t>(a.d_v));
  float scores[kMmaKeys];
  for (int64_t qi = 0; qi < a.queries; ++qi) {
    const int kv_len = a.query_kv_len[qi];
    for (int kv = 0; kv < a.kv_heads; ++kv) {
      int h_begin = 0, h_end = 0;
      KvHeadRun(a.heads, a.kv_heads, a.head0, a.group, kv, &h_begin, &h_end);
      for (int h = h_begin; h < h_end; ++h) {
        LoadRun(a.q, dtype, qi * a.q_token_stride + static_cast<int64_t>(h) * a.d_k, a.d_k,
                qv.data());
        float m = -kInf, l = 0.0f;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int k0 = 0; k0 < kv_len; k0 += kMmaKeys) {
          const int n = std::min(kMmaKeys, kv_len - k0);
          float m_new = m;
          for (int i = 0; i < n; ++i) {
            LoadRun(a.k.base, dtype, CacheOffset(a, a.k, table, k0 + i, kv), a.d_k, key.data());
            scores[i] = Dot(qv.data(), key.data(), a.d_k) * a.scale;
            m_new = std::fmax(m_new, scores[i]);
          }
          const float correction = std::exp(m - m_new);
          for (float& v : acc) v *= correction;
          float sum = 0.0f;
          for (int i = 0; i < n; ++i) {
            const float p = RoundTo(dtype, std::exp(scores[i] - m_new));
            sum += p;
            const int64_t v0 = CacheOffset(a, a.v, table, k0 + i, kv);
            for (int d = 0; d < a.d_v; ++d) acc[d] += p * Load(a.v.base, dtype, v0 + d);
          }
          l = l * correction + sum;
          m = m_new;
        }
        const int64_t o0 = qi * a.out_token_stride + static_cast<int64_t>(h) * a.d_v;
        for (int d = 0; d < a.d_v; ++d) Store(a.out, dtype, o0 + d, l > 0.0f ? acc[d] / l : 0.0f);
      }
    }
  }
}

// PagedAttentionDecode's work as its two kernels split it, through the caller's workspace:
// passes of `chunk` queries; per (query, head) the keys cut into DecodeSplits splits of
// DecodeSplitLength keys, each split's partial (m, l, acc) written at ((query · heads + head)
// · kDecodeMaxSplits + split) · (d_v + 2), then the merge over the splits in order.
void AttendDecode(const PagedAttentionArgs& all, DType dtype, float* workspace, int64_t chunk) {
  std::vector<float> qv(static_cast<size_t>(all.d_k));
  const int64_t stride = all.d_v + 2;
  for (int64_t q0 = 0; q0 < all.queries; q0 += chunk) {
    const PagedAttentionArgs a = QueryRange(all, q0, std::min(chunk, all.queries - q0), dtype);
    for (int64_t qi = 0; qi < a.queries; ++qi) {
      const int count = a.selected ? a.selected_per_query : a.query_kv_len[qi];
      const int splits = DecodeSplits(count);
      const int len = DecodeSplitLength(count, splits);
      for (int h = 0; h < a.heads; ++h) {
        LoadRun(a.q, dtype, qi * a.q_token_stride + static_cast<int64_t>(h) * a.d_k, a.d_k,
                qv.data());
        float* p = workspace + (qi * a.heads + h) * kDecodeMaxSplits * stride;
        for (int s = 0; s < splits; ++s) {
          AttendKeys(a, dtype, qi, a.query_seq[qi], h, s * len, std::min(count, (s + 1) * len),
                     qv.data(), p + s * stride);
        }
        StoreMerged(a, dtype, qi, h, p, splits, stride);
      }
    }
  }
}

}  // namespace

absl::Status PagedAttention(const PagedAttentionArgs& a, DType dtype, cudaStream_t stream) {
  int per_lane = 0;
  absl::StatusOr<LaunchConfig> c = CheckPagedAttention(a, &per_lane);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] { Attend(a, dtype, /*tiled=*/false); });
  return absl::OkStatus();
}

absl::Status PagedAttentionDecode(const PagedAttentionArgs& a, float* workspace,
                                  int64_t workspace_floats, DType dtype, cudaStream_t stream) {
  int per_lane = 0;
  int64_t chunk = 0;
  absl::StatusOr<LaunchConfig> c =
      CheckDecodeAttention(a, workspace, workspace_floats, &per_lane, &chunk);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] { AttendDecode(a, dtype, workspace, chunk); });
  return absl::OkStatus();
}

absl::Status PagedAttentionTiled(const PagedAttentionArgs& a, DType dtype, cudaStream_t stream) {
  int per_lane = 0;
  absl::StatusOr<LaunchConfig> c = CheckTiledAttention(a, &per_lane);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] { Attend(a, dtype, /*tiled=*/true); });
  return absl::OkStatus();
}

absl::Status PagedAttentionMma(const PagedAttentionArgs& a, DType dtype, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckMmaAttention(a, dtype, CurrentDeviceLimits());
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] { AttendMma(a, dtype); });
  return absl::OkStatus();
}

absl::Status WriteKvCache(const KvWriteArgs& a, DType dtype, cudaStream_t stream) {
  if (absl::Status s = CheckWriteKvCache(a); !s.ok()) return s;
  emu::Launch(stream, [=] {
    const size_t elem = DTypeBytes(dtype);
    for (int64_t t = 0; t < a.tokens; ++t) {
      const int64_t slot = a.slot_mapping[t];
      if (slot < 0) continue;  // padding
      for (int g = 0; g < a.kv_heads; ++g) {
        const int64_t src = t * a.src_token_stride + static_cast<int64_t>(g) * a.width;
        const int64_t dst = (slot / a.block_size) * a.block_stride +
                            (slot % a.block_size) * a.token_stride +
                            static_cast<int64_t>(g) * a.head_stride;
        std::memmove(static_cast<uint8_t*>(a.cache) + dst * elem,
                     static_cast<const uint8_t*>(a.src) + src * elem, a.width * elem);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status IndexerScores(const IndexerScoreArgs& a, cudaStream_t stream) {
  absl::StatusOr<size_t> shared = CheckIndexerScores(a);
  if (!shared.ok()) return shared.status();
  emu::Launch(stream, [=] {
    const auto* kbase = static_cast<const float*>(a.keys.base);
    for (int64_t qi = 0; qi < a.queries; ++qi) {
      const int kv_len = a.query_kv_len[qi];
      const int32_t* table = a.block_table + static_cast<int64_t>(a.query_seq[qi]) * a.max_blocks;
      const float* q = a.q + qi * a.heads * a.dim;
      for (int64_t j = 0; j < a.n_keys; ++j) {
        float score = -kInf;
        if (j < kv_len) {
          const float* k = kbase + table[j / a.block_size] * a.keys.block_stride +
                           (j % a.block_size) * a.keys.token_stride;
          score = 0.0f;
          for (int h = 0; h < a.heads; ++h) {
            float dot = 0.0f;
            for (int d = 0; d < a.dim; ++d) dot += q[h * a.dim + d] * k[d];
            score += a.weights[qi * a.heads + h] * std::fmax(dot, 0.0f);
          }
        }
        a.scores[qi * a.n_keys + j] = score;
      }
    }
  });
  return absl::OkStatus();
}

// ---- selection_kernels.h ----------------------------------------------------------------------

absl::Status TopK(const float* scores, int64_t rows, int64_t n, int64_t k, const int32_t* lengths,
                  int32_t* out, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckTopK(rows, n, k);
  if (!c.ok()) return c.status();
  const int kk_max = static_cast<int>(std::min<int64_t>(k, INT32_MAX));
  emu::Launch(stream, [=] {
    auto all = [](int) { return true; };
    auto unit = [](int) { return 1.0; };
    for (int64_t r = 0; r < rows; ++r) {
      const float* x = scores + r * n;
      int32_t* o = out + r * kk_max;
      const int len = static_cast<int>(
          lengths ? std::min(static_cast<int64_t>(std::max(lengths[r], 0)), n) : n);
      const int kk = std::min(kk_max, len);
      for (int i = kk; i < kk_max; ++i) o[i] = -1;
      if (kk == 0) continue;
      uint32_t threshold = 0;
      double above = 0.0;
      int cut = INT_MAX;  // every element is kept when kk == len
      if (kk < len) {
        RadixSelect(len, x, all, unit, static_cast<double>(kk), &threshold, &above);
        cut = TieCut(len, x, all, unit, threshold, kk - above);
      }
      int written = 0;
      for (int i = 0; i < len && written < kk; ++i) {
        const uint32_t key = OrderKey(x[i]);
        if (kk == len || key > threshold || (key == threshold && i <= cut)) o[written++] = i;
      }
    }
  });
  return absl::OkStatus();
}

namespace {

// moe_routing.cu's ArgMax: the highest value, the lowest index among equals; NaN never
// chosen. INT_MAX when every value is NaN.
int ArgMax(const float* values, int n) {
  float best = -kInf;
  int at = INT_MAX;
  for (int i = 0; i < n; ++i) {
    if (values[i] > best || (values[i] == best && i < at)) {
      best = values[i];
      at = i;
    }
  }
  return at;
}

// One token of MoeRouteKernel (spec 5.6 steps 2-8).
void RouteToken(const MoeRoutingArgs& a, int64_t t) {
  const int E = a.experts;
  const float* z = a.logits + t * E;
  std::vector<float> p(static_cast<size_t>(E)), q(static_cast<size_t>(E));
  if (a.gating == MoeGating::kSoftmax) {
    float m = -kInf;
    for (int e = 0; e < E; ++e) m = std::fmax(m, z[e]);
    float sum = 0.0f;
    for (int e = 0; e < E; ++e) sum += std::exp(z[e] - m);
    for (int e = 0; e < E; ++e) p[e] = std::exp(z[e] - m) / sum;
  } else {
    for (int e = 0; e < E; ++e) p[e] = 1.0f / (1.0f + std::exp(-z[e]));
  }
  for (int e = 0; e < E; ++e) q[e] = p[e] + (a.bias ? a.bias[e] : 0.0f);
  if (a.groups > 1) {
    const int size = E / a.groups;
    std::vector<float> g(static_cast<size_t>(a.groups));
    for (int gi = 0; gi < a.groups; ++gi) {
      float best = -kInf, second = -kInf;
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
    // Chosen groups become NaN; what is NaN at the end was kept.
    for (int r = 0; r < a.topk_groups; ++r) {
      const int gi = ArgMax(g.data(), a.groups);
      if (gi == INT_MAX) break;
      g[gi] = NAN;
    }
    for (int e = 0; e < E; ++e) {
      if (!std::isnan(g[e / size])) q[e] = -kInf;
    }
  }
  std::vector<float> w(static_cast<size_t>(a.used));
  float sum = 0.0f;
  for (int j = 0; j < a.used; ++j) {
    const int e = ArgMax(q.data(), E);
    // Only NaN scores are left (NaN logits): no expert, as moe_routing.cu: −1 (which
    // GroupedGemv turns into zeros) with weight 0.
    if (e == INT_MAX) {
      a.ids[t * a.used + j] = -1;
      w[j] = 0.0f;
      continue;
    }
    a.ids[t * a.used + j] = e;
    w[j] = p[e];
    q[e] = NAN;
    sum += w[j];
  }
  for (int j = 0; j < a.used; ++j) {
    float v = w[j];
    if (a.norm_weights) v /= std::fmax(sum, static_cast<float>(model::kExpertWeightSumFloor));
    if (a.weights_scale != 0.0f && a.weights_scale != 1.0f) v *= a.weights_scale;
    a.weights[t * a.used + j] = v;
  }
}

// NaN counts as −inf and +inf as the largest float (sampling.cu's Clean).
float Clean(float v) {
  if (std::isnan(v)) return -kInf;
  return v == kInf ? FLT_MAX : v;
}

// One sequence of SampleKernel.
int32_t SampleOne(const float* x, int vocab, const GpuSamplingParams& p) {
  float max = -kInf;
  int best = INT_MAX;
  for (int i = 0; i < vocab; ++i) {
    const float v = Clean(x[i]);
    if (v > max || (v == max && i < best)) {
      max = v;
      best = i;
    }
  }
  if (p.temperature < 1e-5f || max == -kInf) return best == INT_MAX ? 0 : best;
  auto all = [](int) { return true; };
  auto unit = [](int) { return 1.0; };
  Cut top_k;
  if (p.top_k > 0 && p.top_k < vocab) {
    double above = 0.0;
    RadixSelect(vocab, x, all, unit, p.top_k, &top_k.threshold, &above);
    top_k.tie_cut = TieCut(vocab, x, all, unit, top_k.threshold, p.top_k - above);
  }
  Cut top_p;
  if (p.top_p < 1.0f) {
    auto in_k = [&](int i) { return top_k.Pass(x, i); };
    auto w1 = [&](int i) { return static_cast<double>(std::exp(Clean(x[i]) - max)); };
    double z = 0.0;
    for (int i = 0; i < vocab; ++i) z += in_k(i) ? w1(i) : 0.0;
    const double target = static_cast<double>(p.top_p) * z;
    double above = 0.0;
    RadixSelect(vocab, x, in_k, w1, target, &top_p.threshold, &above);
    top_p.tie_cut = TieCut(vocab, x, in_k, w1, top_p.threshold, target - above);
  }
  const float inv_t = 1.0f / p.temperature;
  auto weight = [&](int i) {
    const bool survives = top_k.Pass(x, i) && top_p.Pass(x, i) &&
                          (p.min_p <= 0.0f || std::exp(Clean(x[i]) - max) >= p.min_p);
    return survives ? static_cast<double>(std::exp((Clean(x[i]) - max) * inv_t)) : 0.0;
  };
  double total = 0.0;
  for (int i = 0; i < vocab; ++i) total += weight(i);
  const double target = p.uniform * total;
  double running = 0.0;
  int last = best;
  for (int i = 0; i < vocab; ++i) {
    const double w = weight(i);
    if (w <= 0.0) continue;
    running += w;
    if (running > target) return i;
    last = std::max(last, i);
  }
  return last;  // rounding left u·total unreached: the last survivor
}

}  // namespace

absl::Status MoeRoute(const MoeRoutingArgs& a, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckMoeRoute(a);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] {
    for (int64_t t = 0; t < a.tokens; ++t) RouteToken(a, t);
  });
  return absl::OkStatus();
}

absl::Status ChosenLogprobs(const float* logits, int64_t sequences, int64_t vocab,
                            const int32_t* tokens, float* logprobs, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckSample(sequences, vocab, logits, logprobs, tokens);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] {
    auto clean = [](float v) { return std::isnan(v) ? -kInf : (v == kInf ? FLT_MAX : v); };
    for (int64_t s = 0; s < sequences; ++s) {
      const float* x = logits + s * vocab;
      float m = -kInf;
      for (int64_t i = 0; i < vocab; ++i) m = std::fmax(m, clean(x[i]));
      double z = 0.0;
      for (int64_t i = 0; i < vocab; ++i) z += static_cast<double>(std::exp(clean(x[i]) - m));
      const int32_t t = tokens[s];
      logprobs[s] = t < 0 || t >= vocab
                        ? std::numeric_limits<float>::quiet_NaN()
                        : static_cast<float>(static_cast<double>(clean(x[t]) - m) - std::log(z));
    }
  });
  return absl::OkStatus();
}

absl::Status Sample(const float* logits, int64_t sequences, int64_t vocab,
                    const GpuSamplingParams* params, int32_t* tokens, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckSample(sequences, vocab, logits, params, tokens);
  if (!c.ok()) return c.status();
  emu::Launch(stream, [=] {
    for (int64_t s = 0; s < sequences; ++s) {
      tokens[s] = SampleOne(logits + s * vocab, static_cast<int>(vocab), params[s]);
    }
  });
  return absl::OkStatus();
}

// ---- glue_kernels.h ---------------------------------------------------------------------------

absl::Status AddBias(void* y, const float* bias, int64_t rows, int64_t n, DType dtype,
                     cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckAddBias(y, bias, rows, n);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  const int64_t total = rows * n;
  emu::Launch(stream, [=] {
    for (int64_t i = 0; i < total; ++i) Store(y, dtype, i, Load(y, dtype, i) + bias[i % n]);
  });
  return absl::OkStatus();
}

absl::Status RmsNormStrided(const void* x, int64_t x_stride, const float* w, int64_t rows,
                            int64_t n, float eps, DType dtype, void* y, int64_t y_stride,
                            cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckRmsNormStrided(x, x_stride, rows, n, y, y_stride);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  const int threads = c->block;
  emu::Launch(stream, [=] {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t in = r * x_stride, out = r * y_stride;
      const float sum = BlockSum(n, threads, [&](int64_t i) {
        const float v = Load(x, dtype, in + i);
        return v * v;
      });
      const float scale = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
      for (int64_t i = 0; i < n; ++i) {
        const float v = Load(x, dtype, in + i) * scale;
        Store(y, dtype, out + i, w ? v * w[i] : v);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status LayerNormF32(const float* x, const float* w, const float* b, int64_t rows, int64_t n,
                          float eps, float* y, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckLayerNorm(x, rows, n, y);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  const int threads = c->block;
  emu::Launch(stream, [=] {
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x + r * n;
      float* out = y + r * n;
      const float mean =
          BlockSum(n, threads, [&](int64_t i) { return row[i]; }) / static_cast<float>(n);
      const float squares = BlockSum(n, threads, [&](int64_t i) {
        const float d = row[i] - mean;
        return d * d;
      });
      const float inv = 1.0f / std::sqrt(squares / static_cast<float>(n) + eps);
      for (int64_t i = 0; i < n; ++i) {
        const float v = (row[i] - mean) * inv;
        out[i] = (w ? v * w[i] : v) + (b ? b[i] : 0.0f);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status Convert(const void* src, DType from, void* dst, DType to, int64_t n,
                     cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckConvert(src, from, dst, to, n);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  emu::Launch(stream, [=] {
    if (from == to) {  // the real launcher's cudaMemcpyAsync: every bit kept
      std::memcpy(dst, src, static_cast<size_t>(n) * DTypeBytes(from));
      return;
    }
    for (int64_t i = 0; i < n; ++i) Store(dst, to, i, Load(src, from, i));
  });
  return absl::OkStatus();
}

absl::Status CopyRows(const void* src, int64_t src_stride, void* dst, int64_t dst_stride,
                      int64_t rows, int64_t width, DType dtype, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckCopyRows(src, src_stride, dst, dst_stride, rows, width);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  emu::Launch(stream, [=] {
    const size_t elem = DTypeBytes(dtype);
    for (int64_t r = 0; r < rows; ++r) {
      std::memmove(static_cast<uint8_t*>(dst) + r * dst_stride * elem,
                   static_cast<const uint8_t*>(src) + r * src_stride * elem, width * elem);
    }
  });
  return absl::OkStatus();
}

absl::Status GatherRowsByIndex(const void* src, const int32_t* index, int64_t count, int64_t n,
                               DType dtype, void* dst, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckGatherRowsByIndex(src, index, count, n, dst);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  emu::Launch(stream, [=] {
    const size_t elem = DTypeBytes(dtype);
    for (int64_t i = 0; i < count; ++i) {
      const int32_t id = index[i];
      uint8_t* out = static_cast<uint8_t*>(dst) + i * n * elem;
      if (id < 0) {
        std::memset(out, 0, n * elem);  // +0 in every dtype
      } else {
        std::memmove(out, static_cast<const uint8_t*>(src) + id * n * elem, n * elem);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status Scale(float* x, int64_t n, float s, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckScale(x, n);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  emu::Launch(stream, [=] {
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
  });
  return absl::OkStatus();
}

absl::Status FillHeadIds(int32_t* ids, int64_t tokens, int used, cudaStream_t stream) {
  absl::StatusOr<LaunchConfig> c = CheckFillHeadIds(ids, tokens, used);
  if (!c.ok() || c->grid_x == 0) return c.status();  // 0: nothing to launch
  const int64_t total = tokens * used;
  emu::Launch(stream, [=] {
    for (int64_t i = 0; i < total; ++i) ids[i] = static_cast<int32_t>(i % used);
  });
  return absl::OkStatus();
}

}  // namespace tessera::cuda
