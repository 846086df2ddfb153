#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/quant/blocks.h"
#include "common/quant/type_traits.h"
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/decode_panels.h"
#include "kernels/cpu/dequantize_fast.h"
#include "kernels/cpu/int8_gemm.h"
#include "kernels/cpu/kernels_avx2.h"
#include "kernels/cpu/kernels_avx512.h"

namespace tessera::cpu {
namespace {

using FloatGemmFn = void (*)(const float* w, int64_t ldw, int64_t rows, const float* x, int64_t ldx,
                             int64_t batch, int64_t n, float* y, int64_t ldy);

void ScalarFloatGemm(const float* w, int64_t ldw, int64_t rows, const float* x, int64_t ldx,
                     int64_t batch, int64_t n, float* y, int64_t ldy) {
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t r = 0; r < rows; ++r) {
      float s = 0.0f;
      for (int64_t k = 0; k < n; ++k) s += w[r * ldw + k] * x[b * ldx + k];
      y[b * ldy + r] = s;
    }
  }
}

bool AtLeast(Isa isa, Isa level) {
  return static_cast<int>(isa) >= static_cast<int>(level) && IsaSupported(level);
}

// Rows per task: enough tasks for dynamic balancing, few enough to amortise hand-out.
int64_t RowsPerTask(int64_t rows, int threads, int64_t max_rows) {
  const int64_t want_tasks = static_cast<int64_t>(threads) * 8;
  return std::clamp<int64_t>(rows / want_tasks, 1, max_rows);
}

// The most vectors one weight-row pass of `type`'s integer dots takes at `isa`: 8 with the
// AVX-512 VNNI dots (q4_K, q5_K, q6_K), else 4.
int MaxDotVectors(gguf::GgmlType type, Isa isa) {
  return AtLeast(isa, Isa::kAvx512) && avx512::IntegerDots(type) != nullptr ? avx512::kMaxDotVectors
                                                                            : avx2::kMaxDotVectors;
}

// The integer dots' vectors per weight-row pass for `type` (calibrated, else the most).
int DotVectors(gguf::GgmlType type, const MatmulOptions& options) {
  const auto id = static_cast<size_t>(type);
  const int n = id < options.dot_vectors.size() ? options.dot_vectors[id] : 0;
  const int most = MaxDotVectors(type, options.isa);
  return n == 0 ? most : std::clamp(n, 1, most);
}

