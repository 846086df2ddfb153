// Decode GEMV and prefill GEMM figures on the local GPU, next to a device-to-device copy
// measured in the same run (tests/gpu/run.sh prints them in its summary):
//
//   cuda_bench [--seconds S]
//
// Every figure is a median of timed repetitions (CUDA events). Bandwidth counts bytes
// moved: a copy reads and writes each byte (2 × size), a GEMV reads its weights once.
// Tokens/s estimates divide that bandwidth by the weight bytes of a whole model (one GEMV
// pass per token for every weight): a ceiling for a bandwidth-bound decoder, not a measurement
// of the executor.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/quant/type_traits.h"
#include "common/util/half.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/matmul_kernels.h"

namespace tessera::cuda {
namespace {

using gguf::GgmlType;

#define CHECK_CUDA(expr)                                                                         \
  do {                                                                                           \
    cudaError_t e_ = (expr);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

void CheckOk(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, std::string(s.message()).c_str());
    std::exit(1);
  }
}

// Median milliseconds of `reps` runs of `fn` (after one warm-up).
double MedianMs(int reps, const std::function<void()>& fn) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  fn();
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    CHECK_CUDA(cudaEventRecord(a));
    fn();
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct DeviceMemory {
  void* p = nullptr;
  explicit DeviceMemory(size_t bytes) { CHECK_CUDA(cudaMalloc(&p, bytes)); }
  ~DeviceMemory() { cudaFree(p); }
};

std::vector<uint8_t> RandomWeights(GgmlType type, int64_t rows, int64_t cols,
                                   std::mt19937_64& rng) {
  const quant::QuantTraits* t = quant::FindQuantTraits(type);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> row(cols);
  std::vector<uint8_t> out(static_cast<size_t>(rows * cols / t->block_elems * t->block_bytes));
  const size_t row_bytes = out.size() / rows;
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = d(rng);
    t->quantize(row.data(), out.data() + r * row_bytes, cols);
  }
  return out;
}

