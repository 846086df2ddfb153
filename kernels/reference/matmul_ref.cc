#include "kernels/reference/matmul_ref.h"

#include "absl/strings/str_cat.h"
#include "common/quant/dequantize.h"

namespace tessera::kernels::reference {

absl::StatusOr<std::vector<double>> MatmulFloat64(gguf::GgmlType type, absl::Span<const uint8_t> w,
                                                  int64_t rows, int64_t cols,
                                                  absl::Span<const float> x, int64_t batch) {
  if (x.size() != static_cast<size_t>(batch * cols)) {
    return absl::InvalidArgumentError(
        absl::StrCat("reference matmul: x has ", x.size(), " values, want ", batch * cols));
  }
  std::vector<float> dense(static_cast<size_t>(rows * cols));
  if (absl::Status s = quant::DequantizeToFloat(type, w, rows * cols, dense.data()); !s.ok()) {
    return s;
  }
  std::vector<double> y(static_cast<size_t>(batch * rows));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0.0;
      for (int64_t k = 0; k < cols; ++k) {
        s += static_cast<double>(dense[r * cols + k]) * static_cast<double>(x[b * cols + k]);
      }
      y[b * rows + r] = s;
    }
  }
  return y;
}

}  // namespace tessera::kernels::reference
