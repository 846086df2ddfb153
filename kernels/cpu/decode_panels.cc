#include "kernels/cpu/decode_panels.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "common/quant/blocks.h"

namespace tessera::cpu {
namespace {

// Byte offsets of a q4_K panel block's parts (decode_panels.h).
constexpr size_t kDminAt = 32, kScAt = 64, kMinAt = 192, kQsAt = 320;
static_assert(kQsAt + 2048 == kQ4KPanelBlockBytes && kQ4KPanelBlockBytes % 64 == 0);

}  // namespace

bool DecodePanelMatrix::Covers(gguf::GgmlType type) { return type == gguf::GgmlType::kQ4_K; }

DecodePanelMatrix::DecodePanelMatrix(gguf::GgmlType type, int64_t panels, int64_t cols)
    : type_(type),
      panels_(panels),
      cols_(cols),
      panel_bytes_(static_cast<size_t>(cols / quant::kQKK) * kQ4KPanelBlockBytes) {}

DecodePanelMatrix::~DecodePanelMatrix() { std::free(data_); }

size_t DecodePanelMatrix::Bytes(gguf::GgmlType type, int64_t rows, int64_t cols) {
  if (!Covers(type)) return 0;
  return DecodePanelMatrix(type, rows / kDecodePanelRows, cols).bytes();
}

std::unique_ptr<DecodePanelMatrix> DecodePanelMatrix::Pack(gguf::GgmlType type, const uint8_t* data,
                                                           size_t row_bytes, int64_t rows,
                                                           int64_t cols, ThreadPool* pool) {
  std::unique_ptr<DecodePanelMatrix> m(
      new DecodePanelMatrix(type, rows / kDecodePanelRows, cols));
  if (m->bytes() == 0) return m;
  m->data_ = static_cast<uint8_t*>(std::aligned_alloc(64, m->bytes()));
  if (m->data_ == nullptr) throw std::bad_alloc();
  auto task = [&](int64_t p, int) {
    const uint8_t* rows16[kDecodePanelRows];
    for (int r = 0; r < kDecodePanelRows; ++r) {
      rows16[r] = data + static_cast<size_t>(p * kDecodePanelRows + r) * row_bytes;
    }
    InterleaveQ4KPanel(rows16, cols, m->data_ + static_cast<size_t>(p) * m->panel_bytes_);
  };
  if (pool != nullptr) {
    pool->ParallelFor(m->panels_, task);
  } else {
    for (int64_t p = 0; p < m->panels_; ++p) task(p, 0);
  }
  return m;
}

void InterleaveQ4KPanel(const uint8_t* const rows[kDecodePanelRows], int64_t cols, uint8_t* out) {
  constexpr int kRows = kDecodePanelRows;
  for (int64_t i = 0; i < cols / quant::kQKK; ++i) {
    uint8_t* o = out + static_cast<size_t>(i) * kQ4KPanelBlockBytes;
    for (int r = 0; r < kRows; ++r) {
      const auto& b = reinterpret_cast<const quant::BlockQ4_K*>(rows[r])[i];
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
          std::memcpy(o + kQsAt + ((g * 4 + s) * kRows + r) * 4, b.qs + 32 * s + 4 * g, 4);
        }
      }
    }
  }
}

}  // namespace tessera::cpu
