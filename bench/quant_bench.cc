// Quant kernel benchmarks: dequantize throughput per type, decode matvec bandwidth on a
// weight matrix several times larger than the last-level cache, prefill (batch 64)
// GFLOP/s, and memcpy / streaming-read bandwidth of the same machine in the same run as
// the yardstick. Figures only; nothing here asserts a speed.
//
//   quant_bench [--benchmark_filter=...]
//   TESSERA_BENCH_WEIGHT_MB=1024 (default) sizes the decode matrix; TESSERA_ISA caps the ISA.
#include <benchmark/benchmark.h>
#include <emmintrin.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/quant/type_traits.h"
#include "common/util/half.h"
#include "kernels/cpu/decode_panels.h"
#include "kernels/cpu/dequantize_fast.h"
#include "kernels/cpu/matmul.h"

namespace tessera {
namespace {

using gguf::GgmlType;

constexpr int64_t kCols = 4096;

int64_t WeightBytesTarget() {
  const char* mb = std::getenv("TESSERA_BENCH_WEIGHT_MB");
  return (mb ? std::atoll(mb) : 1024) << 20;
}

// Fast fill: random quants, every fp16 scale field a small finite value, so kernels do
// realistic work (no NaN/denormal slow paths).
std::unique_ptr<uint8_t[]> FillBlocks(GgmlType type, int64_t n_blocks) {
  const quant::QuantTraits* t = quant::FindQuantTraits(type);
  const size_t bytes = static_cast<size_t>(n_blocks) * t->block_bytes;
  std::unique_ptr<uint8_t[]> data(new uint8_t[bytes]);
  uint64_t s = 0x9E3779B97F4A7C15ULL;
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    std::memcpy(data.get() + i, &s, 8);
  }
  // A benign scale at every 2-byte position that may hold one: rewrite the known fields.
  std::vector<int> offs;
  switch (type) {
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
      offs = {0, 2};
      break;
    case GgmlType::kQ2_K:
      offs = {80, 82};
      break;
    case GgmlType::kQ3_K:
      offs = {108};
      break;
    case GgmlType::kQ6_K:
      offs = {208};
      break;
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_K:
      break;
    default:
      offs = {0};
      break;
  }
  const uint16_t scale = FloatToFp16(0.01f);
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int off : offs) std::memcpy(data.get() + b * t->block_bytes + off, &scale, 2);
  }
  if (type == GgmlType::kF16 || type == GgmlType::kBF16) {
    for (size_t i = 0; i + 2 <= bytes; i += 2) std::memcpy(data.get() + i, &scale, 2);
  }
  if (type == GgmlType::kF32 || type == GgmlType::kQ8_K) {
    const float f = 0.01f;
    for (int64_t b = 0; b < n_blocks; ++b) std::memcpy(data.get() + b * t->block_bytes, &f, 4);
    if (type == GgmlType::kF32) {
      for (size_t i = 0; i + 4 <= bytes; i += 4) std::memcpy(data.get() + i, &f, 4);
    }
  }
  return data;
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Sums `bytes` of `data` with the pool's threads: a streaming read at memory bandwidth.
// SSE2 (baseline x86-64) with four independent accumulators, so that the loop is bound by
// memory, not by the adds, and the yardstick is not slower than the kernels it judges.
uint64_t ReadPass(const uint8_t* data, size_t bytes, cpu::ThreadPool& pool) {
  constexpr int64_t kChunks = 256;
  std::vector<uint64_t> sums(kChunks);
  const size_t chunk = bytes / kChunks / 64 * 64;
  pool.ParallelFor(kChunks, [&](int64_t c, int) {
    const auto* p = reinterpret_cast<const __m128i*>(data + c * chunk);
    __m128i s0 = _mm_setzero_si128(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < chunk / 16; i += 4) {
      s0 = _mm_add_epi64(s0, _mm_loadu_si128(p + i));
      s1 = _mm_add_epi64(s1, _mm_loadu_si128(p + i + 1));
      s2 = _mm_add_epi64(s2, _mm_loadu_si128(p + i + 2));
      s3 = _mm_add_epi64(s3, _mm_loadu_si128(p + i + 3));
    }
    const __m128i s = _mm_add_epi64(_mm_add_epi64(s0, s1), _mm_add_epi64(s2, s3));
    sums[c] = static_cast<uint64_t>(_mm_cvtsi128_si64(s)) +
              static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(s, s)));
  });
  uint64_t total = 0;
  for (uint64_t v : sums) total += v;
  return total;
}

