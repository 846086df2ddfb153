#include "worker/comm/communicator.h"

#include <vector>

#include "common/util/half.h"

namespace tessera::comm {

absl::Status Communicator::ReduceAsFloat(void* data, size_t count, ReduceDtype dtype,
                                         absl::FunctionRef<absl::Status(float*, size_t)> reduce) {
  if (dtype == ReduceDtype::kFloat32) return reduce(static_cast<float*>(data), count);
  uint16_t* h = static_cast<uint16_t*>(data);
  std::vector<float> widened(count);
  for (size_t i = 0; i < count; ++i) {
    widened[i] = dtype == ReduceDtype::kBFloat16 ? Bf16ToFloat(h[i]) : Fp16ToFloat(h[i]);
  }
  if (absl::Status s = reduce(widened.data(), count); !s.ok()) return s;
  for (size_t i = 0; i < count; ++i) {
    h[i] = dtype == ReduceDtype::kBFloat16 ? FloatToBf16(widened[i]) : FloatToFp16(widened[i]);
  }
  return absl::OkStatus();
}

}  // namespace tessera::comm
