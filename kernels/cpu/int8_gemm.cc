#include "kernels/cpu/int8_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/quant/blocks.h"
#include "common/util/half.h"
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/kernels_avx512.h"

namespace tessera::cpu {
namespace {

using gguf::GgmlType;

// Zero points: Q6_K stores q + 32, Q8_0's signed quants are flipped to q + 128 (the kernel
// multiplies unsigned weights by signed activations), Q4_0 stores q + 8.
constexpr Int8GemmLayout kLayouts[] = {
    {GgmlType::kQ4_K, 32, quant::kQKK, 0, true},   {GgmlType::kQ5_K, 32, quant::kQKK, 0, true},
    {GgmlType::kQ6_K, 16, quant::kQKK, 32, false}, {GgmlType::kQ8_0, 32, quant::kQK, 128, false},
    {GgmlType::kQ4_0, 32, quant::kQK, 8, false},
};

// One row decoded: unsigned quants q[cols], integer group scales sc[cols/group] and mins
// m[cols/group], float block scales d and dmin[cols/act_block].
struct RowOut {
  uint8_t* q;
  float* sc;
  int32_t* m;
  float* d;
  float* dmin;
};

// Q4_K and Q5_K share the 6-bit (scale, min) packing; `high` (Q5_K's qh) adds a fifth bit.
// out.q null: scales only (the AVX-512 panel unpackers place the quants).
template <typename Block>
void DecodeK4(const Block* x, int64_t n_blocks, RowOut out, bool high) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    out.d[i] = Fp16ToFloat(x[i].d);
    out.dmin[i] = Fp16ToFloat(x[i].dmin);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      quant::UnpackScaleMinK4(j, x[i].scales, &sc, &m);
      out.sc[8 * i + j] = sc;
      out.m[8 * i + j] = m;
    }
    if (out.q == nullptr) continue;
    uint8_t* q = out.q + i * quant::kQKK;
    for (int j = 0; j < 4; ++j) {
      const uint8_t* qs = x[i].qs + 32 * j;
      for (int l = 0; l < 32; ++l) {
        q[64 * j + l] = qs[l] & 0xF;
        q[64 * j + 32 + l] = qs[l] >> 4;
      }
    }
    if (!high) continue;
    if constexpr (sizeof(Block) == sizeof(quant::BlockQ5_K)) {
      for (int j = 0; j < 8; ++j) {
        for (int l = 0; l < 32; ++l) {
          q[32 * j + l] |= static_cast<uint8_t>(((x[i].qh[l] >> j) & 1) << 4);
        }
      }
    }
  }
}

void DecodeQ4_K(const uint8_t* src, int64_t cols, RowOut out) {
  DecodeK4(reinterpret_cast<const quant::BlockQ4_K*>(src), cols / quant::kQKK, out, false);
}

void DecodeQ5_K(const uint8_t* src, int64_t cols, RowOut out) {
  DecodeK4(reinterpret_cast<const quant::BlockQ5_K*>(src), cols / quant::kQKK, out, true);
}

