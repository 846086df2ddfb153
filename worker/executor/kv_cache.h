// The paged KV cache: fixed-size blocks of token slots, owned by block id. A sequence's
// block table maps its logical block i (positions [i*B, (i+1)*B)) to a physical block, so
// sequences grow without copying and free blocks are reused in any order. The controller's
// block manager decides the tables; this class only stores.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/model/constants.h"

namespace tessera::executor {

enum class CacheDtype { kF32, kF16, kBF16 };

struct KvCacheShape {
  int n_layers = 0;
  int block_size = model::kDefaultKvBlockSize;  // token slots per block
  int n_blocks = 0;
  int k_width = 0;  // floats per token per layer for K (kv_heads * head_dim_k)
  int v_width = 0;  // for V (0: the model caches keys only)
  CacheDtype dtype = CacheDtype::kF32;
};

// Slot of position `pos` through `block_table` in a cache of `shape`; -1 when the table is
// too short or names a block outside the cache.
int64_t CacheSlot(const KvCacheShape& shape, absl::Span<const int32_t> block_table, int64_t pos);

class PagedKvCache {
 public:
  explicit PagedKvCache(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  uint64_t bytes() const;

  // Slot of position `pos` through `block_table`; -1 when the table is too short or names a
  // block outside the cache.
  int64_t Slot(absl::Span<const int32_t> block_table, int64_t pos) const;

  // Stores one token's K (k_width floats) and V (v_width floats) at `slot` of `layer`, or
  // only the first k_n / v_n of them (a layer with fewer KV heads on this rank than its
  // widest).
  void Write(int layer, int64_t slot, const float* k, const float* v, int k_n = -1, int v_n = -1);
  // Reads one token's K or V into float32.
  void ReadK(int layer, int64_t slot, float* out) const;
  void ReadV(int layer, int64_t slot, float* out) const;
  // Values [offset, offset + n) of one token's K or V (one head's part).
  void ReadKPart(int layer, int64_t slot, int offset, int n, float* out) const;
  void ReadVPart(int layer, int64_t slot, int offset, int n, float* out) const;
  // One layer's K or V storage as attention reads it in place: slot s's values start at
  // element s · k_width (v_width), of the cache's dtype (float or 16-bit).
  const void* KData(int layer) const;
  const void* VData(int layer) const;

 private:
  // Element `at` of one layer's K or V storage, whichever width the dtype uses.
  void Store(float* f, uint16_t* h, int64_t at, const float* x, int n) const;
  void Load(const float* f, const uint16_t* h, int64_t at, float* out, int n) const;

  KvCacheShape shape_;
  int64_t slots_;
  // Per layer, by dtype: float storage (kF32) or 16-bit storage (kF16, kBF16); the other
  // pair stays empty.
  std::vector<std::vector<float>> k_f32_, v_f32_;
  std::vector<std::vector<uint16_t>> k_16_, v_16_;
};

}  // namespace tessera::executor