// Integer dots of rows [row_begin, row_end) with activations already quantized: each
// weight row meets up to `max_vectors` vectors per pass (decoded once for all of them).
// A single vector takes the AVX-512 one-vector dot where `isa` allows and the type has one
// (the same bits).
void IntegerDotRows(const QuantMatrix& w, int64_t row_begin, int64_t row_end,
                    const QuantizedActivations& xq, float* y, int64_t ldy, ThreadPool* pool,
                    int max_vectors, Isa isa) {
  const avx2::VecDotManyFn dots = avx2::IntegerDots(w.type);
  const avx512::OneDotFn one = AtLeast(isa, Isa::kAvx512) ? avx512::IntegerDot(w.type) : nullptr;
  // Rows of an odd number of blocks leave a half of the one-vector dot's last register idle;
  // two rows at a time fill it (q4_K with 768 columns: 1.17x from memory; with an even number
  // of blocks two rows measured slower, 0.77x, and so did q6_K).
  const avx512::TwoRowDotFn two = AtLeast(isa, Isa::kAvx512) && (w.cols / quant::kQKK) % 2 == 1
                                      ? avx512::IntegerDot2(w.type)
                                      : nullptr;
  // One to eight vectors with one VNNI kernel (q4_K, q5_K, q6_K), each block unpacked once for all
  // (the same bits; on Zen 4 from two vectors on faster than the AVX2 dots, and than the
  // earlier AVX-512 two-vector dots, which were slower than AVX2 there: quant_bench
  // DecodeInCache).
  static_assert(avx512::kMaxDotVectors >= avx2::kMaxDotVectors);
  const avx512::ManyDotFn many = AtLeast(isa, Isa::kAvx512) ? avx512::IntegerDots(w.type) : nullptr;
  max_vectors = std::min(max_vectors, MaxDotVectors(w.type, isa));
  const int64_t batch = xq.batch;
  const int threads = pool ? pool->size() : 1;
  // Rows one at a time, [r0, r1).
  auto dot_rows = [&](int64_t r0, int64_t r1) {
    float out[avx512::kMaxDotVectors];
    for (int64_t b0 = 0; b0 < batch; b0 += max_vectors) {
      const int nb = static_cast<int>(std::min<int64_t>(max_vectors, batch - b0));
      for (int64_t r = r0; r < r1; ++r) {
        if (nb == 1 && two != nullptr && r + 1 < r1) {
          two(w.data + r * w.row_bytes, w.data + (r + 1) * w.row_bytes, xq.row(b0), w.cols, out);
          y[b0 * ldy + (r - row_begin)] = out[0];
          y[b0 * ldy + (r + 1 - row_begin)] = out[1];
          ++r;
          continue;
        }
        if (nb == 1 && one != nullptr) {
          y[b0 * ldy + (r - row_begin)] = one(w.data + r * w.row_bytes, xq.row(b0), w.cols);
          continue;
        }
        if (many != nullptr) {
          many(w.data + r * w.row_bytes, xq.row(b0), xq.row_bytes, nb, w.cols, out);
          for (int b = 0; b < nb; ++b) y[(b0 + b) * ldy + (r - row_begin)] = out[b];
          continue;
        }
        dots(w.data + r * w.row_bytes, xq.row(b0), xq.row_bytes, nb, w.cols, out);
        for (int b = 0; b < nb; ++b) y[(b0 + b) * ldy + (r - row_begin)] = out[b];
      }
    }
  };
  // The whole decode panels of the range, [panel_begin, panel_end) of w.decode_panels, and
  // the rows before and after them, which go row by row.
  int64_t panel_begin = 0, panel_end = 0;
  const avx512::PanelDotsFn panel_dots = w.decode_panels != nullptr && AtLeast(isa, Isa::kAvx512)
                                             ? avx512::DecodePanelDots(w.type)
                                             : nullptr;
  if (const DecodePanelMatrix* panels = w.decode_panels;
      panel_dots != nullptr && panels->type() == w.type && panels->cols() == w.cols) {
    const int64_t first = w.decode_panels_row0 + row_begin;
    panel_begin = (first + kDecodePanelRows - 1) / kDecodePanelRows;
    panel_end = std::min(panels->panels(), (w.decode_panels_row0 + row_end) / kDecodePanelRows);
    if (panel_end < panel_begin) panel_end = panel_begin;
  }
  const int64_t n_panels = panel_end - panel_begin;
  if (n_panels > 0) {
    const DecodePanelMatrix& panels = *w.decode_panels;
    const int64_t panel_row_begin = panel_begin * kDecodePanelRows - w.decode_panels_row0;
    const int64_t panel_row_end = panel_end * kDecodePanelRows - w.decode_panels_row0;
    const int64_t per_task = std::max<int64_t>(
        1, RowsPerTask(n_panels * kDecodePanelRows, threads, 64) / kDecodePanelRows);
    const int64_t panel_tasks = (n_panels + per_task - 1) / per_task;
    // Task t < panel_tasks: panels; then one task for the rows before the panels and one for
    // those after.
    auto task = [&](int64_t t, int) {
      if (t == panel_tasks) return dot_rows(row_begin, panel_row_begin);
      if (t == panel_tasks + 1) return dot_rows(panel_row_end, row_end);
      const int64_t p1 = std::min(panel_end, panel_begin + (t + 1) * per_task);
      for (int64_t p = panel_begin + t * per_task; p < p1; ++p) {
        const int64_t r = p * kDecodePanelRows - w.decode_panels_row0 - row_begin;
        for (int64_t b0 = 0; b0 < batch; b0 += avx512::kMaxDotVectors) {
          const int nb = static_cast<int>(std::min<int64_t>(avx512::kMaxDotVectors, batch - b0));
          panel_dots(panels.panel(p), w.cols, xq.row(b0), xq.row_bytes, nb, y + b0 * ldy + r, ldy);
        }
      }
    };
    if (pool) {
      pool->ParallelFor(panel_tasks + 2, task);
    } else {
      for (int64_t t = 0; t < panel_tasks + 2; ++t) task(t, 0);
    }
    return;
  }
  const int64_t n_rows = row_end - row_begin;
  const int64_t chunk = RowsPerTask(n_rows, threads, 64);
  auto task = [&](int64_t t, int) {
    const int64_t r0 = row_begin + t * chunk;
    dot_rows(r0, std::min(row_end, r0 + chunk));
  };
  const int64_t n_tasks = (n_rows + chunk - 1) / chunk;
  if (pool) {
    pool->ParallelFor(n_tasks, task);
  } else {
    for (int64_t t = 0; t < n_tasks; ++t) task(t, 0);
  }
}

void IntegerMatmul(const QuantMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                   int64_t batch, float* y, int64_t ldy, ThreadPool* pool,
                   const MatmulOptions& options) {
  // The AVX2 kernels serve both levels, except single vectors of q4_K and q6_K, whose
  // AVX-512 dots (two blocks per register) measured 1.3-1.6x faster on Zen 5.
  thread_local QuantizedActivations xq;
  QuantizeActivations(ActivationFormat(w.type), x, batch, w.cols, &xq);
  IntegerDotRows(w, row_begin, row_end, xq, y, ldy, pool, DotVectors(w.type, options), options.isa);
}

// Scratch of the products one thread issues, kept from product to product: allocated
// afresh, the multi-megabyte activation batch cost page faults and zero fills on every
// call. Pool workers index the per-thread parts by their pool thread number; take the
// reference on the calling thread (a thread_local named inside a task is the worker's).
struct Workspace {
  Int8ActivationBuffer acts;
  std::vector<std::array<Int8PanelBuffer, 2>> panels;
  std::vector<ScratchArray<float>> float_panels;
};

Workspace& CallerWorkspace(int threads) {
  thread_local Workspace ws;
  if (ws.panels.size() < static_cast<size_t>(threads)) {
    ws.panels.resize(threads);
    ws.float_panels.resize(threads);
  }
  return ws;
}

