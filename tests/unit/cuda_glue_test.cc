// The glue kernels of kernels/cuda/glue_kernels.h against exact host computations (copies,
// conversions, single float32 operations) or the float64 references of kernels/reference/nn_ref.h
// (norms), in every activation dtype. Label `gpu`: the CudaGlue tests skip without a device; the
// argument checks (CudaGlueArguments) return before any CUDA call, so they run everywhere.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "kernels/cuda/glue_kernels.h"
#include "kernels/cuda/nn_kernels.h"
#include "kernels/reference/nn_ref.h"
#include "tests/unit/cuda_test_util.h"

namespace tessera::cuda {
namespace {

using testing::Decode;
using testing::DeviceBuffer;
using testing::Encode;
using testing::Epsilon;
using ::testing::HasSubstr;
using testing::RandomVector;
using testing::Round;

constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

std::vector<double> Widen(const float* p, size_t n) { return std::vector<double>(p, p + n); }

std::vector<uint8_t> DownloadBytes(const DeviceBuffer& b, size_t elements, DType dtype) {
  return b.Download<uint8_t>(elements * DTypeBytes(dtype));
}

// |got − want| ≤ (rounding of the output + float32 work) · scale, as in cuda_nn_test.cc.
void ExpectClose(const float* got, const std::vector<double>& want, DType dtype,
                 double scale_floor) {
  testing::ExpectCloseToFloat64(got, want, dtype, scale_floor);
}

class CudaGlue : public testing::GpuTest {};

TEST_F(CudaGlue, AddBiasAddsOneFloat32ValuePerColumn) {
  std::mt19937_64 rng(20);
  const int64_t rows = 7, n = 1003;
  const std::vector<float> bias = RandomVector(n, rng);
  DeviceBuffer dbias(bias);
  for (DType dt : kDTypes) {
    SCOPED_TRACE(DTypeName(dt));
    const std::vector<float> y = Round(RandomVector(rows * n, rng, 2.0f), dt);
    DeviceBuffer dy(Encode(y, dt));
    ASSERT_TRUE(AddBias(dy.get(), dbias.as<float>(), rows, n, dt, nullptr).ok());
    Sync();
    // One float32 addition, then one rounding to dt.
    std::vector<float> want(y.size());
    for (int64_t t = 0; t < rows; ++t) {
      for (int64_t i = 0; i < n; ++i) want[t * n + i] = y[t * n + i] + bias[i];
    }
    EXPECT_EQ(DownloadBytes(dy, y.size(), dt), Encode(want, dt));
  }
}

TEST_F(CudaGlue, RmsNormStridedMatchesFloat64AndLeavesPaddingAlone) {
  std::mt19937_64 rng(21);
  const int64_t rows = 5, n = 1031, x_stride = n + 17, y_stride = n + 5;
  const std::vector<float> w = RandomVector(n, rng);
  const float kSentinel = 7.0f;  // exact in every dtype
  DeviceBuffer dw(w);
  for (DType dt : kDTypes) {
    for (bool with_w : {true, false}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << (with_w ? " with w" : " without w"));
      const std::vector<float> x = Round(RandomVector(rows * x_stride, rng, 3.0f), dt);
      const std::vector<float> y0(rows * y_stride, kSentinel);
      DeviceBuffer dx(Encode(x, dt)), dy(Encode(y0, dt));
      ASSERT_TRUE(RmsNormStrided(dx.get(), x_stride, with_w ? dw.as<float>() : nullptr, rows, n,
                                 1e-6f, dt, dy.get(), y_stride, nullptr)
                      .ok());
      Sync();
      const std::vector<float> got = Decode(DownloadBytes(dy, y0.size(), dt), dt);
      for (int64_t r = 0; r < rows; ++r) {
        SCOPED_TRACE(::testing::Message() << "row " << r);
        const std::vector<double> want = reference::RmsNormRef(
            Widen(&x[r * x_stride], n), with_w ? Widen(w.data(), n) : std::vector<double>{}, 1e-6);
        ExpectClose(&got[r * y_stride], want, dt, 4.0);
        for (int64_t i = n; i < y_stride; ++i) ASSERT_EQ(got[r * y_stride + i], kSentinel) << i;
      }
    }
  }
}

// The contract with the executor: stride == n is RmsNorm, bit for bit, and in place is the same.
TEST_F(CudaGlue, RmsNormStridedAtStrideNIsRmsNormBitForBit) {
  std::mt19937_64 rng(22);
  const int64_t rows = 6;
  for (int64_t n : {int64_t{100}, int64_t{4096 + 7}}) {
    const std::vector<float> w = RandomVector(n, rng);
    DeviceBuffer dw(w);
    for (DType dt : kDTypes) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " n " << n);
      const std::vector<uint8_t> x = Encode(RandomVector(rows * n, rng, 3.0f), dt);
      DeviceBuffer dx(x), dinplace(x), dref(x.size()), dgot(x.size());
      ASSERT_TRUE(RmsNorm(dx.get(), dw.as<float>(), rows, n, 1e-5f, dt, dref.get(), nullptr).ok());
      ASSERT_TRUE(
          RmsNormStrided(dx.get(), n, dw.as<float>(), rows, n, 1e-5f, dt, dgot.get(), n, nullptr)
              .ok());
      ASSERT_TRUE(RmsNormStrided(dinplace.get(), n, dw.as<float>(), rows, n, 1e-5f, dt,
                                 dinplace.get(), n, nullptr)
                      .ok());
      Sync();
      const std::vector<uint8_t> ref = dref.Download<uint8_t>(x.size());
      EXPECT_EQ(dgot.Download<uint8_t>(x.size()), ref);
      EXPECT_EQ(dinplace.Download<uint8_t>(x.size()), ref);
    }
  }
}

