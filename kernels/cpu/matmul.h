// Quantized matrix products y = W·x with W in any supported type and x, y in float32.
//
// W is a row-major matrix of `rows` × `cols` (ggml: ne0 = cols is the contiguous row), each
// row a whole number of blocks. A caller multiplies a row range [row_begin, row_end) — a
// tensor-parallel shard multiplies its own rows of a shared mapping without copying.
//
// Paths:
//  - integer (decode, batch < kPrefillBatch): x is quantized to the weight type's activation
//    format (Q8_0 for the 32-element types, Q8_K for the K-quants and IQ4_XS) and each
//    weight block meets it in an integer dot product. Its error against the exact product of
//    the dequantized W with x is the activation rounding, |Σ w_i·(x_i − x̂_i)|, plus float32
//    accumulation (see tests/unit/matmul_test.cc for the bound used). Activations round as
//    llama.cpp's CPU backend rounds them (activation_quant.h). Integer kernels are AVX2
//    (every quantized weight type; q4_K, q5_K and q6_K with AVX-512 VNNI, the same bits); a
//    CPU without AVX2 takes the float path. A matrix with decode panels kept from load
//    (QuantMatrix::decode_panels: q4_K, q5_K, q6_K, q8_0) multiplies its whole panels 16 rows at a
//    time on AVX-512 VNNI hosts, with the same bits (decode_panels.h).
//  - int8 GEMM (prefill, batch ≥ kPrefillBatch, Q4_K/Q5_K/Q6_K/Q8_0/Q4_0 with AVX-512
//    VNNI): x is quantized once as for the integer path, and tiles of 32 weight rows,
//    unpacked once to int8 panels, meet every token in vpdpbusd register tiles
//    (int8_gemm.h). Same error terms as the integer path, and the same bits as the integer
//    dots. A matrix whose panels were kept from load (QuantMatrix::packed) skips the
//    unpacking, and takes the GEMM from smaller batches where measured faster
//    (MatmulOptions::packed_gemm_batch).
//  - float (prefill otherwise, and wherever no integer kernel exists): tiles of W rows are
//    dequantized to float32 and multiplied with x in float32 (register-blocked FMA, AVX-512
//    where present); F32 matrices with a prefill batch on AVX-512 (attention's K and Vᵀ)
//    are packed into row panels and meet x in place. Error is float32 accumulation only.
//    Also the checking path (kFloat), whatever the batch.
//
// Threads: rows are split into tasks over `pool`; products below
// MatmulOptions::min_parallel_macs run on the caller.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/gguf/ggml_type.h"
#include "common/gguf/reader.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/thread_pool.h"

namespace tessera::cpu {

class PackedInt8Matrix;   // int8_gemm.h
class DecodePanelMatrix;  // decode_panels.h

// A view of a quantized weight matrix (not owning).
struct QuantMatrix {
  gguf::GgmlType type = gguf::GgmlType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  const uint8_t* data = nullptr;  // row r starts at data + r * row_bytes
  // The same rows as int8 GEMM panels kept from load (not owned; null: none): row r is row
  // packed_row0 + r of `packed`. The GEMM reads them where its tiles start on a panel
  // boundary instead of unpacking the rows; every result keeps its bits.
  const PackedInt8Matrix* packed = nullptr;
  int64_t packed_row0 = 0;
  // The same rows as decode panels kept from load (not owned; null: none): row r is row
  // decode_panels_row0 + r of `decode_panels`. The integer dots of AVX-512 hosts read the
  // whole panels a product's row range covers (same bits) and the rows alone elsewhere.
  const DecodePanelMatrix* decode_panels = nullptr;
  int64_t decode_panels_row0 = 0;