// w's packed panels when a product of its rows from `row_begin` can read them (its tiles
// start on panel boundaries, and the panels are of `layout` and hold the rows), else null.
const PackedInt8Matrix* PackedFor(const QuantMatrix& w, int64_t row_begin,
                                  const Int8GemmLayout& layout) {
  const PackedInt8Matrix* p = w.packed;
  if (p == nullptr || (w.packed_row0 + row_begin) % kInt8PanelRows != 0 ||
      &p->layout() != &layout || p->cols() != w.cols || w.packed_row0 < 0 ||
      w.packed_row0 + w.rows > p->rows()) {
    return nullptr;
  }
  return p;
}

// Prefill with the int8 GEMM: the batch is quantized once (rows split over the pool), then
// each task unpacks 32 weight rows into two panels and multiplies them with every token.
void Int8GemmMatmul(const Int8GemmLayout& layout, const QuantMatrix& w, int64_t row_begin,
                    int64_t row_end, const float* x, int64_t batch, float* y, int64_t ldy,
                    ThreadPool* pool) {
  const int threads = pool ? pool->size() : 1;
  auto run = [pool](int64_t n_tasks, const std::function<void(int64_t, int)>& task) {
    if (pool) {
      pool->ParallelFor(n_tasks, task);
    } else {
      for (int64_t t = 0; t < n_tasks; ++t) task(t, 0);
    }
  };
  Workspace& ws = CallerWorkspace(threads);
  Int8ActivationBuffer& acts = ws.acts;
  acts.Reset(layout, batch, w.cols);
  // A small batch (an expert's few tokens) is quantized on the caller: a pool hand-off
  // costs more than the work.
  constexpr int64_t kParallelQuantize = int64_t{1} << 18;  // elements
  if (batch * w.cols < kParallelQuantize) {
    acts.QuantizeRows(x, 0, batch, Isa::kAvx512);
  } else {
    const int64_t rows_per_task = (batch + 4 * threads - 1) / (4 * threads);
    run((batch + rows_per_task - 1) / rows_per_task, [&](int64_t t, int) {
      acts.QuantizeRows(x, t * rows_per_task, std::min(batch, (t + 1) * rows_per_task),
                        Isa::kAvx512);
    });
  }
  const Int8Activations a = acts.view();

  // Tiles start at row_begin + 32 t: on panel boundaries of the packed matrix, when there is
  // one, if row_begin is.
  const PackedInt8Matrix* packed = PackedFor(w, row_begin, layout);
  constexpr int64_t kTileRows = 2 * kInt8PanelRows;
  run((row_end - row_begin + kTileRows - 1) / kTileRows, [&](int64_t t, int thread) {
    const int64_t r0 = row_begin + t * kTileRows;
    const int rows = static_cast<int>(std::min(kTileRows, row_end - r0));
    Int8Panel views[2];
    for (int p = 0; p * kInt8PanelRows < rows; ++p) {
      if (packed != nullptr) {
        views[p] = packed->panel((w.packed_row0 + r0) / kInt8PanelRows + p);
        continue;
      }
      Int8PanelBuffer& buffer = ws.panels[thread][p];
      buffer.Unpack(layout, w.data + (r0 + p * kInt8PanelRows) * w.row_bytes, w.row_bytes,
                    std::min(kInt8PanelRows, rows - p * kInt8PanelRows), w.cols, Isa::kAvx512);
      views[p] = buffer.view();
    }
    avx512::Int8Gemm(layout, views, rows, a, y + (r0 - row_begin), ldy);
  });
}

// x (batch × n) transposed to n × ldxt with ldxt = batch rounded up to 16, zero padded.
std::vector<float> TransposeActivations(const float* x, int64_t batch, int64_t n, int64_t* ldxt) {
  *ldxt = (batch + 15) / 16 * 16;
  std::vector<float> xt(static_cast<size_t>(n * *ldxt), 0.0f);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < n; ++k) xt[k * *ldxt + b] = x[b * n + k];
  }
  return xt;
}

// F32 weights with a prefill batch (attention's K and Vᵀ, routers) on AVX-512: each task
// packs 32 rows into panels and multiplies them with a block of tokens read in place (no
// transpose of x, contiguous stores); tasks are row tiles × token blocks, so a matrix of
// few rows (Vᵀ has head-dim rows) still spreads over the threads.
void FloatPanelMatmul(const QuantMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                      int64_t batch, float* y, int64_t ldy, ThreadPool* pool) {
  constexpr int64_t kTileRows = 32, kTokenBlock = 384;
  const int threads = pool ? pool->size() : 1;
  const int64_t n_tiles = (row_end - row_begin + kTileRows - 1) / kTileRows;
  const int64_t n_blocks = (batch + kTokenBlock - 1) / kTokenBlock;
  std::vector<ScratchArray<float>>& scratch = CallerWorkspace(threads).float_panels;
  for (auto& s : scratch) s.Reserve(static_cast<size_t>(kTileRows * w.cols));
  auto task = [&](int64_t t, int thread) {
    // Consecutive tasks share a token block, which then stays in cache.
    const int64_t b0 = (t / n_tiles) * kTokenBlock, r0 = row_begin + (t % n_tiles) * kTileRows;
    const auto* rows = reinterpret_cast<const float*>(w.data + r0 * w.row_bytes);
    avx512::FloatGemmPanels(rows, w.cols, static_cast<int>(std::min(kTileRows, row_end - r0)),
                            x + b0 * w.cols, w.cols, std::min(kTokenBlock, batch - b0), w.cols,
                            y + b0 * ldy + (r0 - row_begin), ldy, scratch[thread].data());
  };
  if (pool) {
    pool->ParallelFor(n_tiles * n_blocks, task);
  } else {
    for (int64_t t = 0; t < n_tiles * n_blocks; ++t) task(t, 0);
  }
}

