#include "common/model/fixups.h"

#include "absl/strings/str_cat.h"
#include "common/quant/dequantize.h"

namespace tessera::model {
namespace {

absl::Status CheckSizes(const KvBShape& s, size_t kv_b, size_t k_b, size_t v_b) {
  if (s.heads <= 0 || s.nope <= 0 || s.v <= 0 || s.latent <= 0) {
    return absl::InvalidArgumentError("kv_b: every dimension must be positive");
  }
  const uint64_t c = s.latent, h = s.heads;
  if (kv_b != h * (s.nope + s.v) * c || k_b != h * s.nope * c || v_b != h * s.v * c) {
    return absl::InvalidArgumentError(absl::StrCat("kv_b: sizes ", kv_b, "/", k_b, "/", v_b,
                                                   " do not match H=", s.heads, " n=", s.nope,
                                                   " v=", s.v, " c=", s.latent));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SplitKvB(const KvBShape& s, absl::Span<const float> kv_b, absl::Span<float> k_b,
                      absl::Span<float> v_b) {
  if (absl::Status st = CheckSizes(s, kv_b.size(), k_b.size(), v_b.size()); !st.ok()) return st;
  const int64_t n = s.nope, v = s.v, c = s.latent;
  for (int64_t h = 0; h < s.heads; ++h) {
    for (int64_t j = 0; j < c; ++j) {
      for (int64_t i = 0; i < n; ++i) k_b[i + n * (j + c * h)] = kv_b[(h * (n + v) + i) * c + j];
      for (int64_t e = 0; e < v; ++e) {
        v_b[j + c * (e + v * h)] = kv_b[(h * (n + v) + n + e) * c + j];
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ReassembleKvB(const KvBShape& s, absl::Span<const float> k_b,
                           absl::Span<const float> v_b, absl::Span<float> kv_b) {
  if (absl::Status st = CheckSizes(s, kv_b.size(), k_b.size(), v_b.size()); !st.ok()) return st;
  const int64_t n = s.nope, v = s.v, c = s.latent;
  for (int64_t h = 0; h < s.heads; ++h) {
    for (int64_t j = 0; j < c; ++j) {
      for (int64_t i = 0; i < n; ++i) kv_b[(h * (n + v) + i) * c + j] = k_b[i + n * (j + c * h)];
      for (int64_t e = 0; e < v; ++e) {
        kv_b[(h * (n + v) + n + e) * c + j] = v_b[j + c * (e + v * h)];
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> DequantizeTensor(const gguf::GgufModel& model,
                                                    const gguf::TensorInfo& tensor) {
  std::vector<float> out(tensor.n_elements);
  absl::Status s = quant::DequantizeToFloat(tensor.type, model.TensorData(tensor),
                                            tensor.n_elements, out.data());
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("tensor ", tensor.name, ": ", s.message()));
  }
  return out;
}

}  // namespace tessera::model