int Run() {
  std::vector<DeviceInfo> devices = ListDevices();
  if (devices.empty()) {
    std::printf("cuda_bench: no CUDA device visible; nothing measured\n");
    return 0;
  }
  const DeviceInfo& dev = devices[0];
  std::printf("device: %s (sm_%d%d, %.1f GiB)\n", dev.name.c_str(), dev.compute_major,
              dev.compute_minor, dev.total_memory / 1073741824.0);
  CHECK_CUDA(cudaSetDevice(0));

  // Device-to-device copy: the bandwidth ceiling of this run.
  const size_t copy_bytes = size_t{1} << 30;
  DeviceMemory src(copy_bytes), dst(copy_bytes);
  CHECK_CUDA(cudaMemset(src.p, 1, copy_bytes));
  const double copy_ms = MedianMs(
      10, [&] { CHECK_CUDA(cudaMemcpyAsync(dst.p, src.p, copy_bytes, cudaMemcpyDeviceToDevice)); });
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e6);
  std::printf("d2d_copy_GBps %.1f\n", copy_gbs);

  // Decode GEMV on a 8192 x 8192 matrix (a 70B-class projection), batch 1 and 32.
  std::mt19937_64 rng(7);
  const int64_t rows = 8192, cols = 8192;
  std::normal_distribution<float> xd(0.0f, 1.0f);
  std::vector<float> x(cols * 32);
  for (float& v : x) v = xd(rng);
  DeviceMemory dx(x.size() * 4), dy(rows * 32 * 4);
  CHECK_CUDA(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  cublasHandle_t cublas;
  if (cublasCreate(&cublas) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasCreate failed\n");
    return 1;
  }
  const size_t scratch_bytes = static_cast<size_t>(rows) * cols * 2;
  DeviceMemory scratch(scratch_bytes), dxh(cols * 512 * 2), dyh(rows * 512 * 2);
  CHECK_CUDA(cudaMemset(dxh.p, 0, cols * 512 * 2));

  std::printf("%-8s %10s %10s %10s %12s %12s %10s\n", "type", "GB/s b=1", "%copy", "us b=1",
              "tok/s b=1*", "tok/s b=32*", "max_rel_err");
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kQ6_K, GgmlType::kQ4_0,
                        GgmlType::kQ5_K, GgmlType::kF16}) {
    const std::vector<uint8_t> w = RandomWeights(type, rows, cols, rng);
    DeviceMemory dw(w.size());
    CHECK_CUDA(cudaMemcpy(dw.p, w.data(), w.size(), cudaMemcpyHostToDevice));
    const DeviceMatrix m{type, rows, cols, w.size() / rows, dw.p};
    const double ms1 =
        MedianMs(20, [&] { CheckOk(Gemv(m, dx.p, DType::kF32, 1, dy.p, nullptr), "gemv"); });
    const double ms32 =
        MedianMs(10, [&] { CheckOk(Gemv(m, dx.p, DType::kF32, 32, dy.p, nullptr), "gemv b32"); });
    const double gbs1 = w.size() / (ms1 * 1e6);
    const double gbs32 = w.size() / (ms32 * 1e6);
    // Error against the CPU's float path on the same weights and x (batch 1).
    std::vector<float> gpu(rows), cpu(rows);
    CheckOk(Gemv(m, dx.p, DType::kF32, 1, dy.p, nullptr), "gemv");
    CHECK_CUDA(cudaMemcpy(gpu.data(), dy.p, rows * 4, cudaMemcpyDeviceToHost));
    absl::StatusOr<cpu::QuantMatrix> qm = cpu::QuantMatrix::Make(type, rows, cols, w, "bench");
    CheckOk(qm.status(), "QuantMatrix");
    cpu::MatmulOptions opt;
    opt.path = cpu::MatmulPath::kFloat;
    CheckOk(cpu::Matmul(*qm, 0, rows, x.data(), 1, cpu.data(), rows, nullptr, opt), "cpu matmul");
    double err = 0, mag = 0;
    for (int64_t r = 0; r < rows; ++r) {
      err = std::max(err, static_cast<double>(std::fabs(gpu[r] - cpu[r])));
      mag = std::max(mag, static_cast<double>(std::fabs(cpu[r])));
    }
    // A model whose every weight is of this type and holds 4.5e9 bytes at Q4_K (an 8B
    // model): tokens/s if decode ran at this GEMV's bandwidth.
    const double model_bytes = 8.0e9 * w.size() / (rows * cols);
    std::printf("%-8s %10.1f %9.0f%% %10.1f %12.1f %12.1f %10.2e\n",
                quant::FindQuantTraits(type)->name, gbs1, 100.0 * gbs1 / (copy_gbs / 2), ms1 * 1e3,
                gbs1 * 1e9 / model_bytes, 32.0 * gbs32 * 1e9 / model_bytes, err / mag);
  }
  std::printf(
      "* 8B-parameter model of that type, decode bound by the GEMV bandwidth; %%copy "
      "compares the GEMV's weight reads with the copy's read rate (half of d2d_copy)\n");

  // Prefill GEMM, 512 tokens of random activations: dequantize + cublasGemmEx in f16, then
  // both paths in f16 and bf16 — GemmDequantized against GemmTiles (weight tiles decoded into
  // shared memory, tensor-core WMMA) with the largest difference of their outputs.
  {
    const int64_t tokens = 512;
    const std::vector<uint8_t> w = RandomWeights(GgmlType::kQ4_K, rows, cols, rng);
    DeviceMemory dw(w.size());
    CHECK_CUDA(cudaMemcpy(dw.p, w.data(), w.size(), cudaMemcpyHostToDevice));
    const DeviceMatrix m{GgmlType::kQ4_K, rows, cols, w.size() / rows, dw.p};
    std::vector<uint16_t> xf16(cols * tokens), xbf16(cols * tokens);
    for (size_t i = 0; i < xf16.size(); ++i) {
      const float v = xd(rng);
      xf16[i] = FloatToFp16(v);
      xbf16[i] = FloatToBf16(v);
    }
    CHECK_CUDA(cudaMemcpy(dxh.p, xf16.data(), xf16.size() * 2, cudaMemcpyHostToDevice));
    const double flop = 2.0 * rows * cols * tokens;
    const double ms = MedianMs(5, [&] {
      CheckOk(GemmDequantized(cublas, m, dxh.p, DType::kF16, tokens, dyh.p, scratch.p,
                              scratch_bytes, nullptr),
              "gemm");
    });
    const double tflops = flop / (ms * 1e9);
    const double deq_ms = MedianMs(5, [&] {
      CheckOk(Dequantize(GgmlType::kQ4_K, dw.p, rows * cols, DType::kF16, scratch.p, nullptr),
              "deq");
    });
    std::printf("prefill_q4_K_b512_ms %.3f (dequantize %.3f) TFLOPs %.1f tokens_per_s_8B %.0f\n",
                ms, deq_ms, tflops, tokens / (ms * 1e-3 * (8.0e9 / (rows * cols))));
    DeviceMemory dx16(cols * tokens * 2), dy_tiles(rows * tokens * 2);
    for (DType act : {DType::kF16, DType::kBF16}) {
      const std::vector<uint16_t>& xs = act == DType::kF16 ? xf16 : xbf16;
      CHECK_CUDA(cudaMemcpy(dx16.p, xs.data(), xs.size() * 2, cudaMemcpyHostToDevice));
      const double blas_ms = MedianMs(5, [&] {
        CheckOk(GemmDequantized(cublas, m, dx16.p, act, tokens, dyh.p, scratch.p, scratch_bytes,
                                nullptr),
                "gemm");
      });
      const double tiles_ms = MedianMs(5, [&] {
        CheckOk(GemmTiles(m, dx16.p, act, tokens, dy_tiles.p, nullptr), "gemm tiles");
      });
      std::vector<uint16_t> blas(rows * tokens), tiles(rows * tokens);
      CHECK_CUDA(cudaMemcpy(blas.data(), dyh.p, blas.size() * 2, cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(tiles.data(), dy_tiles.p, tiles.size() * 2, cudaMemcpyDeviceToHost));
      double diff = 0, mag = 0;
      for (size_t i = 0; i < blas.size(); ++i) {
        const float b = act == DType::kF16 ? Fp16ToFloat(blas[i]) : Bf16ToFloat(blas[i]);
        const float t = act == DType::kF16 ? Fp16ToFloat(tiles[i]) : Bf16ToFloat(tiles[i]);
        diff = std::max(diff, static_cast<double>(std::fabs(t - b)));
        mag = std::max(mag, static_cast<double>(std::fabs(b)));
      }
      std::printf(
          "prefill_gemm_q4_K_b512_%s cublas_ms %.3f cublas_TFLOPs %.1f tiles_ms %.3f "
          "tiles_TFLOPs %.1f tiles_speedup %.2fx max_rel_diff %.1e\n",
          DTypeName(act), blas_ms, flop / (blas_ms * 1e9), tiles_ms, flop / (tiles_ms * 1e9),
          blas_ms / tiles_ms, diff / mag);
    }
  }
  cublasDestroy(cublas);
  return 0;
}

}  // namespace
}  // namespace tessera::cuda

int main() { return tessera::cuda::Run(); }
