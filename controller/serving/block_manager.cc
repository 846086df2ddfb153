#include "controller/serving/block_manager.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera::serving {
namespace {

// splitmix64's finalizer: a cheap, well-mixed step for the lookup hash (lookups compare
// exactly, so its quality only decides how often two contents share a key).
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

BlockManager::BlockManager(int n_blocks, int block_size, bool prefix_caching, int lookahead)
    : block_size_(std::max(block_size, 1)),
      prefix_caching_(prefix_caching),
      lookahead_(std::max(lookahead, 0)),
      identity_(block_size_ + lookahead_) {
  const int n = std::max(n_blocks, 0);
  ref_.assign(n, 0);
  free_.reserve(n);
  // Block 0 at the back: the first sequence gets blocks 0, 1, 2, ... (easier to read in logs).
  for (int b = n - 1; b >= 0; --b) free_.push_back(b);
  if (prefix_caching_) {
    cached_.assign(n, false);
    key_.assign(n, 0);
    serial_.assign(n, 0);
    parent_serial_.assign(n, 0);
    parent_.assign(n, kNone);
    tokens_.assign(static_cast<size_t>(n) * identity_, 0);
    salt_.assign(n, std::string());
    lru_prev_.assign(n, kNone);
    lru_next_.assign(n, kNone);
  }
}

double BlockManager::usage() const {
  const int total = total_blocks();
  return total == 0 ? 0.0 : static_cast<double>(used_) / total;
}

int BlockManager::BlocksFor(int64_t tokens) const {
  if (tokens <= 0) return 0;
  return static_cast<int>((tokens + block_size_ - 1) / block_size_);
}

int32_t BlockManager::TakeFree() {
  if (!free_.empty()) {
    const int32_t b = free_.back();
    free_.pop_back();
    return b;
  }
  const int32_t b = lru_head_;  // the caller checked that a block is free
  LruRemove(b);
  Unregister(b);
  return b;
}

bool BlockManager::Reserve(std::vector<int32_t>& table, int64_t tokens) {
  const int need = BlocksFor(tokens) - static_cast<int>(table.size());
  if (need <= 0) return true;
  if (need > free_blocks()) return false;
  for (int i = 0; i < need; ++i) {
    const int32_t b = TakeFree();
    ref_[b] = 1;
    table.push_back(b);
  }
  used_ += need;
  return true;
}

void BlockManager::Release(std::vector<int32_t>& table) {
  // Last block first: with prefix caching the tail of a table is evicted before its prefix.
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    const int32_t b = *it;
    if (--ref_[b] > 0) continue;
    --used_;
    if (prefix_caching_ && cached_[b]) {
      LruPushBack(b);
    } else {
      free_.push_back(b);
    }
  }
  table.clear();
}

uint64_t BlockManager::KeyOf(int32_t parent, absl::Span<const int32_t> tokens,
                             std::string_view salt) const {
  uint64_t h;
  if (parent == kNone) {
    h = Mix(0x5a17ull ^ salt.size());
    for (unsigned char c : salt) h = Mix(h ^ c);
  } else {
    h = Mix((static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) ^ serial_[parent]);
  }
  for (int32_t t : tokens) h = Mix(h ^ static_cast<uint32_t>(t));
  return h;
}

bool BlockManager::Holds(int32_t b, int32_t parent, absl::Span<const int32_t> tokens,
                         std::string_view salt) const {
  if (!cached_[b] || parent_[b] != parent) return false;
  if (parent != kNone && (!cached_[parent] || parent_serial_[b] != serial_[parent])) return false;
  if (parent == kNone && salt_[b] != salt) return false;
  return std::equal(tokens.begin(), tokens.end(),
                    tokens_.begin() + static_cast<size_t>(b) * identity_);
}

int BlockManager::AcquirePrefix(std::vector<int32_t>& table, absl::Span<const int32_t> tokens,
                                std::string_view salt, int max_blocks) {
  if (!prefix_caching_ || !table.empty()) return 0;
  // Blocks whose identity (the block and its look-ahead tokens) the prompt holds.
  const int limit = std::min<int64_t>(
      max_blocks,
      std::max<int64_t>(static_cast<int64_t>(tokens.size()) - lookahead_, 0) / block_size_);
  int32_t parent = kNone;
  for (int i = 0; i < limit; ++i) {
    absl::Span<const int32_t> block = IdentityOf(tokens, i);
    auto it = index_.find(KeyOf(parent, block, salt));
    if (it == index_.end() || !Holds(it->second, parent, block, salt)) break;
    const int32_t b = it->second;
    if (ref_[b]++ == 0) {
      LruRemove(b);
      ++used_;
    }
    table.push_back(b);
    parent = b;
  }
  return static_cast<int>(table.size());
}