// `prefill_kernels`: the outer-product kernels (x transposed) instead of the dot-product form;
// both give each (row, vector) bits that do not depend on the batch, but not the same bits.
void FloatMatmul(const QuantMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                 int64_t batch, float* y, int64_t ldy, ThreadPool* pool, Isa isa,
                 bool prefill_kernels) {
  const DequantizeRowFn dequantize = FastDequantizer(w.type, isa);
  const bool direct = w.type == gguf::GgmlType::kF32;  // rows are already floats
  const int threads = pool ? pool->size() : 1;
  const int64_t n_rows = row_end - row_begin;
  // Prefill: outer-product kernels over x transposed once here (cheap next to the product).
  const bool prefill = prefill_kernels && AtLeast(isa, Isa::kAvx2);
  int64_t ldxt = 0;
  std::vector<float> xt;
  if (prefill) xt = TransposeActivations(x, batch, w.cols, &ldxt);
  const auto transposed_gemm =
      AtLeast(isa, Isa::kAvx512) ? avx512::FloatGemmTransposedX : avx2::FloatGemmTransposedX;
  const FloatGemmFn gemm = AtLeast(isa, Isa::kAvx512) ? avx512::FloatGemmDots
                           : AtLeast(isa, Isa::kAvx2) ? avx2::FloatGemm
                                                      : ScalarFloatGemm;
  // Long rows are multiplied in slices of kKChunk columns so that the slice of x (kKChunk ×
  // batch floats, 256 KiB at batch 64) stays in L2 while every row of the tile passes.
  constexpr int64_t kKChunk = 1024;
  const bool chunked = prefill && w.cols > kKChunk;
  // A tile of dequantized rows stays in L2 while every vector of the batch passes over it;
  // prefill tiles are multiples of the 6-row register tile.
  int64_t max_tile = std::clamp<int64_t>((512 * 1024 / 4) / w.cols, 1, prefill ? 24 : 16);
  if (chunked) max_tile = 24;
  if (prefill && max_tile >= 6) max_tile -= max_tile % 6;
  const int64_t tile = RowsPerTask(n_rows, threads, max_tile);
  std::vector<std::vector<float>> scratch(direct ? 0 : threads);
  for (auto& s : scratch) s.resize(static_cast<size_t>(tile * w.cols));
  std::vector<std::vector<float>> partial(chunked ? threads : 0);
  for (auto& p : partial) p.resize(static_cast<size_t>(tile * batch));
  auto task = [&](int64_t t, int thread) {
    const int64_t r0 = row_begin + t * tile;
    const int64_t rows = std::min(row_end, r0 + tile) - r0;
    const float* tile_w;
    if (direct) {
      tile_w = reinterpret_cast<const float*>(w.data + r0 * w.row_bytes);
    } else {
      float* buf = scratch[thread].data();
      for (int64_t i = 0; i < rows; ++i) {
        dequantize(w.data + (r0 + i) * w.row_bytes, buf + i * w.cols, w.cols);
      }
      tile_w = buf;
    }
    float* y_tile = y + (r0 - row_begin);
    if (chunked) {
      float* part = partial[thread].data();
      for (int64_t k0 = 0; k0 < w.cols; k0 += kKChunk) {
        const int64_t kc = std::min(kKChunk, w.cols - k0);
        const bool first = k0 == 0;
        transposed_gemm(tile_w + k0, w.cols, rows, xt.data() + k0 * ldxt, ldxt, batch, kc,
                        first ? y_tile : part, first ? ldy : rows);
        if (first) continue;
        for (int64_t b = 0; b < batch; ++b) {
          for (int64_t r = 0; r < rows; ++r) y_tile[b * ldy + r] += part[b * rows + r];
        }
      }
    } else if (prefill) {
      transposed_gemm(tile_w, w.cols, rows, xt.data(), ldxt, batch, w.cols, y_tile, ldy);
    } else {
      gemm(tile_w, w.cols, rows, x, w.cols, batch, w.cols, y_tile, ldy);
    }
  };
  const int64_t n_tasks = (n_rows + tile - 1) / tile;
  if (pool) {
    pool->ParallelFor(n_tasks, task);
  } else {
    for (int64_t t = 0; t < n_tasks; ++t) task(t, 0);
  }
}

enum class Kernel { kIntegerDots, kInt8Gemm, kFloat };

constexpr int64_t kDotsGemmBatch = 16;

// True when the int8 GEMM covers `type` at options.isa.
bool GemmCovers(gguf::GgmlType type, const MatmulOptions& options) {
  return FindInt8GemmLayout(type) != nullptr && AtLeast(options.isa, Isa::kAvx512);
}