TEST_F(CudaGlue, LayerNormMatchesFloat64) {
  std::mt19937_64 rng(23);
  const int64_t rows = 4, n = 777;
  const std::vector<float> w = RandomVector(n, rng), b = RandomVector(n, rng);
  std::vector<float> x = RandomVector(rows * n, rng, 2.0f);
  for (float& v : x) v += 3.0f;  // a mean well away from zero
  DeviceBuffer dw(w), db(b);
  for (bool affine : {true, false}) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << (affine ? "w, b" : "no w, b") << (in_place ? " in place" : ""));
      DeviceBuffer dx(x), dy(x.size() * sizeof(float));
      float* out = in_place ? dx.as<float>() : dy.as<float>();
      ASSERT_TRUE(LayerNormF32(dx.as<float>(), affine ? dw.as<float>() : nullptr,
                               affine ? db.as<float>() : nullptr, rows, n, 1e-5f, out, nullptr)
                      .ok());
      Sync();
      const std::vector<float> got = (in_place ? dx : dy).Download<float>(x.size());
      for (int64_t r = 0; r < rows; ++r) {
        SCOPED_TRACE(::testing::Message() << "row " << r);
        const std::vector<double> want = reference::LayerNormRef(
            Widen(&x[r * n], n), affine ? Widen(w.data(), n) : std::vector<double>{},
            affine ? Widen(b.data(), n) : std::vector<double>{}, 1e-5);
        ExpectClose(&got[r * n], want, DType::kF32, 4.0);
      }
    }
  }
}

TEST_F(CudaGlue, ConvertRoundsToNearestEvenBetweenEveryPair) {
  std::mt19937_64 rng(24);
  // Random values plus the edges: signed zero, f16 subnormals, f16's largest value and the
  // halfway point above it (rounds to infinity), values beyond f16, infinities.
  std::vector<float> values = RandomVector(10007, rng, 8.0f);
  const float kInf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 1e-6f, -6e-8f, 3e-8f, 65504.0f, 65519.0f, 65520.0f, -70000.0f, 1e30f,
                  3.3e38f, kInf, -kInf}) {
    values.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(values.size());
  for (DType from : kDTypes) {
    const std::vector<float> src = Round(values, from);
    DeviceBuffer dsrc(Encode(src, from));
    for (DType to : kDTypes) {
      SCOPED_TRACE(::testing::Message() << DTypeName(from) << " -> " << DTypeName(to));
      DeviceBuffer ddst(n * DTypeBytes(to));
      ASSERT_TRUE(Convert(dsrc.get(), from, ddst.get(), to, n, nullptr).ok());
      Sync();
      // The host encoder rounds to nearest even (common/util/half.h); src is exact in float.
      EXPECT_EQ(DownloadBytes(ddst, n, to), Encode(src, to));
    }
    SCOPED_TRACE(::testing::Message() << DTypeName(from) << " in place");
    ASSERT_TRUE(Convert(dsrc.get(), from, dsrc.get(), from, n, nullptr).ok());
    Sync();
    EXPECT_EQ(DownloadBytes(dsrc, n, from), Encode(src, from));
  }
}