void BlockManager::CacheFullBlocks(const std::vector<int32_t>& table,
                                   absl::Span<const int32_t> tokens, std::string_view salt,
                                   int64_t computed_tokens, int* committed) {
  const int64_t full = std::min<int64_t>({computed_tokens, static_cast<int64_t>(tokens.size()),
                                          static_cast<int64_t>(table.size()) * block_size_});
  if (!prefix_caching_) {
    *committed = std::max(*committed, static_cast<int>(full / block_size_));
    return;
  }
  // A block registers once its look-ahead tokens are computed too (under MTP, the step that
  // computes the next block's first token writes this block's last MTP entry).
  const int64_t known = std::min<int64_t>(computed_tokens, static_cast<int64_t>(tokens.size()));
  const int n_full =
      static_cast<int>(std::min<int64_t>(std::max<int64_t>(known - lookahead_, 0),
                                         static_cast<int64_t>(table.size()) * block_size_) /
                       block_size_);
  for (int i = *committed; i < n_full; ++i) {
    const int32_t b = table[i];
    const int32_t parent = i == 0 ? kNone : table[i - 1];
    // Once a block stays private, so do the ones after it (their parent is not cached).
    if (parent != kNone && !cached_[parent]) continue;
    if (cached_[b]) continue;  // a matched block
    absl::Span<const int32_t> block = IdentityOf(tokens, i);
    const uint64_t key = KeyOf(parent, block, salt);
    auto [it, inserted] = index_.try_emplace(key, b);
    if (!inserted) {
      const int32_t other = it->second;
      // Identical content already cached (another sequence computed the same prefix): keep
      // that one. A different content under the same key, or one whose parent's block has
      // since been reused, gives way to the current content.
      if (Holds(other, parent, block, salt)) continue;
      if (ref_[other] == 0) {
        LruRemove(other);
        free_.push_back(other);
      }
      Unregister(other);
      index_[key] = b;
    }
    cached_[b] = true;
    key_[b] = key;
    serial_[b] = next_serial_++;
    parent_[b] = parent;
    parent_serial_[b] = parent == kNone ? 0 : serial_[parent];
    std::copy(block.begin(), block.end(), tokens_.begin() + static_cast<size_t>(b) * identity_);
    salt_[b] = parent == kNone ? std::string(salt) : std::string();
  }
  *committed = std::max(*committed, n_full);
}

void BlockManager::Unregister(int32_t b) {
  if (!prefix_caching_ || !cached_[b]) return;
  auto it = index_.find(key_[b]);
  if (it != index_.end() && it->second == b) index_.erase(it);
  cached_[b] = false;
  salt_[b].clear();
}

void BlockManager::ResetPrefixCache() {
  if (!prefix_caching_) return;
  while (lru_head_ != kNone) {
    const int32_t b = lru_head_;
    LruRemove(b);
    free_.push_back(b);
  }
  for (int32_t b = 0; b < total_blocks(); ++b) Unregister(b);
  index_.clear();
}

void BlockManager::LruPushBack(int32_t b) {
  lru_prev_[b] = lru_tail_;
  lru_next_[b] = kNone;
  if (lru_tail_ != kNone) {
    lru_next_[lru_tail_] = b;
  } else {
    lru_head_ = b;
  }
  lru_tail_ = b;
  ++lru_size_;
}

void BlockManager::LruRemove(int32_t b) {
  const int32_t p = lru_prev_[b], n = lru_next_[b];
  (p != kNone ? lru_next_[p] : lru_head_) = n;
  (n != kNone ? lru_prev_[n] : lru_tail_) = p;
  lru_prev_[b] = lru_next_[b] = kNone;
  --lru_size_;
}

absl::Status BlockManager::CheckInvariants(
    const std::vector<const std::vector<int32_t>*>& tables) const {
  const int n = total_blocks();
  auto broken = [](auto&&... parts) {
    return absl::FailedPreconditionError(absl::StrCat("block manager: ", parts...));
  };
  std::vector<int> holds(n, 0);
  for (const std::vector<int32_t>* t : tables) {
    for (int32_t b : *t) {
      if (b < 0 || b >= n) return broken("a table names block ", b, " of ", n);
      ++holds[b];
    }
  }
  // 0: not seen; 1: free list; 2: LRU list.
  std::vector<int> where(n, 0);
  for (int32_t b : free_) {
    if (where[b] != 0) return broken("block ", b, " is twice in the free list");
    where[b] = 1;
  }
  int in_lru = 0;
  for (int32_t b = lru_head_, prev = kNone; b != kNone; prev = b, b = lru_next_[b]) {
    if (lru_prev_[b] != prev) return broken("the LRU list's links disagree at block ", b);
    if (where[b] != 0) return broken("block ", b, " is free and in the LRU list, or twice there");
    where[b] = 2;
    if (++in_lru > n) return broken("the LRU list loops");
  }
  if (in_lru != lru_size_) return broken("the LRU list holds ", in_lru, ", counted ", lru_size_);
  int used = 0;
  for (int32_t b = 0; b < n; ++b) {
    if (ref_[b] != holds[b]) {
      return broken("block ", b, " is held ", ref_[b], " times but named by ", holds[b], " tables");
    }
    const bool cached = prefix_caching_ && cached_[b];
    if (ref_[b] > 0) {
      ++used;
      if (where[b] != 0) return broken("held block ", b, " is also free");
    } else if (where[b] != (cached ? 2 : 1)) {
      return broken("unheld block ", b,
                    cached ? " is cached but not in the LRU list" : " is neither free nor cached");
    }
    if (cached) {
      auto it = index_.find(key_[b]);
      if (it == index_.end() || it->second != b) {
        return broken("cached block ", b, " is not in the index");
      }
    }
  }
  if (used != used_) return broken(used, " blocks are held, counted ", used_);
  for (const auto& [key, b] : index_) {
    if (b < 0 || b >= n || !cached_[b] || key_[b] != key) {
      return broken("the index names block ", b, " which is not cached under that key");
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::serving
