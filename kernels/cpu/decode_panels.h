// Decode panels: q4_K, q5_K, q6_K and q8_0 weight rows kept from load interleaved 16 to a
// panel with their 4-, 5-, 6- and 8-bit quants, for the products of one to a few vectors (decode
// steps) on AVX-512 VNNI hosts.
//
// The integer dots multiply one row at a time and spend most of their instructions on what
// is per row: the horizontal sums of each block, the scale unpacking, the float tail (on
// Zen 4 the one-vector q4_K dot ran at ~15 GB/s per core in L2, below the ~23 GB/s one core
// reads from memory). In a panel, lane r of every 512-bit register belongs to row r: one
// vpdpbusd multiplies 4 quants of 16 rows by 4 broadcast activations, the sub-block sums of
// 16 rows stay in 16 lanes, and the float tail is one vector operation for 16 rows. A panel
// keeps the quants at their width (the int8 GEMM's panels, PackedInt8Matrix, take a byte
// each), so a one-vector product reads about as many bytes as the rows themselves (q4_K
// 1.03x, q5_K 1.02x, q6_K 1.01x, q8_0 1.0x).
//
// Layout of panel p (rows [16p, 16p + 16)), one part per 256-element block, in block order
// (the sizes named below, each a multiple of 64 bytes). q4_K (kQ4KPanelBlockBytes):
//   d[16], dmin[16]       fp16 block scales of the 16 rows
//   sc[8][16]             sub-block scale j of row r at sc[j][r] (6-bit values as bytes)
//   m[4][16][2]           sub-block minimums 2i and 2i + 1 of row r at m[i][r][0..1]
//   qs[8][4][16][4]       bytes 32s + 4g .. 32s + 4g + 3 of row r's qs at qs[g][s][r]: low
//                         nibbles are elements 64s + 4g + 0..3, high nibbles 64s + 32 + 4g
//                         + 0..3 (the q4_K nibble order, regrouped by 4 bytes)
// q5_K (kQ5KPanelBlockBytes): q4_K's d, dmin, sc and m, then per group g the fifth bits and
// the four quant registers:
//   q[8][5][16][4]        q[g][0][r] = qh[4g .. 4g + 3] of row r (bit 2s: element 64s + 4g
//                         + k's fifth bit, 2s + 1: element 64s + 32 + 4g + k's), q[g][1 + s][r]
//                         = qs[32s + 4g ..] as q4_K's
// q6_K (kQ6KPanelBlockBytes):
//   d[16]                 float32 block scales (the fp16 values, converted exactly)
//   sc[8][16][2]          signed sub-block scales 2i and 2i + 1 of row r at sc[i][r][0..1]
//   q[2][8][3][16][4]     per half h and group g, three registers of 16 rows × 4 bytes:
//                         ql[64h + 4g ..], ql[64h + 32 + 4g ..] and qh[32h + 4g ..] (the
//                         q6_K bit order, regrouped by 4 bytes, in the order they are read)
// q8_0, per pair of 32-element blocks (kQ8_0PanelPairBytes; the second block of the last
// pair is zero where the row has an odd number of blocks):
//   d[2][16]              fp16 block scales
//   qs[2][8][16][4]       quants + 128 as unsigned bytes (q ^ 0x80), bytes 4g .. 4g + 3 of
//                         block b of row r at qs[b][g][r]
// Every (row, vector) result has the bits of the integer dots (kernels_avx2.h IntegerDot):
// the block sums are exact integers and the float operations per block are the dots'.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/gguf/ggml_type.h"
#include "kernels/cpu/thread_pool.h"

namespace tessera::cpu {

inline constexpr int kDecodePanelRows = 16;
inline constexpr size_t kQ4KPanelBlockBytes = 64 + 128 + 128 + 2048;
inline constexpr size_t kQ5KPanelBlockBytes = 64 + 128 + 128 + 2560;
inline constexpr size_t kQ6KPanelBlockBytes = 64 + 256 + 3072;
inline constexpr size_t kQ8_0PanelPairBytes = 64 + 1024;
// Byte offsets of the parts of a block within a panel (the layouts above).
namespace panel_layout {
inline constexpr size_t kDminAt = 32, kScAt = 64, kMinAt = 192, kQsAt = 320;  // q4_K, q5_K
inline constexpr size_t kQ6ScAt = 64, kQ6QAt = 320;                           // q6_K
static_assert(kQsAt + 2048 == kQ4KPanelBlockBytes && kQ4KPanelBlockBytes % 64 == 0);
static_assert(kQsAt + 2560 == kQ5KPanelBlockBytes && kQ5KPanelBlockBytes % 64 == 0);
static_assert(kQ6QAt + 3072 == kQ6KPanelBlockBytes && kQ6KPanelBlockBytes % 64 == 0);
static_assert(kQ8_0PanelPairBytes % 64 == 0);
}  // namespace panel_layout

// The weight matrix as decode panels. Only whole panels are kept: rows past the last
// multiple of 16 stay with the caller's row-major data (the dots multiply them).
class DecodePanelMatrix {
 public:
  // Whether `type` has decode panels (q4_K, q5_K, q6_K, q8_0).
  static bool Covers(gguf::GgmlType type);
  // The bytes Pack keeps for `rows` × `cols` of `type` (0 when fewer than 16 rows).
  static size_t Bytes(gguf::GgmlType type, int64_t rows, int64_t cols);
  // Interleaves the whole panels of the row-major matrix at `data` (row stride
  // `row_bytes`), split over `pool` (null: the calling thread). `type` must be covered and
  // `rows` at least 16.
  static std::unique_ptr<DecodePanelMatrix> Pack(gguf::GgmlType type, const uint8_t* data,
                                                 size_t row_bytes, int64_t rows, int64_t cols,
                                                 ThreadPool* pool);
  ~DecodePanelMatrix();
  DecodePanelMatrix(const DecodePanelMatrix&) = delete;
  DecodePanelMatrix& operator=(const DecodePanelMatrix&) = delete;

  gguf::GgmlType type() const { return type_; }
  int64_t cols() const { return cols_; }
  int64_t panels() const { return panels_; }
  // Rows held: panels() × 16.
  int64_t rows() const { return panels_ * kDecodePanelRows; }
  size_t panel_bytes() const { return panel_bytes_; }
  size_t bytes() const { return static_cast<size_t>(panels_) * panel_bytes_; }
  const uint8_t* panel(int64_t p) const { return data_ + static_cast<size_t>(p) * panel_bytes_; }

 private:
  DecodePanelMatrix(gguf::GgmlType type, int64_t panels, int64_t cols);

  gguf::GgmlType type_;
  int64_t panels_, cols_;
  size_t panel_bytes_;
  uint8_t* data_ = nullptr;  // 64-byte aligned
};

// Writes the panel image of 16 rows of `type` (rows[r] → lane r, `cols` elements each) to
// `out` (PanelBytes(type, cols) bytes).
void InterleavePanel(gguf::GgmlType type, const uint8_t* const rows[kDecodePanelRows], int64_t cols,
                     uint8_t* out);
// Bytes of one panel of `type` with rows of `cols` elements (0: not covered).
size_t PanelBytes(gguf::GgmlType type, int64_t cols);

}  // namespace tessera::cpu