// Host model of a strided copy on raw bytes.
std::vector<uint8_t> CopyRowsOnHost(const std::vector<uint8_t>& src, int64_t src_stride,
                                    std::vector<uint8_t> dst, int64_t dst_stride, int64_t rows,
                                    int64_t width, size_t elem) {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(&dst[r * dst_stride * elem], &src[r * src_stride * elem], width * elem);
  }
  return dst;
}

TEST_F(CudaGlue, CopyRowsHonoursBothStrides) {
  std::mt19937_64 rng(25);
  const int64_t rows = 9, width = 300, src_stride = 311, dst_stride = 333;
  for (DType dt : kDTypes) {
    SCOPED_TRACE(DTypeName(dt));
    const std::vector<uint8_t> src = Encode(RandomVector(rows * src_stride, rng), dt);
    const std::vector<uint8_t> dst0 = Encode(RandomVector(rows * dst_stride, rng), dt);
    DeviceBuffer dsrc(src), ddst(dst0);
    ASSERT_TRUE(
        CopyRows(dsrc.get(), src_stride, ddst.get(), dst_stride, rows, width, dt, nullptr).ok());
    Sync();
    EXPECT_EQ(ddst.Download<uint8_t>(dst0.size()),
              CopyRowsOnHost(src, src_stride, dst0, dst_stride, rows, width, DTypeBytes(dt)));
  }
}

TEST_F(CudaGlue, GatherRowsByIndexZeroesNegativeIndices) {
  std::mt19937_64 rng(26);
  const int64_t src_rows = 50, n = 257;
  const std::vector<int32_t> index = {3, -1, 49, 0, 3, -7, 12};
  const int64_t count = static_cast<int64_t>(index.size());
  DeviceBuffer dindex(index);
  for (DType dt : kDTypes) {
    SCOPED_TRACE(DTypeName(dt));
    const std::vector<uint8_t> src = Encode(RandomVector(src_rows * n, rng), dt);
    const size_t row_bytes = n * DTypeBytes(dt);
    // Start from non-zero bytes so that a skipped row cannot pass as zeros.
    DeviceBuffer dsrc(src), ddst(std::vector<uint8_t>(count * row_bytes, 0x5a));
    ASSERT_TRUE(
        GatherRowsByIndex(dsrc.get(), dindex.as<int32_t>(), count, n, dt, ddst.get(), nullptr)
            .ok());
    Sync();
    std::vector<uint8_t> want(count * row_bytes, 0);  // +0.0 is all-zero bytes in every dtype
    for (int64_t i = 0; i < count; ++i) {
      if (index[i] >= 0) std::memcpy(&want[i * row_bytes], &src[index[i] * row_bytes], row_bytes);
    }
    EXPECT_EQ(ddst.Download<uint8_t>(want.size()), want);
  }
}

TEST_F(CudaGlue, ScaleMultipliesInFloat32) {
  std::mt19937_64 rng(27);
  const int64_t n = 100003;
  const float s = 0.125f * 3.0f / 7.0f;
  const std::vector<float> x = RandomVector(n, rng, 5.0f);
  DeviceBuffer dx(x);
  ASSERT_TRUE(Scale(dx.as<float>(), n, s, nullptr).ok());
  Sync();
  std::vector<float> want(x);
  for (float& v : want) v *= s;
  EXPECT_EQ(dx.Download<float>(n), want);
}

