// A whole-model float64 forward pass for every supported architecture, written as plainly
// as spec sections 5-12 read: every weight dequantized to double, all tokens of one sequence
// at once, causal attention, no cache, MLA in the naive (non-absorbed) form through the
// reassembled kv_b, MoE token by token, the DSA indexer as a score matrix. For tests only.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/split.h"

namespace tessera::reference {

struct RefTrace {
  std::map<int, std::vector<std::vector<int32_t>>> experts;   // layer -> token -> sorted
  std::map<int, std::vector<std::vector<int32_t>>> dsa_keys;  // layer -> token -> sorted
};

// Logits [tokens.size() x n_vocab], row i = after token i.
absl::StatusOr<std::vector<double>> ForwardRef(const gguf::GgufModel& model,
                                               const std::vector<int32_t>& tokens,
                                               RefTrace* trace = nullptr);

}  // namespace tessera::reference
