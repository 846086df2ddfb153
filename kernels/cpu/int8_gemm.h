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

 private:
  std::vector<uint8_t> q_, row_q_;
  std::vector<float> scale_, d_, dmin_, row_scale_, row_d_, row_dmin_;
  std::vector<int32_t> mpair_, row_min_;
};

}  // namespace tessera::cpu
