// Operand formats of the int8 GEMM (int8_gemm.h explains them). Plain structs only: the
// AVX-512 kernel file includes this header.
#pragma once

#include <cstdint>

#include "common/gguf/ggml_type.h"

namespace tessera::cpu {

inline constexpr int kInt8PanelRows = 16;
// How a weight type maps onto the kernel.
struct Int8GemmLayout {
  gguf::GgmlType type;
  int group;      // elements sharing one weight scale (16 or 32)
  int act_block;  // elements sharing one activation scale: 256 (Q8_K) or 32 (Q8_0)
  int offset;     // value = scale·(q − offset): the quant's zero point
  bool mins;      // value also has − min_g
};

// A quantized activation batch (views into an Int8ActivationBuffer).
struct Int8Activations {
  int64_t batch = 0;
  int64_t cols = 0;
  const int8_t* q = nullptr;       // batch × cols quants
  const float* d = nullptr;        // batch × cols/act_block scales
  const int32_t* gsum = nullptr;   // batch × cols/group: Σ q per weight group
  const int32_t* gpair = nullptr;  // batch × cols/group/2: groups 2p, 2p+1's sums as int16
                                   // pairs (for the mins' vpdpwssd), when the layout has mins
};

// One panel of 16 weight rows (padding rows are zero), `cols` elements each.
struct Int8Panel {
  const uint8_t* q = nullptr;      // cols/4 chunks of 64 bytes
  const float* scale = nullptr;    // cols/group × 16: group g's integer scale for row r at
                                   // [16·g + r] (1 for the 32-element types)
  const float* d = nullptr;        // cols/act_block × 16: the block's float scale
  const float* dmin = nullptr;     // cols/act_block × 16: the block's min scale (mins only)
  const int32_t* mpair = nullptr;  // cols/group/2 × 16: integer mins of groups 2p, 2p+1 as
                                   // int16 pairs (mins only)
};

}  // namespace tessera::cpu