// True when calibration chose the float path for `type`'s prefill products.
bool MeasuredFloat(gguf::GgmlType type, const MatmulOptions& options) {
  const auto id = static_cast<uint32_t>(type);
  return id < 64 && ((options.float_prefill_types >> id) & 1) != 0;
}

// `packed`: the matrix has packed panels the product can read (PackedFor).
Kernel ChooseKernel(gguf::GgmlType type, int64_t batch, const MatmulOptions& options,
                    bool packed = false) {
  if (options.path == MatmulPath::kFloat) return Kernel::kFloat;
  const auto id = static_cast<uint32_t>(type);
  const bool has_gemm = GemmCovers(type, options);
  // The int8 GEMM gives every (row, vector) the bits of the integer dots, and from 16
  // vectors on it is faster (each weight panel is unpacked once for all; at 8 the head's
  // q6_K measured slower, the FFN's q4_K faster); with packed panels, from fewer (measured).
  int64_t from =
      id < 64 && options.dots_gemm_batch[id] != 0 ? options.dots_gemm_batch[id] : kDotsGemmBatch;
  if (packed && id < 64 && options.packed_gemm_batch[id] != 0) {
    from = std::min<int64_t>(from, options.packed_gemm_batch[id]);
  }
  const bool same_bits_gemm = has_gemm && HasIntegerKernel(type, options.isa);
  if (options.path == MatmulPath::kDots) {
    if (batch >= from && same_bits_gemm) return Kernel::kInt8Gemm;
    return HasIntegerKernel(type, options.isa) ? Kernel::kIntegerDots : Kernel::kFloat;
  }
  const bool gemm = has_gemm && !MeasuredFloat(type, options) &&
                    (batch >= kPrefillBatch || (packed && same_bits_gemm && batch >= from));
  if (gemm) return Kernel::kInt8Gemm;
  const bool dots = options.path == MatmulPath::kInteger || batch < kPrefillBatch;
  return dots && HasIntegerKernel(type, options.isa) ? Kernel::kIntegerDots : Kernel::kFloat;
}

}  // namespace

absl::StatusOr<QuantMatrix> QuantMatrix::Make(gguf::GgmlType type, int64_t rows, int64_t cols,
                                              absl::Span<const uint8_t> bytes,
                                              const std::string& name) {
  if (absl::Status s = quant::CheckTypeSupported(static_cast<uint32_t>(type), name); !s.ok()) {
    return s;
  }
  if (absl::Status s = quant::CheckRowLength(type, cols, name); !s.ok()) return s;
  if (rows <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": ", rows, " rows"));
  }
  const quant::QuantTraits* t = quant::FindQuantTraits(type);
  const size_t row_bytes = static_cast<size_t>(cols / t->block_elems) * t->block_bytes;
  if (bytes.size() / row_bytes != static_cast<size_t>(rows) || bytes.size() % row_bytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, ": ", rows, " rows of ", cols, " ", t->name,
                     " elements take ", row_bytes * rows, " bytes, have ", bytes.size()));
  }
  return QuantMatrix{type, rows, cols, row_bytes, bytes.data()};
}

absl::StatusOr<QuantMatrix> QuantMatrix::FromTensor(const gguf::TensorInfo& tensor,
                                                    absl::Span<const uint8_t> bytes) {
  if (tensor.dims.empty() || tensor.dims[0] <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", tensor.name, ": shape ", tensor.ShapeString(), " is no matrix"));
  }
  return Make(tensor.type, static_cast<int64_t>(tensor.rows()), tensor.dims[0], bytes, tensor.name);
}

bool RoundsActivations(gguf::GgmlType type, int64_t batch, const MatmulOptions& options) {
  return ChooseKernel(type, batch, options) != Kernel::kFloat;
}

bool DotsMatchAnyBatch(gguf::GgmlType type, const MatmulOptions& options) {
  if (options.path != MatmulPath::kAuto && options.path != MatmulPath::kDots) return false;
  // Not MeasuredFloat: the float path's bits depend on the batch (it multiplies unquantized
  // activations), so a batch-invariant caller keeps the same-bits kernels for every batch.
  return GemmCovers(type, options) && HasIntegerKernel(type, options.isa);
}

bool UsesIntegerDots(gguf::GgmlType type, int64_t batch, const MatmulOptions& options) {
  return ChooseKernel(type, batch, options) == Kernel::kIntegerDots;
}

bool UsesIntegerDots(const QuantMatrix& w, int64_t batch, const MatmulOptions& options) {
  const Int8GemmLayout* layout = FindInt8GemmLayout(w.type);
  const bool packed = layout != nullptr && PackedFor(w, 0, *layout) != nullptr;
  return ChooseKernel(w.type, batch, options, packed) == Kernel::kIntegerDots;
}

bool GemmPacksType(gguf::GgmlType type, const MatmulOptions& options) {
  return options.path != MatmulPath::kFloat && GemmCovers(type, options) &&
         HasIntegerKernel(type, options.isa) && !MeasuredFloat(type, options);
}

gguf::GgmlType ActivationFormat(gguf::GgmlType type) {
  const quant::QuantTraits* t = quant::FindQuantTraits(type);
  return t == nullptr ? gguf::GgmlType::kF32 : t->activation_type;
}