void DecodeQ6_K(const uint8_t* src, int64_t cols, RowOut out) {
  const auto* x = reinterpret_cast<const quant::BlockQ6_K*>(src);
  for (int64_t i = 0; i < cols / quant::kQKK; ++i) {
    out.d[i] = Fp16ToFloat(x[i].d);
    for (int g = 0; g < 16; ++g) out.sc[16 * i + g] = x[i].scales[g];
    if (out.q == nullptr) continue;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[i].ql + 64 * h;
      const uint8_t* qh = x[i].qh + 32 * h;
      uint8_t* y = out.q + i * quant::kQKK + 128 * h;
      for (int l = 0; l < 32; ++l) {
        y[l] = static_cast<uint8_t>((ql[l] & 0xF) | ((qh[l] & 3) << 4));
        y[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
        y[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
        y[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
      }
    }
  }
}

void DecodeQ8_0(const uint8_t* src, int64_t cols, RowOut out) {
  const auto* x = reinterpret_cast<const quant::BlockQ8_0*>(src);
  for (int64_t i = 0; i < cols / quant::kQK; ++i) {
    out.d[i] = Fp16ToFloat(x[i].d);
    out.sc[i] = 1.0f;
    if (out.q == nullptr) continue;
    for (int l = 0; l < quant::kQK; ++l) {
      out.q[i * quant::kQK + l] = static_cast<uint8_t>(x[i].qs[l]) ^ 0x80;
    }
  }
}

void DecodeQ4_0(const uint8_t* src, int64_t cols, RowOut out) {
  const auto* x = reinterpret_cast<const quant::BlockQ4_0*>(src);
  for (int64_t i = 0; i < cols / quant::kQK; ++i) {
    out.d[i] = Fp16ToFloat(x[i].d);
    out.sc[i] = 1.0f;
    if (out.q == nullptr) continue;
    uint8_t* q = out.q + i * quant::kQK;
    for (int l = 0; l < quant::kQK / 2; ++l) {
      q[l] = x[i].qs[l] & 0xF;
      q[l + 16] = x[i].qs[l] >> 4;
    }
  }
}

// Two int16 values in one int32 lane, as vpdpwssd reads them (low half first).
int32_t Int16Pair(int32_t lo, int32_t hi) {
  return static_cast<int32_t>((static_cast<uint32_t>(hi) << 16) |
                              (static_cast<uint32_t>(lo) & 0xFFFF));
}

using DecodeFn = void (*)(const uint8_t* src, int64_t cols, RowOut out);

DecodeFn Decoder(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_K:
      return DecodeQ4_K;
    case GgmlType::kQ5_K:
      return DecodeQ5_K;
    case GgmlType::kQ6_K:
      return DecodeQ6_K;
    case GgmlType::kQ8_0:
      return DecodeQ8_0;
    case GgmlType::kQ4_0:
      return DecodeQ4_0;
    default:
      return nullptr;
  }
}

}  // namespace

const Int8GemmLayout* FindInt8GemmLayout(GgmlType type) {
  for (const Int8GemmLayout& l : kLayouts) {
    if (l.type == type) return &l;
  }
  return nullptr;
}

void Int8ActivationBuffer::Reset(const Int8GemmLayout& layout, int64_t batch, int64_t cols) {
  layout_ = &layout;
  batch_ = batch;
  cols_ = cols;
  const auto n_groups = static_cast<size_t>(batch * (cols / layout.group));
  q_.Reserve(static_cast<size_t>(batch * cols));
  d_.Reserve(static_cast<size_t>(batch * (cols / layout.act_block)));
  gsum_.Reserve(n_groups);
  gpair_.Reserve(n_groups / 2);
}

void Int8ActivationBuffer::QuantizeRows(const float* x, int64_t b0, int64_t b1, Isa isa) {
  const int64_t n_blocks = cols_ / layout_->act_block, n_groups = cols_ / layout_->group;
  for (int64_t b = b0; b < b1; ++b) {
    int8_t* q = q_.data() + b * cols_;
    float* d = d_.data() + b * n_blocks;
    int32_t* gsum = gsum_.data() + b * n_groups;
    if (isa == Isa::kAvx512) {
      avx512::QuantizeInt8Activations(x + b * cols_, cols_, layout_->act_block, layout_->group, q,
                                      d, gsum);
    } else {
      QuantizeRowPortable(x + b * cols_, q, d, gsum);
    }
    if (!layout_->mins) continue;
    for (int64_t p = 0; p < n_groups / 2; ++p) {
      gpair_.data()[b * (n_groups / 2) + p] = Int16Pair(gsum[2 * p], gsum[2 * p + 1]);
    }
  }
}

// Through the activation_quant.h quantizers, whose block formats are then unpacked.
void Int8ActivationBuffer::QuantizeRowPortable(const float* x, int8_t* q, float* d,
                                               int32_t* gsum) const {
  const int64_t n_blocks = cols_ / layout_->act_block;
  if (layout_->act_block == quant::kQKK) {
    std::vector<quant::BlockQ8_K> blocks(n_blocks);
    QuantizeActivationsQ8_K(x, blocks.data(), cols_);
    for (int64_t i = 0; i < n_blocks; ++i) {
      d[i] = blocks[i].d;
      std::memcpy(q + i * quant::kQKK, blocks[i].qs, quant::kQKK);
    }
  } else {
    std::vector<quant::BlockQ8_0> blocks(n_blocks);
    QuantizeActivationsQ8_0(x, blocks.data(), cols_);
    for (int64_t i = 0; i < n_blocks; ++i) {
      d[i] = Fp16ToFloat(blocks[i].d);
      std::memcpy(q + i * quant::kQK, blocks[i].qs, quant::kQK);
    }
  }
  for (int64_t g = 0; g < cols_ / layout_->group; ++g) {
    int32_t sum = 0;
    for (int l = 0; l < layout_->group; ++l) sum += q[g * layout_->group + l];
    gsum[g] = sum;
  }
}

