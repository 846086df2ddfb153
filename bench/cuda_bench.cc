// Decode GEMV and prefill GEMM figures on the local GPU, next to a device-to-device copy
// measured in the same run (tests/gpu/run.sh prints them in its summary), then the kernels of
// issue 27 against what they replace (Issue27Kernels):
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
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/launcher_checks.h"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/selection_kernels.h"

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

// The attention shapes the benchmark times: GQA 32 query / 8 KV heads of 128, and MLA's 16
// heads over a 576-wide latent (values: its first 512).
struct AttentionShape {
  const char* name;
  int heads, kv_heads, d_k, d_v;
  bool latent;
};
constexpr AttentionShape kAttentionShapes[] = {{"gqa32/8x128", 32, 8, 128, 128, false},
                                               {"mla16x576/512", 16, 1, 576, 512, true}};

// Zeroed bf16 queries and caches of `seqs` sequences of `context` positions each (blocks of
// 16, in order), and the arguments over them: query i reads sequence seq[i]'s first len[i]
// keys.
struct AttentionCase {
  static constexpr int kBlock = 16;
  AttentionCase(const AttentionShape& sh, int seqs, int context, const std::vector<int32_t>& seq,
                const std::vector<int32_t>& len)
      : k_width(sh.latent ? sh.d_k : static_cast<int64_t>(sh.kv_heads) * sh.d_k),
        v_width(static_cast<int64_t>(sh.kv_heads) * sh.d_v),
        tokens(static_cast<size_t>(seqs) * context),
        dq(seq.size() * sh.heads * sh.d_k * 2),
        dk(tokens * k_width * 2),
        dv(tokens * v_width * 2),
        dout(seq.size() * sh.heads * sh.d_v * 2),
        dtable(tokens / kBlock * 4),
        dseq(seq.size() * 4),
        dlen(len.size() * 4) {
    CHECK_CUDA(cudaMemset(dq.p, 0, seq.size() * sh.heads * sh.d_k * 2));
    CHECK_CUDA(cudaMemset(dk.p, 0, tokens * k_width * 2));
    CHECK_CUDA(cudaMemset(dv.p, 0, tokens * v_width * 2));
    std::vector<int32_t> table(tokens / kBlock);
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
    CHECK_CUDA(cudaMemcpy(dtable.p, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dseq.p, seq.data(), seq.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dlen.p, len.data(), len.size() * 4, cudaMemcpyHostToDevice));
    args.queries = static_cast<int64_t>(seq.size());
    args.heads = sh.heads;
    args.kv_heads = sh.kv_heads;
    args.d_k = sh.d_k;
    args.d_v = sh.d_v;
    args.block_size = kBlock;
    args.scale = 0.088f;
    args.q = dq.p;
    args.q_token_stride = static_cast<int64_t>(sh.heads) * sh.d_k;
    args.out = dout.p;
    args.out_token_stride = static_cast<int64_t>(sh.heads) * sh.d_v;
    if (sh.latent) {
      args.k = args.v = {dk.p, kBlock * k_width, k_width, 0};
    } else {
      args.k = {dk.p, kBlock * k_width, k_width, sh.d_k};
      args.v = {dv.p, kBlock * v_width, v_width, sh.d_v};
    }
    args.block_table = static_cast<const int32_t*>(dtable.p);
    args.max_blocks = context / kBlock;
    args.query_seq = static_cast<const int32_t*>(dseq.p);
    args.query_kv_len = static_cast<const int32_t*>(dlen.p);
  }
  const int64_t k_width, v_width;
  const size_t tokens;
  DeviceMemory dq, dk, dv, dout, dtable, dseq, dlen;
  PagedAttentionArgs args;
};