void QuantizeActivations(gguf::GgmlType format, const float* x, int64_t batch, int64_t cols,
                         QuantizedActivations* out) {
  const quant::QuantTraits* act = quant::FindQuantTraits(format);
  out->format = format;
  out->batch = batch;
  out->cols = cols;
  out->row_bytes = static_cast<size_t>(cols / act->block_elems) * act->block_bytes;
  // Q8_K carries a float, so the rows stay 4-byte aligned (row_bytes is a multiple of 4).
  out->storage.resize((batch * out->row_bytes + sizeof(float) - 1) / sizeof(float));
  const auto quantize =
      format == gguf::GgmlType::kQ8_K ? QuantizeActivationsQ8_K : QuantizeActivationsQ8_0;
  for (int64_t b = 0; b < batch; ++b) quantize(x + b * cols, out->row(b), cols);
}

absl::Status MatmulQuantized(const QuantMatrix& w, int64_t row_begin, int64_t row_end,
                             const QuantizedActivations& x, float* y, int64_t ldy, ThreadPool* pool,
                             const MatmulOptions& options) {
  if (row_begin < 0 || row_end > w.rows || row_begin >= row_end) {
    return absl::InvalidArgumentError(absl::StrCat("matmul: row range [", row_begin, ", ", row_end,
                                                   ") is not a non-empty part of [0, ", w.rows,
                                                   ")"));
  }
  if (!HasIntegerKernel(w.type) || ActivationFormat(w.type) != x.format || x.cols != w.cols ||
      ldy < row_end - row_begin) {
    return absl::InvalidArgumentError(absl::StrCat(
        "matmul: activations of ", x.cols, " columns in format ",
        gguf::GgmlTypeName(static_cast<uint32_t>(x.format)), " do not fit the integer kernel of a ",
        gguf::GgmlTypeName(static_cast<uint32_t>(w.type)), " matrix of ", w.cols, " columns (ldy ",
        ldy, ")"));
  }
  if (x.batch == 0) return absl::OkStatus();
  IntegerDotRows(w, row_begin, row_end, x, y, ldy, pool, DotVectors(w.type, options), options.isa);
  return absl::OkStatus();
}

bool HasIntegerKernel(gguf::GgmlType type, Isa isa) {
  return AtLeast(isa, Isa::kAvx2) && avx2::IntegerDot(type) != nullptr;
}

absl::Status Matmul(const QuantMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                    int64_t batch, float* y, int64_t ldy, ThreadPool* pool,
                    const MatmulOptions& options) {
  if (row_begin < 0 || row_end > w.rows || row_begin >= row_end) {
    return absl::InvalidArgumentError(absl::StrCat("matmul: row range [", row_begin, ", ", row_end,
                                                   ") is not a non-empty part of [0, ", w.rows,
                                                   ")"));
  }
  if (batch < 0 || ldy < row_end - row_begin) {
    return absl::InvalidArgumentError(absl::StrCat("matmul: batch ", batch, " / ldy ", ldy,
                                                   " invalid for ", row_end - row_begin,
                                                   " output rows"));
  }
  if (batch == 0) return absl::OkStatus();
  if ((row_end - row_begin) * w.cols * batch < options.min_parallel_macs) pool = nullptr;
  const Int8GemmLayout* layout = FindInt8GemmLayout(w.type);
  const bool packed = layout != nullptr && PackedFor(w, row_begin, *layout) != nullptr;
  // The batch the kernels are chosen for: kernel_batch where the caller fixes it, so that a
  // row's bits do not depend on how many rows share its product.
  const int64_t kernel_batch = options.kernel_batch > 0 ? options.kernel_batch : batch;
  switch (ChooseKernel(w.type, kernel_batch, options, packed)) {
    case Kernel::kIntegerDots:
      IntegerMatmul(w, row_begin, row_end, x, batch, y, ldy, pool, options);
      break;
    case Kernel::kInt8Gemm:
      Int8GemmMatmul(*layout, w, row_begin, row_end, x, batch, y, ldy, pool);
      break;
    case Kernel::kFloat: {
      // kDots keeps the dot-product form at every batch (each output depends on its own
      // vector only); otherwise a prefill batch takes the outer-product kernels.
      const bool prefill_kernels =
          kernel_batch >= kPrefillBatch && options.path != MatmulPath::kDots;
      if (w.type == gguf::GgmlType::kF32 && prefill_kernels && AtLeast(options.isa, Isa::kAvx512)) {
        FloatPanelMatmul(w, row_begin, row_end, x, batch, y, ldy, pool);
      } else {
        FloatMatmul(w, row_begin, row_end, x, batch, y, ldy, pool, options.isa, prefill_kernels);
      }
      break;
    }
  }
  return absl::OkStatus();
}

