// A whole-model float64 forward pass for the dense architectures (llama, qwen2, qwen3),
// written as plainly as spec sections 5-8 read: every weight dequantized to double, all
// tokens of one sequence at once, causal attention, no cache. For tests only.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/split.h"

namespace tessera::reference {

// Logits [tokens.size() x n_vocab], row i = after token i.
absl::StatusOr<std::vector<double>> DenseForwardRef(const gguf::GgufModel& model,
                                                    const std::vector<int32_t>& tokens);

}  // namespace tessera::reference