// Issue 27's kernels against what they replace, same run: the decode GEMV at 1..64 rows in
// one weight pass (against passes of 8, the former kernel's shape, as 8-row calls), the
// grouped expert product sorted by expert (sort included) against one warp per (row, choice),
// prefill attention tiled over keys against one block per (query, head), and sampling on the
// device against copying the logits to the host.
void Issue27Kernels(std::mt19937_64& rng) {
  std::normal_distribution<float> xd(0.0f, 1.0f);
  {
    const int64_t rows = 8192, cols = 8192;
    const std::vector<uint8_t> w = RandomWeights(GgmlType::kQ4_K, rows, cols, rng);
    DeviceMemory dw(w.size()), dx(cols * 64 * 2), dy(rows * 64 * 2);
    CHECK_CUDA(cudaMemcpy(dw.p, w.data(), w.size(), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(dx.p, 0, cols * 64 * 2));
    const DeviceMatrix m{GgmlType::kQ4_K, rows, cols, w.size() / rows, dw.p};
    for (int64_t b : {1, 8, 16, 32, 64}) {
      const double one =
          MedianMs(10, [&] { CheckOk(Gemv(m, dx.p, DType::kBF16, b, dy.p, nullptr), "gemv"); });
      const double eights = MedianMs(10, [&] {
        for (int64_t b0 = 0; b0 < b; b0 += 8) {
          CheckOk(Gemv(m, static_cast<uint8_t*>(dx.p) + b0 * cols * 2, DType::kBF16,
                       std::min<int64_t>(8, b - b0), static_cast<uint8_t*>(dy.p) + b0 * rows * 2,
                       nullptr),
                  "gemv 8");
        }
      });
      std::printf("issue27_gemv_q4_K_8192_b%d one_pass_ms %.4f passes_of_8_ms %.4f speedup %.2fx\n",
                  static_cast<int>(b), one, eights, eights / one);
    }
  }
  {
    // 64 experts of 1408 x 2048 (Q4_K), 4096 tokens x 6 choices spread evenly.
    const int experts = 64, used = 6;
    const int64_t rows = 1408, cols = 2048, tokens = 4096, n = tokens * used;
    const std::vector<uint8_t> w = RandomWeights(GgmlType::kQ4_K, rows * experts, cols, rng);
    std::vector<int32_t> ids(n);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % experts);
    DeviceMemory dw(w.size()), dids(n * 4), dorder(n * 4), doffsets((experts + 2) * 4),
        dx(tokens * cols * 2), dy(n * rows * 2);
    CHECK_CUDA(cudaMemcpy(dw.p, w.data(), w.size(), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dids.p, ids.data(), n * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(dx.p, 0, tokens * cols * 2));
    GroupedGemvArgs g;
    g.w = DeviceMatrix{GgmlType::kQ4_K, rows, cols, w.size() / (rows * experts), dw.p};
    g.member_bytes = w.size() / experts;
    g.members = experts;
    g.ids = static_cast<const int32_t*>(dids.p);
    g.tokens = tokens;
    g.used = used;
    g.x = dx.p;
    g.y = dy.p;
    const double per_choice =
        MedianMs(3, [&] { CheckOk(GroupedGemv(g, DType::kBF16, nullptr), "grouped"); });
    GroupedGemvArgs s = g;
    s.order = static_cast<const int32_t*>(dorder.p);
    s.offsets = static_cast<const int32_t*>(doffsets.p);
    const double sorted = MedianMs(3, [&] {
      CheckOk(SortByMember(g.ids, n, experts, 0, static_cast<int32_t*>(dorder.p),
                           static_cast<int32_t*>(doffsets.p), nullptr),
              "sort");
      CheckOk(GroupedGemv(s, DType::kBF16, nullptr), "sorted grouped");
    });
    // The tensor-core path the executor takes for prompts above 64 tokens (bf16).
    const double tiles = MedianMs(3, [&] {
      CheckOk(SortByMember(g.ids, n, experts, 0, static_cast<int32_t*>(dorder.p),
                           static_cast<int32_t*>(doffsets.p), nullptr),
              "sort");
      CheckOk(GroupedGemmTiles(s, DType::kBF16, nullptr), "grouped gemm tiles");
    });
    std::printf(
        "issue27_experts_q4_K_64x1408x2048_t4096_k6 per_choice_ms %.3f sorted_ms %.3f "
        "tiles_ms %.3f speedup_sorted %.2fx speedup_tiles %.2fx\n",
        per_choice, sorted, tiles, per_choice / sorted, per_choice / tiles);
  }
  for (const AttentionShape& sh : kAttentionShapes) {
    // Prefill: one prompt of T tokens, causal.
    for (int T : {512, 4096}) {
      std::vector<int32_t> len(T);
      for (int i = 0; i < T; ++i) len[i] = i + 1;
      AttentionCase c(sh, 1, T, std::vector<int32_t>(T, 0), len);
      const double per_query =
          MedianMs(3, [&] { CheckOk(PagedAttention(c.args, DType::kBF16, nullptr), "attention"); });
      const double tiled = MedianMs(3, [&] {
        CheckOk(PagedAttentionTiled(c.args, DType::kBF16, nullptr), "tiled attention");
      });
      // On tensor cores (what the executor runs for such prompts in 16 bits; MLA where the
      // device's opt-in shared memory holds the tile).
      double mma = 0;
      if (CheckMmaAttention(c.args, DType::kBF16, CurrentDeviceLimits()).ok()) {
        mma = MedianMs(3, [&] {
          CheckOk(PagedAttentionMma(c.args, DType::kBF16, nullptr), "tensor-core attention");
        });
      }
      std::printf(
          "issue27_prefill_attention_%s_T%d per_query_ms %.3f tiled_ms %.3f speedup %.2fx "
          "mma_ms %.3f speedup_mma %.2fx\n",
          sh.name, T, per_query, tiled, per_query / tiled, mma, mma > 0 ? per_query / mma : 0.0);
    }
    // Decode: 32 sequences at context 4,096, one query each, per query head vs by KV head with
    // split keys (the workspace for all 32 queries).
    const int B = 32, context = 4096;
    std::vector<int32_t> seq(B);
    for (int i = 0; i < B; ++i) seq[i] = i;
    AttentionCase c(sh, B, context, seq, std::vector<int32_t>(B, context));
    const int64_t ws = static_cast<int64_t>(B) * sh.heads * DecodePartialFloats(sh.d_v);
    DeviceMemory dws(ws * 4);
    const double per_head =
        MedianMs(5, [&] { CheckOk(PagedAttention(c.args, DType::kBF16, nullptr), "attention"); });
    const double by_kv = MedianMs(5, [&] {
      CheckOk(PagedAttentionDecode(c.args, static_cast<float*>(dws.p), ws, DType::kBF16, nullptr),
              "decode attention");
    });
    std::printf(
        "issue27_decode_attention_%s_b32_ctx4096 per_query_head_ms %.3f by_kv_head_ms %.3f "
        "speedup %.2fx\n",
        sh.name, per_head, by_kv, per_head / by_kv);
  }
  {
    const int64_t rows = 64, vocab = 151552;
    std::vector<float> logits(rows * vocab);
    for (float& v : logits) v = 3 * xd(rng);
    std::vector<GpuSamplingParams> params(rows, GpuSamplingParams{0.8f, 0, 0.95f, 0.0f, 0.5});
    DeviceMemory dl(logits.size() * 4), dp(params.size() * sizeof(GpuSamplingParams)), dt(rows * 4),
        dlp(rows * 4);
    CHECK_CUDA(cudaMemcpy(dl.p, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dp.p, params.data(), params.size() * sizeof(GpuSamplingParams),
                          cudaMemcpyHostToDevice));
    std::vector<float> host(logits.size());
    const double copy = MedianMs(5, [&] {
      CHECK_CUDA(cudaMemcpy(host.data(), dl.p, host.size() * 4, cudaMemcpyDeviceToHost));
    });
    const double device = MedianMs(5, [&] {
      CheckOk(
          Sample(static_cast<const float*>(dl.p), rows, vocab,
                 static_cast<const GpuSamplingParams*>(dp.p), static_cast<int32_t*>(dt.p), nullptr),
          "sample");
      CheckOk(
          ChosenLogprobs(static_cast<const float*>(dl.p), rows, vocab,
                         static_cast<const int32_t*>(dt.p), static_cast<float*>(dlp.p), nullptr),
          "logprobs");
      std::vector<int32_t> ids(rows * 2);
      CHECK_CUDA(cudaMemcpy(ids.data(), dt.p, rows * 4, cudaMemcpyDeviceToHost));
    });
    std::printf(
        "issue27_sampling_b64_v151552 logits_to_host_ms %.3f (host sampling not included) "
        "device_sample_and_logprob_ms %.3f\n",
        copy, device);
  }
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
  Issue27Kernels(rng);
  return 0;
}

}  // namespace
}  // namespace tessera::cuda

int main() { return tessera::cuda::Run(); }
