// The controller's side of the paged KV cache: which physical blocks are free, which belong
// to each sequence, and (automatic prefix caching) which hold a prefix some earlier request
// computed. Workers only store keys and values in the blocks the step's block tables name;
// this class decides those tables.
//
//   BlockManager blocks(runner.n_blocks(), runner.block_size(), /*prefix_caching=*/true);
//   int hit = blocks.AcquirePrefix(seq.block_table, seq.tokens, salt, max_blocks);
//   seq.num_computed = hit * blocks.block_size();  // those tokens are not prefilled again
//   if (!blocks.Reserve(seq.block_table, seq.num_computed + chunk)) { /* preempt someone */ }
//   ... the step runs ...
//   blocks.CacheFullBlocks(seq.block_table, seq.tokens, salt, seq.num_computed, &committed);
//   blocks.Release(seq.block_table);  // finished, cancelled, failed or preempted
//
// Prefix caching. A full block whose keys and values are computed is registered under its
// content: its parent (the previous block of the same table, itself registered, so the
// parent stands for the whole prefix before it), its token ids and, for a first block, the
// request's cache salt. A new prompt is matched block by block from its start; a matched
// block is shared (reference-counted) and its tokens are not prefilled again. Lookups go
// through a 64-bit hash of that identity but then compare the parent, the tokens and the
// salt exactly, so a hash collision can only cost a miss, never return another prompt's
// keys. Only full, computed blocks are ever shared and a sequence writes only past its
// matched prefix, so a shared block is never written: a prompt's last, partly filled block
// is always its own (and a prompt that matches to its very end recomputes its last block,
// which yields the logits to sample from).
//
// With `lookahead` tokens (1 under MTP drafting) a block's identity also covers the tokens
// after it: the MTP block's cache entry for a block's last position pairs that position's
// state with the next token, so the block is only what another prompt needs when that token
// is the same too. Such a block is registered once its look-ahead tokens are computed, and a
// prompt matches it only when its own tokens there are the same.
//
// Blocks no sequence holds stay cached; a reservation takes never-cached free blocks first
// and only then evicts the least recently released cached block (a released table's last
// blocks first, so prefixes outlive their tails). The model is fixed for a manager's
// lifetime; ResetPrefixCache() forgets every cached block (the workers restarted, or an
// operator asked).
//
// Not thread-safe: the scheduler thread owns it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tessera::serving {

class BlockManager {
 public:
  // `n_blocks` blocks of `block_size` token slots each (both > 0 for a usable cache; a
  // manager with no blocks refuses every reservation). Without `prefix_caching`
  // AcquirePrefix never matches and CacheFullBlocks registers nothing. `lookahead`: the
  // tokens after a block that are part of its identity (see the file comment).
  BlockManager(int n_blocks, int block_size, bool prefix_caching = false, int lookahead = 0);

  int block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  int total_blocks() const { return static_cast<int>(ref_.size()); }
  // Blocks some sequence holds.
  int used_blocks() const { return used_; }
  // Blocks a reservation can take: never-cached ones plus cached ones nobody holds.
  int free_blocks() const { return total_blocks() - used_; }
  // Blocks registered in the prefix cache (held or not).
  int cached_blocks() const { return static_cast<int>(index_.size()); }
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
  // Drops this table's hold on each of its blocks and clears it. A block nobody holds any
  // more becomes free (cached ones stay matchable until evicted).
  void Release(std::vector<int32_t>& table);

  // Appends to the empty `table` the cached blocks that hold the longest prefix of `tokens`
  // under `salt`, at most `max_blocks` of them, taking a hold on each; returns how many.
  int AcquirePrefix(std::vector<int32_t>& table, absl::Span<const int32_t> tokens,
                    std::string_view salt, int max_blocks);
  // Registers the blocks of `table` from `*committed` on that `computed_tokens` fills
  // completely (tokens[0, computed_tokens) are in the cache), and advances `*committed`
  // past them. A block whose content is already cached in another block, or whose parent
  // is not cached, stays private. `tokens` and `salt` are the sequence's, as given to
  // AcquirePrefix.
  void CacheFullBlocks(const std::vector<int32_t>& table, absl::Span<const int32_t> tokens,
                       std::string_view salt, int64_t computed_tokens, int* committed);
  // Forgets every cached block: held ones become private to their holders, the others free.
  void ResetPrefixCache();

  // Checks the bookkeeping: every block is exactly once in use, free or cached-and-free;
  // the hold counts equal `holds` (how many of the given tables name each block); the
  // index points at registered blocks. FailedPrecondition naming the first broken rule.
  absl::Status CheckInvariants(const std::vector<const std::vector<int32_t>*>& tables) const;

 private:
  static constexpr int32_t kNone = -1;

  // The identity a block is registered under (see the file comment).
  uint64_t KeyOf(int32_t parent, absl::Span<const int32_t> tokens, std::string_view salt) const;
  // True when cached block `b` holds exactly that content.
  bool Holds(int32_t b, int32_t parent, absl::Span<const int32_t> tokens,
             std::string_view salt) const;
  // Takes a free block for a reservation (never-cached first, else the LRU cached one).
  int32_t TakeFree();
  void Unregister(int32_t b);
  void LruPushBack(int32_t b);
  void LruRemove(int32_t b);

  // The tokens a block's identity covers: tokens[i * block_size_, + identity_) for block i.
  absl::Span<const int32_t> IdentityOf(absl::Span<const int32_t> tokens, int i) const {
    return tokens.subspan(static_cast<size_t>(i) * block_size_, identity_);
  }

  int block_size_;
  bool prefix_caching_;
  int lookahead_;
  int identity_;  // block_size_ + lookahead_
  int used_ = 0;
  std::vector<int32_t> ref_;  // holds per block
  // Never-cached free block ids; allocation pops from the back, so freshly freed blocks are
  // reused first (they are the ones most likely still in the worker's caches).
  std::vector<int32_t> free_;
  // Per block, while registered: its key, its parent block (kNone for a first block) and
  // that parent's registration serial, its tokens, and (first blocks) the salt. `serial_`
  // changes at every registration, so a child registered under an earlier content of its
  // parent's block no longer matches.
  std::vector<bool> cached_;
  std::vector<uint64_t> key_, serial_, parent_serial_;
  std::vector<int32_t> parent_;
  std::vector<int32_t> tokens_;  // identity_ per block
  std::vector<std::string> salt_;
  uint64_t next_serial_ = 1;
  absl::flat_hash_map<uint64_t, int32_t> index_;  // key -> registered block
  // Cached blocks nobody holds, least recently released first (a doubly linked list).
  std::vector<int32_t> lru_prev_, lru_next_;
  int32_t lru_head_ = kNone, lru_tail_ = kNone;
  int lru_size_ = 0;
};

}  // namespace tessera::serving