namespace {

// Best of `reps` wall times of fn(), in seconds.
template <typename Fn>
double BestSeconds(int reps, Fn fn) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

std::string CalibrateMatmul(const QuantMatrix& w, MatmulOptions* options) {
  const quant::QuantTraits* traits = quant::FindQuantTraits(w.type);
  std::string line = absl::StrCat(traits != nullptr ? traits->name : "?", " (", w.cols, " cols):");
  const int64_t rows = std::min<int64_t>(w.rows, 128);
  std::vector<float> x(static_cast<size_t>(64 * w.cols)), y(static_cast<size_t>(64 * rows));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>((i * 2654435761u) % 2001) / 1000 - 1;
  const auto id = static_cast<uint32_t>(w.type);
  if (id >= 64) return line + " not measured";
  // Prefill: the int8 GEMM against the float path, 64 tokens.
  const Int8GemmLayout* layout = FindInt8GemmLayout(w.type);
  if (GemmCovers(w.type, *options) && options->path == MatmulPath::kAuto) {
    constexpr int64_t kTokens = 64;
    Int8GemmMatmul(*layout, w, 0, rows, x.data(), kTokens, y.data(), rows, nullptr);  // warm
    const double gemm = BestSeconds(3, [&] {
      Int8GemmMatmul(*layout, w, 0, rows, x.data(), kTokens, y.data(), rows, nullptr);
    });
    const double flt = BestSeconds(3, [&] {
      FloatMatmul(w, 0, rows, x.data(), kTokens, y.data(), rows, nullptr, options->isa, true);
    });
    const double flops = 2.0 * rows * w.cols * kTokens;
    const bool use_float = flt * 1.15 < gemm;
    if (use_float) {
      options->float_prefill_types |= uint64_t{1} << id;
    } else {
      options->float_prefill_types &= ~(uint64_t{1} << id);
    }
    absl::StrAppend(&line, absl::StrFormat(" prefill %s (int8 GEMM %.0f, float %.0f GFLOP/s);",
                                           use_float ? "float" : "int8 GEMM", flops / gemm / 1e9,
                                           flops / flt / 1e9));
  }
  // Decode: vectors per pass over a weight row, 8 vectors.
  if (HasIntegerKernel(w.type, options->isa)) {
    constexpr int64_t kVectors = 8;
    QuantizedActivations xq;
    QuantizeActivations(ActivationFormat(w.type), x.data(), kVectors, w.cols, &xq);
    const double bytes = static_cast<double>(rows) * w.row_bytes * kVectors;
    const int most = MaxDotVectors(w.type, options->isa);
    int best = most;
    double best_s = 1e30;
    std::string rates;
    for (int nb : {most, 4, 2, 1}) {
      if (nb == 4 && most == 4) continue;
      IntegerDotRows(w, 0, rows, xq, y.data(), rows, nullptr, nb, options->isa);  // warm
      const double s = BestSeconds(
          3, [&] { IntegerDotRows(w, 0, rows, xq, y.data(), rows, nullptr, nb, options->isa); });
      absl::StrAppend(&rates, rates.empty() ? "" : ", ", nb, ": ",
                      absl::StrFormat("%.1f", bytes / s / 1e9));
      // Fewer vectors per pass only when clearly faster (the most is the default).
      if (s * 1.05 < best_s) {
        best_s = s;
        best = nb;
      }
    }
    options->dot_vectors[id] = static_cast<uint8_t>(best);
    absl::StrAppend(&line, " decode dots ", best, " vectors/pass (", rates,
                    " weight GB/s per vector count)");
    // Decode batches: from how many vectors the GEMM (same bits) beats the dots.
    if (GemmCovers(w.type, *options)) {
      int from = static_cast<int>(kDotsGemmBatch);
      std::string gains;
      for (int n : {8, 12}) {
        QuantizedActivations xn;
        QuantizeActivations(ActivationFormat(w.type), x.data(), n, w.cols, &xn);
        const double dots = BestSeconds(3, [&] {
          IntegerDotRows(w, 0, rows, xn, y.data(), rows, nullptr, best, options->isa);
        });
        const double gemm = BestSeconds(
            3, [&] { Int8GemmMatmul(*layout, w, 0, rows, x.data(), n, y.data(), rows, nullptr); });
        absl::StrAppend(&gains, gains.empty() ? "" : ", ", n, ": ",
                        absl::StrFormat("%.2fx", dots / gemm));
        if (gemm * 1.05 < dots && from == static_cast<int>(kDotsGemmBatch)) from = n;
      }
      options->dots_gemm_batch[id] = static_cast<uint8_t>(from);
      absl::StrAppend(&line, "; decode GEMM from ", from, " rows (its speed over the dots at ",
                      gains, ")");
    }
  }
  return line;
}

namespace {

// From how many vectors the int8 GEMM beats the integer dots over the matrices `sweep` (one
// type, in step order), each kernel timed over the whole sweep as a step does (the weights
// come from memory, not from the caches) at each count of `counts`: the first count where
// the GEMM is 5% faster, else `never`. Appends "n: dots/GEMM" per count measured to `gains`.
int SweepGemmAgainstDots(const std::vector<const QuantMatrix*>& sweep, const Int8GemmLayout& layout,
                         std::initializer_list<int> counts, int never, ThreadPool* pool,
                         const MatmulOptions& options, std::string* gains) {
  const gguf::GgmlType type = sweep[0]->type;
  int64_t max_rows = 0, max_cols = 0;
  for (const QuantMatrix* m : sweep) {
    max_rows = std::max(max_rows, m->rows);
    max_cols = std::max(max_cols, m->cols);
  }
  const int most = std::max(counts);
  std::vector<float> x(static_cast<size_t>(most * max_cols)),
      y(static_cast<size_t>(most * max_rows));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 40503u) % 1999) / 1000 - 1;
  const int vectors = DotVectors(type, options);
  QuantizedActivations xq;
  auto dots = [&](int64_t n) {
    for (const QuantMatrix* m : sweep) {
      QuantizeActivations(ActivationFormat(type), x.data(), n, m->cols, &xq);
      IntegerDotRows(*m, 0, m->rows, xq, y.data(), m->rows, pool, vectors, options.isa);
    }
  };
  auto gemm = [&](int64_t n) {
    for (const QuantMatrix* m : sweep) {
      Int8GemmMatmul(layout, *m, 0, m->rows, x.data(), n, y.data(), m->rows, pool);
    }
  };
  for (int n : counts) {
    dots(n);  // warm
    const double d = BestSeconds(2, [&] { dots(n); });
    gemm(n);
    const double g = BestSeconds(2, [&] { gemm(n); });
    absl::StrAppend(gains, gains->empty() ? "" : ", ", n, ": ", absl::StrFormat("%.2fx", d / g));
    if (g * 1.05 < d) return n;
  }
  return never;
}