// --- yardsticks --------------------------------------------------------------------------

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(WeightBytesTarget());
  std::unique_ptr<uint8_t[]> a(new uint8_t[bytes]), b(new uint8_t[bytes]);
  std::memset(a.get(), 1, bytes);
  std::memset(b.get(), 2, bytes);
  for (auto _ : state) {
    std::memcpy(b.get(), a.get(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
  state.SetLabel("bytes copied per second");
}

// Streaming read of the same size with `threads` threads: the bandwidth a decode matvec
// (which only reads weights) could reach.
void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const size_t bytes = static_cast<size_t>(WeightBytesTarget());
  std::unique_ptr<uint8_t[]> a(new uint8_t[bytes]);
  std::memset(a.get(), 3, bytes);
  cpu::ThreadPool pool(threads);
  for (auto _ : state) benchmark::DoNotOptimize(ReadPass(a.get(), bytes, pool));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
}

// --- kernels -----------------------------------------------------------------------------

// Decoding an L2-resident row of 64K elements: the decoder's compute throughput.
void BM_Dequantize(benchmark::State& state, GgmlType type) {
  const quant::QuantTraits* t = quant::FindQuantTraits(type);
  const int64_t n = 64 * 1024;
  auto data = FillBlocks(type, n / t->block_elems);
  std::vector<float> out(n);
  const cpu::DequantizeRowFn fn = cpu::FastDequantizer(type);
  for (auto _ : state) {
    fn(data.get(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n / t->block_elems *
                          t->block_bytes);
  state.SetLabel(cpu::FastDequantizerName(type));
}

// y = W·x for one vector over a matrix of ~TESSERA_BENCH_WEIGHT_MB: bytes are weight bytes.
// Each iteration also times a streaming read of the same weight bytes with the same
// threads, so `vs_read` (matvec bandwidth / read bandwidth) compares the two under the same
// machine conditions even when other processes compete for the cores.
void BM_Decode(benchmark::State& state, GgmlType type, bool panels) {
  const int threads = static_cast<int>(state.range(0));
  const quant::QuantTraits* t = quant::FindQuantTraits(type);
  const size_t row_bytes = kCols / t->block_elems * t->block_bytes;
  int64_t rows = WeightBytesTarget() / static_cast<int64_t>(row_bytes);
  if (panels) rows -= rows % cpu::kDecodePanelRows;
  const size_t bytes = static_cast<size_t>(rows) * row_bytes;
  auto data = FillBlocks(type, rows * (kCols / t->block_elems));
  auto w = cpu::QuantMatrix::Make(type, rows, kCols, {data.get(), bytes}, "w");
  std::vector<float> x(kCols, 0.5f), y(rows);
  cpu::ThreadPool pool(threads);
  std::unique_ptr<cpu::DecodePanelMatrix> packed;
  if (panels) {
    packed = cpu::DecodePanelMatrix::Pack(type, data.get(), row_bytes, rows, kCols, &pool);
    w->decode_panels = packed.get();
    data.reset();  // only the panels are read (rows is a multiple of 16)
  }
  double read_seconds = 0, matvec_seconds = 0;
  for (auto _ : state) {
    const double t0 = WallSeconds();
    benchmark::DoNotOptimize(ReadPass(panels ? packed->panel(0) : data.get(), bytes, pool));
    const double t1 = WallSeconds();
    auto s = cpu::Matmul(*w, 0, rows, x.data(), 1, y.data(), rows, &pool);
    const double t2 = WallSeconds();
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(y.data());
    state.SetIterationTime(t2 - t1);
    read_seconds += t1 - t0;
    matvec_seconds += t2 - t1;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
  state.counters["read_GB/s"] =
      static_cast<double>(state.iterations()) * bytes / read_seconds / 1e9;
  state.counters["vs_read"] = read_seconds / matvec_seconds;
  state.SetLabel(panels ? "decode panels" : cpu::HasIntegerKernel(type) ? "integer" : "float");
}

// The same matvec on a 256-row matrix that stays in L2: the kernel's compute throughput per
// instruction-set level (CPU time, single thread), free of memory-bandwidth limits. Scalar
// has no integer kernels: it is the portable dequantize-and-multiply fallback. The second
// argument is the vectors per product (decode rows of a step: concurrent decodes, or one
// with drafts to verify); bytes are weight bytes, so a kernel whose cost does not grow with
// the vectors keeps its rate.
void BM_DecodeInCache(benchmark::State& state, GgmlType type, bool panels) {
  const auto isa = static_cast<cpu::Isa>(state.range(0));
  const int64_t vectors = state.range(1);
  if (!cpu::IsaSupported(isa)) {
    state.SkipWithError("instruction set not supported here");
    return;
  }
  const quant::QuantTraits* t = quant::FindQuantTraits(type);
  const int64_t rows = 256;
  const size_t bytes = rows * (kCols / t->block_elems * t->block_bytes);
  auto data = FillBlocks(type, rows * (kCols / t->block_elems));
  auto w = cpu::QuantMatrix::Make(type, rows, kCols, {data.get(), bytes}, "w");
  std::unique_ptr<cpu::DecodePanelMatrix> packed;
  if (panels) {
    packed = cpu::DecodePanelMatrix::Pack(type, data.get(), w->row_bytes, rows, kCols, nullptr);
    w->decode_panels = packed.get();
  }
  std::vector<float> x(kCols * vectors), y(rows * vectors);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f - 0.25f * static_cast<float>(i % 5);
  cpu::MatmulOptions options{cpu::MatmulPath::kDots, isa};
  for (auto _ : state) {
    auto s = cpu::Matmul(*w, 0, rows, x.data(), vectors, y.data(), rows, nullptr, options);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
  state.SetLabel(panels ? "decode panels" : cpu::IsaName(isa));
}

// Per-call cost of small products (attention-sized, f32): what a forward pass with many
// heads pays besides the arithmetic.
void BM_SmallMatmul(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = 128, batch = state.range(1);
  std::vector<float> w(rows * cols, 0.25f), x(batch * cols, 0.5f), y(batch * rows);
  auto m = cpu::QuantMatrix::Make(
      GgmlType::kF32, rows, cols,
      {reinterpret_cast<const uint8_t*>(w.data()), w.size() * sizeof(float)}, "w");
  cpu::ThreadPool pool(2);
  for (auto _ : state) {
    auto s = cpu::Matmul(*m, 0, rows, x.data(), batch, y.data(), rows, &pool);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * rows * cols * batch * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}

// Batch-64 product with a 4096-row matrix of `cols` columns (arg 2; 4096 for the table,
// 16384 to exercise the column-sliced path): compute-bound GFLOP/s (2·rows·cols·batch).
void BM_Prefill(benchmark::State& state, GgmlType type) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t rows = 4096, batch = 64, cols = state.range(1);
  const quant::QuantTraits* t = quant::FindQuantTraits(type);
  const size_t row_bytes = cols / t->block_elems * t->block_bytes;
  auto data = FillBlocks(type, rows * (cols / t->block_elems));
  auto w = cpu::QuantMatrix::Make(type, rows, cols, {data.get(), rows * row_bytes}, "w");
  std::vector<float> x(batch * cols, 0.5f), y(batch * rows);
  cpu::ThreadPool pool(threads);
  const double cpu0 = ProcessCpuSeconds();
  for (auto _ : state) {
    auto s = cpu::Matmul(*w, 0, rows, x.data(), batch, y.data(), rows, &pool);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(y.data());
  }
  const double gflop = 2.0 * rows * cols * batch * static_cast<double>(state.iterations()) / 1e9;
  state.counters["GFLOP/s"] = benchmark::Counter(gflop, benchmark::Counter::kIsRate);
  // Per second of CPU actually granted to this process: the kernel's own efficiency, less
  // sensitive to other processes sharing the cores.
  state.counters["GFLOP/cpu-s"] = gflop / (ProcessCpuSeconds() - cpu0);
}

void RegisterAll() {
  benchmark::RegisterBenchmark("SmallMatmul", BM_SmallMatmul)
      ->Args({64, 1})
      ->Args({64, 16})
      ->Args({512, 1})
      ->Args({512, 16})
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("Memcpy", BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("ReadBandwidth", BM_ReadBandwidth)
      ->Arg(1)
      ->Arg(2)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  for (const quant::QuantTraits& t : quant::SupportedQuantTypes()) {
    benchmark::RegisterBenchmark((std::string("Dequantize/") + t.name).c_str(), BM_Dequantize,
                                 t.type)
        ->Unit(benchmark::kMicrosecond);
  }
  for (const quant::QuantTraits& t : quant::SupportedQuantTypes()) {
    if (t.type == GgmlType::kQ8_K) continue;  // activation-only format
    benchmark::RegisterBenchmark((std::string("Decode/") + t.name).c_str(), BM_Decode, t.type,
                                 false)
        ->Arg(1)
        ->Arg(2)
        ->Unit(benchmark::kMillisecond)
        ->UseManualTime();
    if (cpu::DecodePanelMatrix::Covers(t.type)) {
      benchmark::RegisterBenchmark((std::string("DecodePanels/") + t.name).c_str(), BM_Decode,
                                   t.type, true)
          ->Arg(1)
          ->Arg(2)
          ->Unit(benchmark::kMillisecond)
          ->UseManualTime();
    }
  }
  for (const quant::QuantTraits& t : quant::SupportedQuantTypes()) {
    if (t.type == GgmlType::kQ8_K) continue;
    benchmark::RegisterBenchmark((std::string("DecodeInCache/") + t.name).c_str(), BM_DecodeInCache,
                                 t.type, false)
        ->ArgsProduct({{static_cast<int>(cpu::Isa::kScalar), static_cast<int>(cpu::Isa::kAvx2),
                        static_cast<int>(cpu::Isa::kAvx512)},
                       {1, 2, 3, 4, 5, 8, 16}})
        ->Unit(benchmark::kMicrosecond);
    if (cpu::DecodePanelMatrix::Covers(t.type)) {
      benchmark::RegisterBenchmark((std::string("DecodePanelsInCache/") + t.name).c_str(),
                                   BM_DecodeInCache, t.type, true)
          ->ArgsProduct({{static_cast<int>(cpu::Isa::kAvx512)}, {1, 2, 3, 4, 5, 8}})
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (const quant::QuantTraits& t : quant::SupportedQuantTypes()) {
    if (t.type == GgmlType::kQ8_K) continue;
    auto* b = benchmark::RegisterBenchmark((std::string("Prefill64/") + t.name).c_str(), BM_Prefill,
                                           t.type);
    b->Args({1, 4096})->Args({2, 4096})->Unit(benchmark::kMillisecond)->UseRealTime();
    if (t.type == GgmlType::kQ4_K) b->Args({1, 16384})->Args({2, 16384});
  }
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  tessera::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