TEST_F(CudaGlue, FillHeadIdsCountsHeadsPerToken) {
  const int64_t tokens = 37;
  const int used = 16, kSpare = 5;
  DeviceBuffer dids(std::vector<int32_t>(tokens * used + kSpare, -9));
  ASSERT_TRUE(FillHeadIds(dids.as<int32_t>(), tokens, used, nullptr).ok());
  Sync();
  std::vector<int32_t> want(tokens * used + kSpare, -9);  // nothing written past the end
  for (int64_t t = 0; t < tokens; ++t) {
    for (int j = 0; j < used; ++j) want[t * used + j] = j;
  }
  EXPECT_EQ(dids.Download<int32_t>(want.size()), want);
}

// ---- Argument checks: no CUDA call is made, so these run without a GPU. ----

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(CudaGlueArguments, ZeroCountsQueueNothing) {
  // Null pointers everywhere: a launch or a copy would fail; a zero count must not reach one.
  EXPECT_TRUE(AddBias(nullptr, nullptr, 0, 8, DType::kF16, nullptr).ok());
  EXPECT_TRUE(AddBias(nullptr, nullptr, 8, 0, DType::kF16, nullptr).ok());
  EXPECT_TRUE(
      RmsNormStrided(nullptr, 0, nullptr, 0, 64, 1e-6f, DType::kBF16, nullptr, 0, nullptr).ok());
  EXPECT_TRUE(LayerNormF32(nullptr, nullptr, nullptr, 0, 64, 1e-5f, nullptr, nullptr).ok());
  EXPECT_TRUE(Convert(nullptr, DType::kF32, nullptr, DType::kF16, 0, nullptr).ok());
  EXPECT_TRUE(Convert(nullptr, DType::kF16, nullptr, DType::kF16, 0, nullptr).ok());
  EXPECT_TRUE(CopyRows(nullptr, 0, nullptr, 0, 0, 16, DType::kF32, nullptr).ok());
  EXPECT_TRUE(CopyRows(nullptr, 0, nullptr, 0, 4, 0, DType::kF32, nullptr).ok());
  EXPECT_TRUE(GatherRowsByIndex(nullptr, nullptr, 0, 16, DType::kF16, nullptr, nullptr).ok());
  EXPECT_TRUE(Scale(nullptr, 0, 2.0f, nullptr).ok());
  EXPECT_TRUE(FillHeadIds(nullptr, 0, 16, nullptr).ok());
  EXPECT_TRUE(FillHeadIds(nullptr, 16, 0, nullptr).ok());
}

void ExpectInvalid(const absl::Status& s, const std::string& kernel, const std::string& detail) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Message(s), HasSubstr("cuda " + kernel + ": "));
  EXPECT_THAT(Message(s), HasSubstr(detail));
}

