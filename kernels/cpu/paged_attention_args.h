// The arguments of cpu::PagedAttention (paged_attention.h): plain structs, shared with the
// AVX-512 kernel file.
#pragma once

#include <cstdint>

namespace tessera::cpu {

enum class KvElem { kF32, kF16, kBF16 };

// One head's rows of one layer of the cache: slot s's values start at element
// s · slot_stride + offset of `data`.
struct PagedRows {
  const void* data = nullptr;
  KvElem elem = KvElem::kF32;
  int64_t slot_stride = 0;
  int64_t offset = 0;
};

struct PagedAttentionArgs {
  const float* q = nullptr;  // nq rows of dk floats, ldq apart
  int nq = 0;
  int64_t ldq = 0;
  int dk = 0;
  PagedRows k, v;  // v may be k's rows (MLA: the values are the latent's first dv)
  int dv = 0;
  const int32_t* block_table = nullptr;  // key j lives in slot table[j / bs] · bs + j % bs
  int block_size = 0;
  int64_t n_keys = 0;  // keys [0, n_keys) are visible to every row
  float scale = 1.0f;
  float* out = nullptr;  // nq rows of dv floats, ld_out apart
  int64_t ld_out = 0;
};

}  // namespace tessera::cpu
