#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device.h"

namespace tessera::cuda {
namespace {

TEST(CudaDevice, SaxpyMatchesCpu) {
  std::vector<DeviceInfo> devices = ListDevices();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device visible; this test needs a GPU";
  for (const DeviceInfo& d : devices) {
    SCOPED_TRACE(d.name);
    std::vector<float> x(1000), y(1000), expected(1000);
    for (int i = 0; i < 1000; ++i) {
      x[i] = 0.5f * static_cast<float>(i);
      y[i] = 3.0f - static_cast<float>(i);
      expected[i] = 2.0f * x[i] + y[i];  // exact in float32 for these values
    }
    ASSERT_TRUE(Saxpy(d.index, 2.0f, x, y).ok());
    EXPECT_EQ(y, expected);
  }
}

}  // namespace
}  // namespace tessera::cuda
