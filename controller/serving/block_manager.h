// The controller's side of the paged KV cache: which physical blocks are free, and which
// belong to each sequence. Workers only store keys and values in the blocks the step's
// block tables name; this class decides those tables.
//
//   BlockManager blocks(runner.n_blocks(), runner.block_size());
//   if (!blocks.Reserve(seq.block_table, seq.num_computed + chunk)) { /* preempt someone */ }
//   ...
//   blocks.Release(seq.block_table);  // finished, cancelled, failed or preempted
//
// Not thread-safe: the scheduler thread owns it.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::serving {

class BlockManager {
 public:
  // `n_blocks` blocks of `block_size` token slots each (both > 0 for a usable cache; a
  // manager with no blocks refuses every reservation).
  BlockManager(int n_blocks, int block_size);

  int block_size() const { return block_size_; }
  int total_blocks() const { return static_cast<int>(free_.size()) + used_; }
  int used_blocks() const { return used_; }
  int free_blocks() const { return static_cast<int>(free_.size()); }
  // used / total, 0 for an empty cache: the kv_cache_usage gauge.
  double usage() const;
  // Token slots the whole cache holds.
  int64_t capacity_tokens() const { return static_cast<int64_t>(total_blocks()) * block_size_; }

  // Blocks needed to hold positions [0, tokens).
  int BlocksFor(int64_t tokens) const;

  // Grows `table` so that it covers positions [0, tokens). All or nothing: false (and
  // `table` unchanged) when there are not enough free blocks. A table already long enough
  // is left as it is.
  bool Reserve(std::vector<int32_t>& table, int64_t tokens);
  // Returns every block of `table` to the free list and clears it.
  void Release(std::vector<int32_t>& table);

 private:
  int block_size_;
  int used_ = 0;
  // Free block ids; allocation pops from the back, so freshly freed blocks are reused first
  // (they are the ones most likely still in the worker's caches).
  std::vector<int32_t> free_;
};

}  // namespace tessera::serving