Int8Activations Int8ActivationBuffer::view() const {
  return {batch_, cols_, q_.data(), d_.data(), gsum_.data(), gpair_.data()};
}

void Int8PanelBuffer::Unpack(const Int8GemmLayout& layout, const uint8_t* data, size_t row_bytes,
                             int rows, int64_t cols, Isa isa) {
  constexpr int kLanes = kInt8PanelRows;
  const int64_t n_groups = cols / layout.group, n_blocks = cols / layout.act_block;
  q_.resize(static_cast<size_t>(cols * kLanes));
  scale_.resize(static_cast<size_t>(n_groups * kLanes));
  d_.resize(static_cast<size_t>(n_blocks * kLanes));
  dmin_.resize(layout.mins ? d_.size() : 0);
  mpair_.resize(layout.mins ? scale_.size() / 2 : 0);
  UnpackTo(layout, data, row_bytes, rows, cols, isa,
           {q_.data(), scale_.data(), d_.data(), dmin_.data(), mpair_.data()});
}

void Int8PanelBuffer::UnpackTo(const Int8GemmLayout& layout, const uint8_t* data, size_t row_bytes,
                               int rows, int64_t cols, Isa isa, const MutablePanel& out) {
  constexpr int kLanes = kInt8PanelRows;
  const int64_t n_groups = cols / layout.group, n_blocks = cols / layout.act_block;
  // Padding rows' scales stay 0.
  std::fill_n(out.scale, n_groups * kLanes, 0.0f);
  std::fill_n(out.d, n_blocks * kLanes, 0.0f);
  if (layout.mins) {
    std::fill_n(out.dmin, n_blocks * kLanes, 0.0f);
    std::fill_n(out.mpair, n_groups / 2 * kLanes, 0);
  }
  row_scale_.resize(static_cast<size_t>(n_groups));
  row_min_.assign(static_cast<size_t>(n_groups), 0);
  row_d_.resize(static_cast<size_t>(n_blocks));
  row_dmin_.assign(static_cast<size_t>(n_blocks), 0.0f);
  // Vector path: each row's quants as plain bytes, then 16×16 word transposes into the
  // panel. Portable path: one row at a time, 4-byte copies to its lane.
  const avx512::RowQuantsFn row_quants =
      isa == Isa::kAvx512 ? avx512::RowQuants(layout.type) : nullptr;
  row_q_.resize(static_cast<size_t>(cols * (row_quants ? kLanes : 1)));
  if (row_quants != nullptr && rows < kLanes) {
    std::memset(row_q_.data() + rows * cols, 0, static_cast<size_t>((kLanes - rows) * cols));
  }
  if (row_quants == nullptr && rows < kLanes)
    std::memset(out.q, 0, static_cast<size_t>(cols * kLanes));
  const DecodeFn decode = Decoder(layout.type);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* row = data + r * row_bytes;
    decode(row, cols,
           {row_quants ? nullptr : row_q_.data(), row_scale_.data(), row_min_.data(), row_d_.data(),
            row_dmin_.data()});
    if (row_quants != nullptr) {
      row_quants(row, cols, row_q_.data() + r * cols);
    } else {
      for (int64_t k4 = 0; k4 < cols / 4; ++k4) {
        std::memcpy(out.q + 64 * k4 + 4 * r, row_q_.data() + 4 * k4, 4);
      }
    }
    for (int64_t g = 0; g < n_groups; ++g) out.scale[g * kLanes + r] = row_scale_[g];
    for (int64_t i = 0; i < n_blocks; ++i) out.d[i * kLanes + r] = row_d_[i];
    if (!layout.mins) continue;
    for (int64_t i = 0; i < n_blocks; ++i) out.dmin[i * kLanes + r] = row_dmin_[i];
    for (int64_t p = 0; p < n_groups / 2; ++p) {
      out.mpair[p * kLanes + r] = Int16Pair(row_min_[2 * p], row_min_[2 * p + 1]);
    }
  }
  if (row_quants != nullptr) avx512::InterleavePanel(row_q_.data(), cols, out.q);
}