// Up to 256 MiB of `matrices` of their first one's type that `keep` selects, in order.
template <typename Keep>
std::vector<const QuantMatrix*> SweepOf(absl::Span<const QuantMatrix* const> matrices, Keep keep,
                                        uint64_t* bytes) {
  std::vector<const QuantMatrix*> sweep;
  *bytes = 0;
  for (const QuantMatrix* m : matrices) {
    if (m->type != matrices[0]->type || !keep(*m) || *bytes >= (uint64_t{256} << 20)) continue;
    sweep.push_back(m);
    *bytes += static_cast<uint64_t>(m->rows) * m->row_bytes;
  }
  return sweep;
}

}  // namespace

std::string CalibratePackedGemm(absl::Span<const QuantMatrix* const> matrices, ThreadPool* pool,
                                MatmulOptions* options) {
  if (matrices.empty()) return "";
  const gguf::GgmlType type = matrices[0]->type;
  const Int8GemmLayout* layout = FindInt8GemmLayout(type);
  const quant::QuantTraits* traits = quant::FindQuantTraits(type);
  std::string line = absl::StrCat(traits != nullptr ? traits->name : "?", " packed panels:");
  const auto id = static_cast<uint32_t>(type);
  if (layout == nullptr || id >= 64 || !GemmPacksType(type, *options)) {
    return line + " not measured";
  }
  uint64_t bytes = 0;
  const std::vector<const QuantMatrix*> sweep = SweepOf(
      matrices,
      [&](const QuantMatrix& m) {
        return m.packed != nullptr && PackedFor(m, 0, *layout) != nullptr;
      },
      &bytes);
  if (sweep.empty()) return line + " not measured";
  std::string gains;
  const int from =
      SweepGemmAgainstDots(sweep, *layout, {1, 2, 3, 4, 6, 8, 12}, 16, pool, *options, &gains);
  options->packed_gemm_batch[id] = static_cast<uint8_t>(from);
  return absl::StrFormat("%s GEMM from %d rows (over the dots at %s; %d matrices, %.0f MiB)", line,
                         from, gains, sweep.size(), bytes / double{1 << 20});
}

std::string CalibrateDecodePanelGemm(absl::Span<const QuantMatrix* const> matrices,
                                     ThreadPool* pool, MatmulOptions* options) {
  if (matrices.empty()) return "";
  const gguf::GgmlType type = matrices[0]->type;
  const Int8GemmLayout* layout = FindInt8GemmLayout(type);
  const quant::QuantTraits* traits = quant::FindQuantTraits(type);
  std::string line = absl::StrCat(traits != nullptr ? traits->name : "?", " decode panels:");
  const auto id = static_cast<uint32_t>(type);
  if (layout == nullptr || id >= 64 || !GemmCovers(type, *options) ||
      !HasIntegerKernel(type, options->isa) || !AtLeast(options->isa, Isa::kAvx512)) {
    return line + " not measured";
  }
  // The choice is per type: it holds for the matrices without int8 panels, so every one of
  // them must have decode panels (the budget may have run out before some).
  for (const QuantMatrix* m : matrices) {
    if (m->type == type && m->packed == nullptr && m->decode_panels == nullptr) {
      return line + " not measured (some matrices have none)";
    }
  }
  uint64_t bytes = 0;
  const std::vector<const QuantMatrix*> sweep = SweepOf(
      matrices,
      [](const QuantMatrix& m) { return m.packed == nullptr && m.decode_panels != nullptr; },
      &bytes);
  if (sweep.empty()) return line + " not measured";
  std::string gains;
  const int from =
      SweepGemmAgainstDots(sweep, *layout, {8, 12, 16, 24}, 32, pool, *options, &gains);
  options->dots_gemm_batch[id] = static_cast<uint8_t>(from);
  return absl::StrFormat(
      "%s decode GEMM from %d rows (over the panels at %s; %d matrices without int8 panels, %.0f "
      "MiB)",
      line, from, gains, sweep.size(), bytes / double{1 << 20});
}

}  // namespace tessera::cpu
