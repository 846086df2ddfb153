// libFuzzer target for the GGUF reader: any bytes must give a Status or a file whose every
// claimed span lies inside the input.
#include <cstddef>
#include <cstdint>

#include "common/gguf/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = tessera::gguf::GgufFile::Parse({data, size}, "fuzz.gguf");
  if (!f.ok()) return 0;
  uint64_t sum = 0;
  for (const auto& [key, value] : (*f)->metadata().entries()) sum += value.DebugString().size();
  for (const auto& t : (*f)->tensors()) {
    auto bytes = (*f)->TensorData(t);
    if (!bytes.empty()) sum += bytes.front() + bytes.back();
  }
  return sum == 0xdeadbeef ? 0 : 0;
}