  // Checks the type is supported, cols is a whole number of blocks and `bytes` holds exactly
  // rows × cols elements. `name` is used in errors ("tensor blk.0.attn_q.weight: ...").
  static absl::StatusOr<QuantMatrix> Make(gguf::GgmlType type, int64_t rows, int64_t cols,
                                          absl::Span<const uint8_t> bytes, const std::string& name);
  // The matrix of a GGUF tensor whose data is `bytes` (GgufModel::TensorData): cols =
  // dims[0], rows = the product of the other dims. Same checks as Make.
  static absl::StatusOr<QuantMatrix> FromTensor(const gguf::TensorInfo& tensor,
                                                absl::Span<const uint8_t> bytes);
};

enum class MatmulPath {
  kAuto,     // integer dots for batch < kPrefillBatch, the int8 GEMM above it, where they
             // exist; float otherwise
  kInteger,  // quantized activations: the int8 GEMM where it applies, integer dots otherwise
             // (falls back to float where neither is available)
  kFloat,    // dequantize + float32 products
  kDots,     // per-vector arithmetic whatever the batch: integer dots where they exist (or,
             // from 16 vectors on, or where measured faster, the int8 GEMM, which gives each
             // (row, vector)
             // the dots' bits), else the row-by-row float kernel. Each output depends on its
             // own vector only, so a row gets the same bits however many vectors share the
             // call (the executor's decode rows, for batch-invariant serving).
};

inline constexpr int64_t kPrefillBatch = 8;

struct MatmulOptions {
  MatmulPath path = MatmulPath::kAuto;
  Isa isa = BestIsa();
  // Products of fewer multiply-adds (rows × cols × batch) run on the calling thread: waking
  // the pool costs microseconds, more than small products (attention heads) take.
  int64_t min_parallel_macs = int64_t{1} << 18;
  // Choices measured on the machine at hand (CalibrateMatmul): weight types whose prefill
  // products take the float path instead of the int8 GEMM (bit = GgmlType id), and per type
  // id the vectors the integer dots take per pass over a weight row (0 = 4; every count
  // gives the same bits, only the speed differs).
  uint64_t float_prefill_types = 0;
  // > 0: choose the kernel as for a product of this many vectors, whatever the batch (a
  // batch-invariant caller multiplying some rows of a longer prefill chunk, e.g. the chunk's
  // tokens routed to one expert, gives them the bits the whole chunk's product would).
  int64_t kernel_batch = 0;
  std::array<uint8_t, 64> dot_vectors{};
  // Per type id, the batch from which MatmulPath::kDots takes the int8 GEMM (same bits as
  // the dots) instead of the dots: 0 = 16 (CalibrateMatmul; CalibrateDecodePanelGemm where
  // the type's matrices have decode panels).
  std::array<uint8_t, 64> dots_gemm_batch{};
  // The same for matrices with packed panels (QuantMatrix::packed), on any path but kFloat
  // (below kPrefillBatch too; CalibratePackedGemm): 0 = as dots_gemm_batch.
  std::array<uint8_t, 64> packed_gemm_batch{};
};

// Measures, on this machine, the kernels Matmul chooses between for `w`'s type and sets
// them in `options`: the int8 GEMM against the float path for prefill batches (types the
// GEMM covers, on AVX-512 VNNI hosts; the float path must win by 15% to be chosen, so that
// timing noise does not flip a result-changing choice), and the vectors per weight-row
// pass of the integer dots (1, 2 or 4), and from how many vectors the int8 GEMM beats the
// dots on the kDots path (8, 12 or 16; both give the same bits). Runs on a slice of w's
// rows on the calling thread, a few milliseconds. Returns a line naming the choices and the
// rates behind them.
std::string CalibrateMatmul(const QuantMatrix& w, MatmulOptions* options);

// Measures from how many vectors the int8 GEMM on packed panels beats the integer dots for
// `matrices` (one weight type, with packed panels: the model's matrices of that type in
// step order), sweeping them as a step does (up to 256 MiB, so that the weights come from
// memory as they do in a step) on `pool`, and sets options->packed_gemm_batch for the type
// (1..12, or 16 when the GEMM never wins below). Returns a line naming the choice and the
// speeds behind it. Both kernels give the same bits: only the speed depends on it.
std::string CalibratePackedGemm(absl::Span<const QuantMatrix* const> matrices, ThreadPool* pool,
                                MatmulOptions* options);

// The same for the matrices of `matrices`' type that have decode panels but no int8 panels
// (QuantMatrix::decode_panels; the memory budget left them out): from how many vectors the
// kDots path's int8 GEMM, unpacking their rows, beats the decode panels (8, 12, 16, 24, or 32
// when it never does below), set as options->dots_gemm_batch for the type. Not measured (and
// nothing set) unless every matrix of the type without int8 panels has decode panels.
std::string CalibrateDecodePanelGemm(absl::Span<const QuantMatrix* const> matrices,
                                     ThreadPool* pool, MatmulOptions* options);

// True when the int8 GEMM covers `type` under `options` and was not measured slower than the
// float path (CalibrateMatmul): its matrices gain from packed panels (PackedInt8Matrix).
bool GemmPacksType(gguf::GgmlType type, const MatmulOptions& options);

// y[b * ldy + (r − row_begin)] = Σ_k W[r][k] · x[b * cols + k] for r in [row_begin, row_end),
// b in [0, batch). ldy ≥ row_end − row_begin. `pool` may be null (single-threaded).
// Errors: an empty or out-of-range row range, batch < 0, ldy too small.
absl::Status Matmul(const QuantMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                    int64_t batch, float* y, int64_t ldy, ThreadPool* pool,
                    const MatmulOptions& options = {});

// Activations quantized once to a weight type's activation format (Q8_0 or Q8_K), for
// products that share an input: several matrices over the same x, or a matrix's rows split
// into tasks. Row b is row(b), row_bytes long.
struct QuantizedActivations {
  gguf::GgmlType format = gguf::GgmlType::kF32;
  int64_t batch = 0, cols = 0;
  size_t row_bytes = 0;
  std::vector<float> storage;  // float-typed for alignment: Q8_K blocks hold a float
  uint8_t* row(int64_t b) { return reinterpret_cast<uint8_t*>(storage.data()) + b * row_bytes; }
  const uint8_t* row(int64_t b) const {
    return reinterpret_cast<const uint8_t*>(storage.data()) + b * row_bytes;
  }
};

// The activation format of `type`'s integer kernels (kQ8_0 or kQ8_K); kF32 for types the
// integer path does not cover.
gguf::GgmlType ActivationFormat(gguf::GgmlType type);
// Quantizes x (batch × cols, cols a whole number of `format` blocks) into `out`, reusing
// its storage.
void QuantizeActivations(gguf::GgmlType format, const float* x, int64_t batch, int64_t cols,
                         QuantizedActivations* out);
// The integer-dots product of rows [row_begin, row_end) of w with activations quantized by
// QuantizeActivations(ActivationFormat(w.type), ...): the bits Matmul's integer dots give
// for the same x. Errors: a row range outside w, a format or width that does not fit w, a
// type without an integer kernel on this CPU.
absl::Status MatmulQuantized(const QuantMatrix& w, int64_t row_begin, int64_t row_end,
                             const QuantizedActivations& x, float* y, int64_t ldy, ThreadPool* pool,
                             const MatmulOptions& options = {});
// True when Matmul of a `type` matrix with `batch` vectors under `options` takes the integer
// dots (so MatmulQuantized gives its result).
bool UsesIntegerDots(gguf::GgmlType type, int64_t batch, const MatmulOptions& options);
// The same for `w` itself: a matrix with packed panels may take the int8 GEMM (same bits)
// from a smaller batch.
bool UsesIntegerDots(const QuantMatrix& w, int64_t batch, const MatmulOptions& options);

// True when MatmulPath::kDots over any batch gives every row the bits that the product of
// its own rows alone gets under `options` (kAuto: the int8 GEMM or the dots, which agree):
// q4_0, q8_0, q4_K, q5_K and q6_K on AVX-512 VNNI hosts, also where calibration measured the
// float path faster for the type's prefill (kAuto's choice there makes a row's bits depend
// on how many rows share the product; kDots does not). A batch-invariant caller then
// multiplies a whole step's rows in one product (each weight panel unpacked once) instead of
// sequence by sequence, with bits that no batch or prefill chunking changes.
bool DotsMatchAnyBatch(gguf::GgmlType type, const MatmulOptions& options);

// True when Matmul would take the integer path for `type` at `isa`.
bool HasIntegerKernel(gguf::GgmlType type, Isa isa = BestIsa());

// True when Matmul of a `type` matrix with `batch` vectors under `options` rounds x to int8
// (integer dots or the int8 GEMM), false when it multiplies in float.
bool RoundsActivations(gguf::GgmlType type, int64_t batch, const MatmulOptions& options);

}  // namespace tessera::cpu