TEST(CudaGlueArguments, BadArgumentsAreRejectedNamingTheKernel) {
  // Non-null host addresses that are never dereferenced: every call below has one bad argument
  // and must return before queueing anything.
  alignas(16) static char fake[64];
  void* p = fake;
  auto* f = reinterpret_cast<float*>(fake);
  auto* ids = reinterpret_cast<int32_t*>(fake);

  ExpectInvalid(AddBias(p, f, -1, 8, DType::kF32, nullptr), "add bias", "-1 rows of 8");
  ExpectInvalid(AddBias(p, f, 2, -8, DType::kF32, nullptr), "add bias", "expected counts ≥ 0");
  ExpectInvalid(AddBias(nullptr, f, 2, 8, DType::kF32, nullptr), "add bias", "y is null");
  ExpectInvalid(AddBias(p, nullptr, 2, 8, DType::kF32, nullptr), "add bias", "bias is null");
  ExpectInvalid(AddBias(p, f, INT64_MAX / 2, 4, DType::kF32, nullptr), "add bias",
                "overflow int64");

  ExpectInvalid(RmsNormStrided(p, 8, f, -2, 8, 1e-6f, DType::kF16, p, 8, nullptr),
                "rmsnorm strided", "-2 rows");
  ExpectInvalid(RmsNormStrided(p, 7, f, 2, 8, 1e-6f, DType::kF16, p, 8, nullptr), "rmsnorm strided",
                "x stride 7 is shorter than the row of 8");
  ExpectInvalid(RmsNormStrided(p, 8, f, 2, 8, 1e-6f, DType::kF16, p, 3, nullptr), "rmsnorm strided",
                "y stride 3");
  ExpectInvalid(RmsNormStrided(nullptr, 8, f, 2, 8, 1e-6f, DType::kF16, p, 8, nullptr),
                "rmsnorm strided", "x is null");
  ExpectInvalid(RmsNormStrided(p, 8, f, 2, 8, 1e-6f, DType::kF16, nullptr, 8, nullptr),
                "rmsnorm strided", "y is null");
  ExpectInvalid(RmsNormStrided(p, 8, f, 2, 8, 1e-6f, DType::kF16, p, 9, nullptr), "rmsnorm strided",
                "in place with x stride 8 and y stride 9");
  ExpectInvalid(RmsNormStrided(p, INT64_MAX / 2, f, 4, 8, 1e-6f, DType::kF16, p, 8, nullptr),
                "rmsnorm strided", "overflow int64");

  ExpectInvalid(LayerNormF32(f, f, f, 2, -1, 1e-5f, f, nullptr), "layernorm", "of -1 values");
  ExpectInvalid(LayerNormF32(nullptr, f, f, 2, 8, 1e-5f, f, nullptr), "layernorm", "x is null");
  ExpectInvalid(LayerNormF32(f, f, f, 2, 8, 1e-5f, nullptr, nullptr), "layernorm", "y is null");

  ExpectInvalid(Convert(p, DType::kF32, p, DType::kF16, -3, nullptr), "convert", "-3 values");
  ExpectInvalid(Convert(nullptr, DType::kF32, p, DType::kF16, 3, nullptr), "convert",
                "src is null");
  ExpectInvalid(Convert(p, DType::kF32, nullptr, DType::kF16, 3, nullptr), "convert",
                "dst is null");
  // Narrowing in place would overwrite values before they are read; so would a shifted copy.
  ExpectInvalid(Convert(p, DType::kF32, p, DType::kF16, 4, nullptr), "convert", "overlap");
  ExpectInvalid(Convert(fake, DType::kF16, fake + 2, DType::kF16, 4, nullptr), "convert",
                "overlap");
  ExpectInvalid(Convert(fake + 6, DType::kF16, fake, DType::kF32, 4, nullptr), "convert",
                "overlap");

  ExpectInvalid(CopyRows(p, 8, p, 8, -1, 8, DType::kBF16, nullptr), "copy rows", "-1 rows");
  ExpectInvalid(CopyRows(p, 4, p, 8, 2, 8, DType::kBF16, nullptr), "copy rows",
                "src stride 4 is shorter than the row of 8");
  ExpectInvalid(CopyRows(p, 8, p, 5, 2, 8, DType::kBF16, nullptr), "copy rows",
                "dst stride 5 is shorter");
  ExpectInvalid(CopyRows(nullptr, 8, p, 8, 2, 8, DType::kBF16, nullptr), "copy rows",
                "src is null");
  ExpectInvalid(CopyRows(p, 8, nullptr, 8, 2, 8, DType::kBF16, nullptr), "copy rows",
                "dst is null");

  ExpectInvalid(GatherRowsByIndex(p, ids, -4, 8, DType::kF32, p, nullptr), "gather rows by index",
                "-4 rows");
  ExpectInvalid(GatherRowsByIndex(nullptr, ids, 4, 8, DType::kF32, p, nullptr),
                "gather rows by index", "src is null");
  ExpectInvalid(GatherRowsByIndex(p, nullptr, 4, 8, DType::kF32, p, nullptr),
                "gather rows by index", "index is null");
  ExpectInvalid(GatherRowsByIndex(p, ids, 4, 8, DType::kF32, nullptr, nullptr),
                "gather rows by index", "dst is null");

  ExpectInvalid(Scale(f, -5, 2.0f, nullptr), "scale", "-5 values");
  ExpectInvalid(Scale(nullptr, 5, 2.0f, nullptr), "scale", "x is null");

  ExpectInvalid(FillHeadIds(ids, -1, 4, nullptr), "fill head ids", "-1 tokens");
  ExpectInvalid(FillHeadIds(ids, 4, -1, nullptr), "fill head ids", "of -1 heads");
  ExpectInvalid(FillHeadIds(nullptr, 4, 4, nullptr), "fill head ids", "ids is null");
}

}  // namespace
}  // namespace tessera::cuda