Int8Panel Int8PanelBuffer::view() const {
  const bool mins = !mpair_.empty();
  return {q_.data(), scale_.data(), d_.data(), mins ? dmin_.data() : nullptr,
          mins ? mpair_.data() : nullptr};
}

PackedInt8Matrix::PackedInt8Matrix(const Int8GemmLayout& layout, int64_t rows, int64_t cols)
    : layout_(&layout), rows_(rows), cols_(cols) {
  constexpr size_t kLanes = kInt8PanelRows;
  const auto n_groups = static_cast<size_t>(cols / layout.group);
  const auto n_blocks = static_cast<size_t>(cols / layout.act_block);
  // Every part is a multiple of 64 bytes (cols is a multiple of 32), so each stays aligned.
  scale_at_ = static_cast<size_t>(cols) * kLanes;
  d_at_ = scale_at_ + n_groups * kLanes * sizeof(float);
  dmin_at_ = d_at_ + n_blocks * kLanes * sizeof(float);
  mpair_at_ = dmin_at_ + (layout.mins ? n_blocks * kLanes * sizeof(float) : 0);
  panel_bytes_ = mpair_at_ + (layout.mins ? n_groups / 2 * kLanes * sizeof(int32_t) : 0);
}

PackedInt8Matrix::~PackedInt8Matrix() { std::free(data_); }

size_t PackedInt8Matrix::Bytes(const Int8GemmLayout& layout, int64_t rows, int64_t cols) {
  return PackedInt8Matrix(layout, rows, cols).bytes();
}

std::unique_ptr<PackedInt8Matrix> PackedInt8Matrix::Pack(const Int8GemmLayout& layout,
                                                         const uint8_t* data, size_t row_bytes,
                                                         int64_t rows, int64_t cols, Isa isa,
                                                         ThreadPool* pool) {
  std::unique_ptr<PackedInt8Matrix> m(new PackedInt8Matrix(layout, rows, cols));
  m->data_ = static_cast<uint8_t*>(std::aligned_alloc(64, m->bytes()));
  if (m->data_ == nullptr) throw std::bad_alloc();
  const int threads = pool != nullptr ? pool->size() : 1;
  std::vector<Int8PanelBuffer> buffers(static_cast<size_t>(threads));
  auto task = [&](int64_t p, int thread) {
    const int64_t r0 = p * kInt8PanelRows;
    uint8_t* base = m->data_ + static_cast<size_t>(p) * m->panel_bytes_;
    buffers[static_cast<size_t>(thread)].UnpackTo(
        layout, data + r0 * row_bytes, row_bytes,
        static_cast<int>(std::min<int64_t>(kInt8PanelRows, rows - r0)), cols, isa,
        {base, reinterpret_cast<float*>(base + m->scale_at_),
         reinterpret_cast<float*>(base + m->d_at_), reinterpret_cast<float*>(base + m->dmin_at_),
         reinterpret_cast<int32_t*>(base + m->mpair_at_)});
  };
  if (pool != nullptr) {
    pool->ParallelFor(m->panels(), task);
  } else {
    for (int64_t p = 0; p < m->panels(); ++p) task(p, 0);
  }
  return m;
}

Int8Panel PackedInt8Matrix::panel(int64_t p) const {
  const uint8_t* base = data_ + static_cast<size_t>(p) * panel_bytes_;
  Int8Panel v;
  v.q = base;
  v.scale = reinterpret_cast<const float*>(base + scale_at_);
  v.d = reinterpret_cast<const float*>(base + d_at_);
  if (layout_->mins) {
    v.dmin = reinterpret_cast<const float*>(base + dmin_at_);
    v.mpair = reinterpret_cast<const int32_t*>(base + mpair_at_);
  }
  return v;
}

}  // namespace tessera::cpu
