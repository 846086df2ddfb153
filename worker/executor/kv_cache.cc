#include "worker/executor/kv_cache.h"

#include <algorithm>

#include "kernels/cpu/nn_ops.h"

namespace tessera::executor {

PagedKvCache::PagedKvCache(const KvCacheShape& shape)
    : shape_(shape), slots_(int64_t{shape.n_blocks} * shape.block_size) {
  for (int l = 0; l < shape.n_layers; ++l) {
    if (shape.dtype == CacheDtype::kF32) {
      k_f32_.emplace_back(slots_ * shape.k_width);
      v_f32_.emplace_back(slots_ * shape.v_width);
    } else {
      k_16_.emplace_back(slots_ * shape.k_width);
      v_16_.emplace_back(slots_ * shape.v_width);
    }
  }
}

uint64_t PagedKvCache::bytes() const {
  uint64_t per = shape_.dtype == CacheDtype::kF32 ? 4 : 2;
  return per * static_cast<uint64_t>(slots_) * (shape_.k_width + shape_.v_width) * shape_.n_layers;
}

int64_t CacheSlot(const KvCacheShape& shape, absl::Span<const int32_t> block_table, int64_t pos) {
  if (pos < 0) return -1;
  int64_t logical = pos / shape.block_size;
  if (logical >= static_cast<int64_t>(block_table.size())) return -1;
  int32_t block = block_table[logical];
  if (block < 0 || block >= shape.n_blocks) return -1;
  return int64_t{block} * shape.block_size + pos % shape.block_size;
}

int64_t PagedKvCache::Slot(absl::Span<const int32_t> block_table, int64_t pos) const {
  return CacheSlot(shape_, block_table, pos);
}

void PagedKvCache::Store(float* f, uint16_t* h, int64_t at, const float* x, int n) const {
  switch (shape_.dtype) {
    case CacheDtype::kF32:
      std::copy(x, x + n, f + at);
      break;
    case CacheDtype::kF16:
      cpu::FloatsToFp16(x, n, h + at);
      break;
    case CacheDtype::kBF16:
      cpu::FloatsToBf16(x, n, h + at);
      break;
  }
}

void PagedKvCache::Load(const float* f, const uint16_t* h, int64_t at, float* out, int n) const {
  switch (shape_.dtype) {
    case CacheDtype::kF32:
      std::copy(f + at, f + at + n, out);
      break;
    case CacheDtype::kF16:
      cpu::Fp16sToFloats(h + at, n, out);
      break;
    case CacheDtype::kBF16:
      cpu::Bf16sToFloats(h + at, n, out);
      break;
  }
}

namespace {
template <typename T>
T* LayerData(std::vector<std::vector<T>>& v, int layer) {
  return v.empty() ? nullptr : v[layer].data();
}
template <typename T>
const T* LayerData(const std::vector<std::vector<T>>& v, int layer) {
  return v.empty() ? nullptr : v[layer].data();
}
}  // namespace

void PagedKvCache::Write(int layer, int64_t slot, const float* k, const float* v, int k_n,
                         int v_n) {
  Store(LayerData(k_f32_, layer), LayerData(k_16_, layer), slot * shape_.k_width, k,
        k_n < 0 ? shape_.k_width : std::min(k_n, shape_.k_width));
  if (shape_.v_width > 0) {
    Store(LayerData(v_f32_, layer), LayerData(v_16_, layer), slot * shape_.v_width, v,
          v_n < 0 ? shape_.v_width : std::min(v_n, shape_.v_width));
  }
}

void PagedKvCache::ReadK(int layer, int64_t slot, float* out) const {
  ReadKPart(layer, slot, 0, shape_.k_width, out);
}

void PagedKvCache::ReadV(int layer, int64_t slot, float* out) const {
  ReadVPart(layer, slot, 0, shape_.v_width, out);
}

void PagedKvCache::ReadKPart(int layer, int64_t slot, int offset, int n, float* out) const {
  Load(LayerData(k_f32_, layer), LayerData(k_16_, layer), slot * shape_.k_width + offset, out, n);
}

void PagedKvCache::ReadVPart(int layer, int64_t slot, int offset, int n, float* out) const {
  Load(LayerData(v_f32_, layer), LayerData(v_16_, layer), slot * shape_.v_width + offset, out, n);
}

const void* PagedKvCache::KData(int layer) const {
  return shape_.dtype == CacheDtype::kF32 ? static_cast<const void*>(LayerData(k_f32_, layer))
                                          : static_cast<const void*>(LayerData(k_16_, layer));
}

const void* PagedKvCache::VData(int layer) const {
  return shape_.dtype == CacheDtype::kF32 ? static_cast<const void*>(LayerData(v_f32_, layer))
                                          : static_cast<const void*>(LayerData(v_16_, layer));
}

}  // namespace tessera::executor
