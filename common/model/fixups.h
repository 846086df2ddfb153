// The load-time fixups' arithmetic: turning what a file holds into what the executor
// consumes. Which fixup applies to which tensor is decided by the architecture table
// (tensor_map.h), never by ad-hoc name checks in a loader.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/gguf/split.h"

namespace tessera::model {

// MLA kv_b geometry: H heads, n = qk_nope, v = v_head_dim, c = kv_lora_rank.
struct KvBShape {
  int64_t heads, nope, v, latent;
};

// kv_b_proj as HF stores it: [H*(n+v)][c] row-major (= GGUF attn_kv_b {c, H*(n+v)}) ->
// attn_k_b {n, c, H} and attn_v_b {c, v, H} as the converter writes them (spec 10.4):
//   k_b[i + n*(j + c*h)] = kv_b[(h*(n+v) + i)*c + j]
//   v_b[j + c*(e + v*h)] = kv_b[(h*(n+v) + n + e)*c + j]
// Errors when a span's size does not match the shape.
absl::Status SplitKvB(const KvBShape& s, absl::Span<const float> kv_b, absl::Span<float> k_b,
                      absl::Span<float> v_b);

// The exact inverse: attn_k_b + attn_v_b -> kv_b_proj.
absl::Status ReassembleKvB(const KvBShape& s, absl::Span<const float> k_b,
                           absl::Span<const float> v_b, absl::Span<float> kv_b);

// The `dequantize` fixup: the whole tensor as float32, whatever its stored type. Errors name
// the tensor and the type when it cannot be dequantized.
absl::StatusOr<std::vector<float>> DequantizeTensor(const gguf::GgufModel& model,
                                                    const gguf::TensorInfo& tensor);

}  // namespace tessera::model
