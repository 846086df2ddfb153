#include "kernels/cpu/decode_panels.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include "common/quant/blocks.h"
#include "common/util/half.h"

namespace tessera::cpu {
namespace {

constexpr int kRows = kDecodePanelRows;

using panel_layout::kDminAt;
using panel_layout::kMinAt;
using panel_layout::kQ6QAt;
using panel_layout::kQ6ScAt;
using panel_layout::kQsAt;
using panel_layout::kScAt;

// q4_K and q5_K (Block), whose scales, mins and nibbles share one layout.
template <typename Block>
void InterleaveK4(const uint8_t* const rows[kRows], int64_t cols, uint8_t* out) {
  constexpr bool kFifthBit = std::is_same_v<Block, quant::BlockQ5_K>;
  constexpr size_t kBlockBytes = kFifthBit ? kQ5KPanelBlockBytes : kQ4KPanelBlockBytes;
  for (int64_t i = 0; i < cols / quant::kQKK; ++i) {
    uint8_t* o = out + static_cast<size_t>(i) * kBlockBytes;
    for (int r = 0; r < kRows; ++r) {
      const auto& b = reinterpret_cast<const Block*>(rows[r])[i];
      std::memcpy(o + 2 * r, &b.d, 2);
      std::memcpy(o + kDminAt + 2 * r, &b.dmin, 2);
      uint64_t sc, m;
      quant::UnpackScalesMinsK4(b.scales, &sc, &m);
      for (int j = 0; j < 8; ++j) {
        o[kScAt + j * kRows + r] = static_cast<uint8_t>(sc >> (8 * j));
        o[kMinAt + (j / 2) * 2 * kRows + 2 * r + j % 2] = static_cast<uint8_t>(m >> (8 * j));
      }
      for (int s = 0; s < 4; ++s) {
        for (int g = 0; g < 8; ++g) {
          const size_t at = kFifthBit ? kQsAt + ((g * 5 + 1 + s) * kRows + r) * 4
                                      : kQsAt + ((g * 4 + s) * kRows + r) * 4;
          std::memcpy(o + at, b.qs + 32 * s + 4 * g, 4);
        }
      }
      if constexpr (kFifthBit) {
        for (int g = 0; g < 8; ++g) {
          std::memcpy(o + kQsAt + (g * 5 * kRows + r) * 4, b.qh + 4 * g, 4);
        }
      }
    }
  }
}

void InterleaveQ6K(const uint8_t* const rows[kRows], int64_t cols, uint8_t* out) {
  for (int64_t i = 0; i < cols / quant::kQKK; ++i) {
    uint8_t* o = out + static_cast<size_t>(i) * kQ6KPanelBlockBytes;
    for (int r = 0; r < kRows; ++r) {
      const auto& b = reinterpret_cast<const quant::BlockQ6_K*>(rows[r])[i];
      const float d = Fp16ToFloat(b.d);
      std::memcpy(o + 4 * r, &d, 4);
      for (int j = 0; j < 16; ++j) {
        o[kQ6ScAt + (j / 2) * 2 * kRows + 2 * r + j % 2] = static_cast<uint8_t>(b.scales[j]);
      }
      for (int h = 0; h < 2; ++h) {
        for (int g = 0; g < 8; ++g) {
          uint8_t* q = o + kQ6QAt + static_cast<size_t>(h * 8 + g) * 3 * 64 + 4 * r;
          std::memcpy(q, b.ql + 64 * h + 4 * g, 4);
          std::memcpy(q + 64, b.ql + 64 * h + 32 + 4 * g, 4);
          std::memcpy(q + 128, b.qh + 32 * h + 4 * g, 4);
        }
      }
    }
  }
}

void InterleaveQ8_0(const uint8_t* const rows[kRows], int64_t cols, uint8_t* out) {
  const int64_t n_blocks = cols / quant::kQK;
  std::memset(out, 0, PanelBytes(gguf::GgmlType::kQ8_0, cols));
  for (int64_t i = 0; i < n_blocks; ++i) {
    uint8_t* o = out + static_cast<size_t>(i / 2) * kQ8_0PanelPairBytes;
    const int64_t half = i % 2;
    for (int r = 0; r < kRows; ++r) {
      const auto& b = reinterpret_cast<const quant::BlockQ8_0*>(rows[r])[i];
      std::memcpy(o + (half * kRows + r) * 2, &b.d, 2);
      for (int k = 0; k < quant::kQK; ++k) {
        o[64 + ((half * 8 + k / 4) * kRows + r) * 4 + k % 4] = static_cast<uint8_t>(b.qs[k]) ^ 0x80;
      }
    }
  }
}

}  // namespace

size_t PanelBytes(gguf::GgmlType type, int64_t cols) {
  switch (type) {
    case gguf::GgmlType::kQ4_K:
      return static_cast<size_t>(cols / quant::kQKK) * kQ4KPanelBlockBytes;
    case gguf::GgmlType::kQ5_K:
      return static_cast<size_t>(cols / quant::kQKK) * kQ5KPanelBlockBytes;
    case gguf::GgmlType::kQ6_K:
      return static_cast<size_t>(cols / quant::kQKK) * kQ6KPanelBlockBytes;
    case gguf::GgmlType::kQ8_0:
      return static_cast<size_t>((cols / quant::kQK + 1) / 2) * kQ8_0PanelPairBytes;
    default:
      return 0;
  }
}

void InterleavePanel(gguf::GgmlType type, const uint8_t* const rows[kRows], int64_t cols,
                     uint8_t* out) {
  if (type == gguf::GgmlType::kQ4_K) InterleaveK4<quant::BlockQ4_K>(rows, cols, out);
  if (type == gguf::GgmlType::kQ5_K) InterleaveK4<quant::BlockQ5_K>(rows, cols, out);
  if (type == gguf::GgmlType::kQ6_K) InterleaveQ6K(rows, cols, out);
  if (type == gguf::GgmlType::kQ8_0) InterleaveQ8_0(rows, cols, out);
}

bool DecodePanelMatrix::Covers(gguf::GgmlType type) { return PanelBytes(type, 256) != 0; }

DecodePanelMatrix::DecodePanelMatrix(gguf::GgmlType type, int64_t panels, int64_t cols)
    : type_(type), panels_(panels), cols_(cols), panel_bytes_(PanelBytes(type, cols)) {}

DecodePanelMatrix::~DecodePanelMatrix() { std::free(data_); }

size_t DecodePanelMatrix::Bytes(gguf::GgmlType type, int64_t rows, int64_t cols) {
  if (!Covers(type)) return 0;
  return DecodePanelMatrix(type, rows / kDecodePanelRows, cols).bytes();
}

std::unique_ptr<DecodePanelMatrix> DecodePanelMatrix::Pack(gguf::GgmlType type, const uint8_t* data,
                                                           size_t row_bytes, int64_t rows,
                                                           int64_t cols, ThreadPool* pool) {
  std::unique_ptr<DecodePanelMatrix> m(new DecodePanelMatrix(type, rows / kDecodePanelRows, cols));
  if (m->bytes() == 0) return m;
  m->data_ = static_cast<uint8_t*>(std::aligned_alloc(64, m->bytes()));
  if (m->data_ == nullptr) throw std::bad_alloc();
  auto task = [&](int64_t p, int) {
    const uint8_t* rows16[kDecodePanelRows];
    for (int r = 0; r < kDecodePanelRows; ++r) {
      rows16[r] = data + static_cast<size_t>(p * kDecodePanelRows + r) * row_bytes;
    }
    InterleavePanel(type, rows16, cols, m->data_ + static_cast<size_t>(p) * m->panel_bytes_);
  };
  if (pool != nullptr) {
    pool->ParallelFor(m->panels_, task);
  } else {
    for (int64_t p = 0; p < m->panels_; ++p) task(p, 0);
  }
  return m;
}

}  // namespace tessera::cpu
