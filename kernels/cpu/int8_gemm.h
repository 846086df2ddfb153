// The int8 GEMM of prefill-sized batches: y = W·x for W quantized (Q4_K, Q5_K, Q6_K, Q8_0,
// Q4_0) and a batch of activation rows, multiplied as integers with AVX-512 VNNI
// (kernels_avx512.h: Int8Gemm). This header holds the two operand formats and the portable
// code that fills them:
//  - the activation batch is quantized once per product to the weight type's activation
//    format (Q8_K or Q8_0, rounded as activation_quant.h) and laid out as plain int8 rows
//    with their block scales and group sums;
//  - weights are unpacked 16 rows at a time into a panel of unsigned quants interleaved in
//    4-byte groups (byte 4·r + j of 64-byte chunk k/4 is row r's quant k, k % 4 = j), so one
//    vpdpbusd multiplies 4 quants of 16 rows by 4 activations of one token. A panel is
//    unpacked once and reused by every token of the batch.
//
// Every supported weight value is d·sc_g·(q − offset) − dmin·m_g for an unsigned quant q,
// integer group scales and mins sc_g, m_g (one per `group` elements; sc = 1, m = 0 for the
// 32-element types) and float block scales d, dmin (one per activation block). A product is
// then, as in llama.cpp's dot products, Σ_blocks (d_a·d)·Σ_g sc_g·(Σ q·a − offset·Σ a) −
// (d_a·dmin)·Σ_g m_g·Σ a: the group sums are exact integers, and so are their scaled sums
// below 2^24 (float32); error = activation rounding + float32 accumulation over blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/int8_gemm_format.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/thread_pool.h"

namespace tessera::cpu {

// The layout of `type`, or nullptr when the int8 GEMM does not cover it.
const Int8GemmLayout* FindInt8GemmLayout(gguf::GgmlType type);

// A growable array whose elements start uninitialized (users write before they read): kept
// across products, it costs neither page faults nor zero fills once grown.
template <typename T>
class ScratchArray {
 public:
  T* Reserve(size_t n) {
    if (n > size_) {
      data_ = std::make_unique_for_overwrite<T[]>(n);
      size_ = n;
    }
    return data_.get();
  }
  T* data() const { return data_.get(); }

 private:
  std::unique_ptr<T[]> data_;
  size_t size_ = 0;
};

// Owns the storage of one quantized activation batch; Reset reuses it.
class Int8ActivationBuffer {
 public:
  // Sizes the buffer for `batch` rows of `cols` elements under `layout`.
  void Reset(const Int8GemmLayout& layout, int64_t batch, int64_t cols);
  // Quantizes rows [b0, b1) of x (batch × cols floats); rows may be done on any thread.
  // `isa` kAvx512 (host must support it) takes the vector quantizer, anything else the
  // portable one; both round exactly as activation_quant.h.
  void QuantizeRows(const float* x, int64_t b0, int64_t b1, Isa isa);
  Int8Activations view() const;

 private:
  void QuantizeRowPortable(const float* x, int8_t* q, float* d, int32_t* gsum) const;

  const Int8GemmLayout* layout_ = nullptr;
  int64_t batch_ = 0, cols_ = 0;
  ScratchArray<int8_t> q_;
  ScratchArray<float> d_;
  ScratchArray<int32_t> gsum_, gpair_;
};

// Storage for one panel, reused from tile to tile.
class Int8PanelBuffer {
 public:
  // Unpacks `rows` (≤ 16) consecutive weight rows starting at `data` (row stride
  // `row_bytes`, `cols` elements each) of `layout.type`. `isa` kAvx512 (host must support
  // it) places the quants of every covered type with vector code, anything else with
  // portable code.
  void Unpack(const Int8GemmLayout& layout, const uint8_t* data, size_t row_bytes, int rows,
              int64_t cols, Isa isa);
  Int8Panel view() const;

  // Where UnpackTo writes a panel: Int8Panel's arrays, writable, of the sizes it names
  // (dmin and mpair only for layouts with mins).
  struct MutablePanel {
    uint8_t* q;
    float* scale;
    float* d;
    float* dmin;
    int32_t* mpair;
  };
  // Unpack into caller storage (PackedInt8Matrix's panels); this buffer lends only its
  // per-row scratch.
  void UnpackTo(const Int8GemmLayout& layout, const uint8_t* data, size_t row_bytes, int rows,
                int64_t cols, Isa isa, const MutablePanel& out);

 private:
  std::vector<uint8_t> q_, row_q_;
  std::vector<float> scale_, d_, dmin_, row_scale_, row_d_, row_dmin_;
  std::vector<int32_t> mpair_, row_min_;
};

// The panels of a whole weight matrix, unpacked once and kept: the GEMM then reads panel p
// in place of unpacking rows [16p, 16p + 16) on every product (at a decode batch of 32 the
// unpacking was a fifth of a step). The panels hold exactly what Int8PanelBuffer::Unpack
// makes, so products give the same bits either way. Costs memory: about 2.2x the bytes of
// q4_K weights, 1.2x of q8_0 (PackedInt8Matrix::Bytes). Rows past `rows` in the last panel
// are zero.
class PackedInt8Matrix {
 public:
  // The bytes Pack keeps for a matrix of `rows` × `cols` elements of `layout.type`.
  static size_t Bytes(const Int8GemmLayout& layout, int64_t rows, int64_t cols);
  // Unpacks every panel of the matrix at `data` (row stride `row_bytes`), the panels split
  // over `pool` (null: the calling thread). `isa` as Int8PanelBuffer::Unpack.
  static std::unique_ptr<PackedInt8Matrix> Pack(const Int8GemmLayout& layout, const uint8_t* data,
                                                size_t row_bytes, int64_t rows, int64_t cols,
                                                Isa isa, ThreadPool* pool);
  ~PackedInt8Matrix();
  PackedInt8Matrix(const PackedInt8Matrix&) = delete;
  PackedInt8Matrix& operator=(const PackedInt8Matrix&) = delete;

  const Int8GemmLayout& layout() const { return *layout_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t panels() const { return (rows_ + kInt8PanelRows - 1) / kInt8PanelRows; }
  size_t bytes() const { return static_cast<size_t>(panels()) * panel_bytes_; }
  // Panel p (rows [16p, 16p + 16)), 0 ≤ p < panels().
  Int8Panel panel(int64_t p) const;

 private:
  PackedInt8Matrix(const Int8GemmLayout& layout, int64_t rows, int64_t cols);

  const Int8GemmLayout* layout_;
  int64_t rows_, cols_;
  size_t panel_bytes_;
  size_t scale_at_, d_at_, dmin_at_, mpair_at_;  // byte offsets within a panel
  uint8_t* data_ = nullptr;                      // 64-byte aligned, panels() × panel_bytes_
};

}  // namespace tessera::cpu
