#include "controller/serving/block_manager.h"

#include <algorithm>

namespace tessera::serving {

BlockManager::BlockManager(int n_blocks, int block_size) : block_size_(std::max(block_size, 1)) {
  free_.reserve(std::max(n_blocks, 0));
  // Block 0 at the back: the first sequence gets blocks 0, 1, 2, ... (easier to read in logs).
  for (int b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

double BlockManager::usage() const {
  const int total = total_blocks();
  return total == 0 ? 0.0 : static_cast<double>(used_) / total;
}

int BlockManager::BlocksFor(int64_t tokens) const {
  if (tokens <= 0) return 0;
  return static_cast<int>((tokens + block_size_ - 1) / block_size_);
}

bool BlockManager::Reserve(std::vector<int32_t>& table, int64_t tokens) {
  const int need = BlocksFor(tokens) - static_cast<int>(table.size());
  if (need <= 0) return true;
  if (need > static_cast<int>(free_.size())) return false;
  for (int i = 0; i < need; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  used_ += need;
  return true;
}

void BlockManager::Release(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) free_.push_back(*it);
  used_ -= static_cast<int>(table.size());
  table.clear();
}

}  // namespace tessera::serving
