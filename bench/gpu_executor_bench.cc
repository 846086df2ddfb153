// Decode and prefill throughput of the GPU executor (ExecutorOptions::device kCuda) on a
// whole model, next to a device-to-device copy measured in the same run (tests/gpu/run.sh
// prints these lines in its summary):
//
//   gpu_executor_bench [--model FILE.gguf] [--gpu N]
//
// Without --model it generates the llama `124m` preset at Q4_K_M (hidden 768, 12 blocks,
// vocab 32000; cached in the temp directory). Lines, one per figure:
//   d2d_copy_GBps 3950.2                       copy of 1 GiB, counted as read + write
//   prefill_512 tok_s=... ms=...               one 512-token prompt, logits of the last
//   decode_b1 ctx=128 graphs=1 tok_s=... step_ms=... GBps=... frac_of_d2d=...
//   decode_b32 ctx=128 graphs=1 tok_s=... step_ms=... GBps=... GBps_with_kv=... frac_of_d2d=...
// GBps = weight bytes one decode step reads (every tensor but the embedding table, which is
// gathered, unless it is also the LM head) / wall-clock step time; GBps_with_kv adds the KV
// cache the step's attention reads; frac_of_d2d = GBps / d2d_copy_GBps (both count bytes
// moved through HBM). Step times are wall clock around Executor::Step, which returns logits
// to the host: they include the launch and copy overheads a server sees. Never asserts.
// First it prints the traffic model (bench/gpu_traffic.h: bytes per step of each kernel family
// against the ideal); `--traffic` prints only that, without a GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/gpu_traffic.h"
#include "common/model/synthetic.h"
#include "kernels/cuda/device.h"
#include "worker/executor/executor.h"

namespace tessera::executor {
namespace {

constexpr int kBlock = 16;
constexpr int kContext = 128;  // tokens in each sequence's cache when decode is timed
constexpr int kDecodeSteps = 48;
constexpr int kBigBatch = 32;
constexpr int kPrefill = 512;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "gpu_executor_bench: %s\n", what.c_str());
  std::exit(1);
}

void CheckCuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Fail(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Median GB/s of a 1 GiB device-to-device copy (2 bytes moved per byte copied), CUDA events.
double CopyGBps(int gpu) {
  CheckCuda(cudaSetDevice(gpu), "cudaSetDevice");
  const size_t bytes = size_t{1} << 30;
  void *src = nullptr, *dst = nullptr;
  CheckCuda(cudaMalloc(&src, bytes), "cudaMalloc");
  CheckCuda(cudaMalloc(&dst, bytes), "cudaMalloc");
  CheckCuda(cudaMemset(src, 1, bytes), "cudaMemset");
  cudaEvent_t a, b;
  CheckCuda(cudaEventCreate(&a), "cudaEventCreate");
  CheckCuda(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<float> ms;
  for (int i = 0; i < 11; ++i) {
    CheckCuda(cudaEventRecord(a), "cudaEventRecord");
    CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
    CheckCuda(cudaEventRecord(b), "cudaEventRecord");
    CheckCuda(cudaEventSynchronize(b), "cudaEventSynchronize");
    float t = 0;
    CheckCuda(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
    if (i > 0) ms.push_back(t);  // the first is a warm-up
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaFree(src);
  cudaFree(dst);
  std::sort(ms.begin(), ms.end());
  return 2.0 * bytes / (ms[ms.size() / 2] * 1e6);
}

std::string DefaultModel() {
  const std::string path =
      (std::filesystem::temp_directory_path() / "tessera-bench-llama-124m-Q4_K_M.gguf").string();
  if (std::filesystem::exists(path)) return path;
  model::SyntheticOptions o;
  o.arch = "llama";
  o.preset = "124m";
  o.quant = "Q4_K_M";
  auto w = model::BuildSyntheticModel(o);
  if (!w.ok()) Fail(absl::StrCat("gen-model llama 124m Q4_K_M: ", w.status().ToString()));
  const std::string tmp = path + ".part";
  if (absl::Status s = w->WriteFile(tmp); !s.ok()) Fail(absl::StrCat(tmp, ": ", s.ToString()));
  std::filesystem::rename(tmp, path);
  return path;
}

// Weight bytes one decode step reads: every trunk tensor and the head, experts weighted by
// the share a token uses; the embedding table only when it is also the (tied) LM head.
double WeightBytesPerStep(const Executor& ex) {
  const auto& hp = ex.hparams();
  bool has_output = false;
  for (const auto& t : ex.file().tensors()) has_output |= t.name == "output.weight";
  double bytes = 0;
  for (const auto& t : ex.file().tensors()) {
    if (t.name == "token_embd.weight" && has_output) continue;
    if (t.name.rfind("blk.", 0) == 0 &&
        std::stoul(t.name.substr(4, t.name.find('.', 4) - 4)) >= hp.n_layer) {
      continue;  // MTP block: not run
    }
    const double share = t.name.find("_exps.") != std::string::npos
                             ? static_cast<double>(hp.n_expert_used) / hp.n_expert
                             : 1.0;
    bytes += share * static_cast<double>(t.n_bytes);
  }
  return bytes;
}

// KV bytes a decode step's attention reads per cached token (bf16 cache, GQA layout).
double KvBytesPerToken(const Executor& ex) {
  const auto& hp = ex.hparams();
  const double heads_kv = hp.n_head_kv.empty() ? 0 : hp.n_head_kv[0];
  return static_cast<double>(hp.n_layer) * heads_kv * (hp.head_dim_k + hp.head_dim_v) * 2.0;
}

std::unique_ptr<Executor> Make(const std::string& path, int gpu, bool graphs) {
  ExecutorOptions o;
  o.device = Device::kCuda;
  o.gpu = gpu;
  o.cuda_graphs = graphs;
  o.kv_block_size = kBlock;
  o.kv_tokens = kBigBatch * (kContext + kDecodeSteps + 2 * kBlock);
  o.max_step_tokens = kPrefill;
  auto ex = Executor::Create(path, o);
  if (!ex.ok()) Fail(absl::StrCat(path, ": ", ex.status().ToString()));
  return *std::move(ex);
}

std::vector<int32_t> Prompt(int n, int salt, int vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 7919 + 13 + 101 * salt) % vocab;
  return t;
}

void Step(Executor& ex, const std::vector<SequenceInput>& seqs) {
  auto r = ex.Step(seqs);
  if (!r.ok()) Fail(absl::StrCat("Step: ", r.status().ToString()));
}

// Blocks of sequence i: a contiguous range of its own.
std::vector<int32_t> Blocks(int i, int64_t tokens) {
  const int per_seq = (kContext + kDecodeSteps + 2 * kBlock) / kBlock;
  std::vector<int32_t> t((tokens + kBlock - 1) / kBlock);
  for (size_t b = 0; b < t.size(); ++b) t[b] = i * per_seq + static_cast<int32_t>(b);
  return t;
}

void Prefill(Executor& ex) {
  const int vocab = static_cast<int>(ex.hparams().n_vocab);
  std::vector<SequenceInput> s(1);
  s[0].tokens = Prompt(kPrefill, 0, vocab);
  s[0].block_table = Blocks(0, kPrefill);
  Step(ex, s);  // warm-up
  std::vector<double> secs;
  for (int i = 0; i < 5; ++i) {
    const auto a = std::chrono::steady_clock::now();
    Step(ex, s);
    secs.push_back(Seconds(a, std::chrono::steady_clock::now()));
  }
  std::sort(secs.begin(), secs.end());
  const double t = secs[secs.size() / 2];
  std::printf("prefill_512 tok_s=%.0f ms=%.2f\n", kPrefill / t, t * 1e3);
}

void Decode(Executor& ex, int batch, bool graphs, double weight_bytes, double copy_gbps) {
  const int vocab = static_cast<int>(ex.hparams().n_vocab);
  // Each sequence's first kContext tokens, prefilled 4 sequences (512 tokens) per step.
  std::vector<SequenceInput> seqs(batch);
  for (int i = 0; i < batch; ++i) {
    seqs[i].tokens = Prompt(kContext, i + 1, vocab);
    seqs[i].block_table = Blocks(i, kContext);
  }
  for (int i = 0; i < batch; i += 4) {
    Step(ex, std::vector<SequenceInput>(seqs.begin() + i, seqs.begin() + std::min(batch, i + 4)));
  }
  auto decode = [&](int steps, int64_t from) {
    for (int k = 0; k < steps; ++k) {
      for (int i = 0; i < batch; ++i) {
        seqs[i].start_pos = from + k;
        seqs[i].tokens = {(k * 31 + 7 * i + 5) % vocab};
        seqs[i].block_table = Blocks(i, from + k + 1);
      }
      Step(ex, seqs);
    }
  };
  decode(4, kContext);  // warm-up: captures the graphs
  const auto a = std::chrono::steady_clock::now();
  decode(kDecodeSteps, kContext + 4);
  const double step = Seconds(a, std::chrono::steady_clock::now()) / kDecodeSteps;
  const double gbps = weight_bytes / step / 1e9;
  const double kv = KvBytesPerToken(ex) * batch * (kContext + 4 + kDecodeSteps / 2.0);
  std::printf(
      "decode_b%d ctx=%d graphs=%d tok_s=%.1f step_ms=%.3f GBps=%.1f GBps_with_kv=%.1f "
      "frac_of_d2d=%.3f\n",
      batch, kContext, graphs ? 1 : 0, batch / step, step * 1e3, gbps,
      (weight_bytes + kv) / step / 1e9, gbps / copy_gbps);
  std::fflush(stdout);
}

// The traffic model's table (bench/gpu_traffic.h) for `model`: no device needed.
void PrintTraffic(const std::string& model, int64_t context) {
  absl::StatusOr<bench::TrafficShape> shape = bench::TrafficShapeOf(model);
  if (!shape.ok()) Fail(std::string(shape.status().message()));
  std::printf("exec_traffic_model: %s\n%s%s", model.c_str(),
              bench::TrafficTable(*shape, context, bench::Kernels::kBefore).c_str(),
              bench::TrafficTable(*shape, context, bench::Kernels::kNow).c_str());
  std::fflush(stdout);
}

int Run(int argc, char** argv) {
  std::string model;
  int gpu = 0;
  bool traffic_only = false;
  int64_t context = 4096;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--gpu" && i + 1 < argc) {
      gpu = std::atoi(argv[++i]);
    } else if (a == "--traffic") {
      traffic_only = true;
    } else if (a == "--context" && i + 1 < argc) {
      context = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: gpu_executor_bench [--model FILE.gguf] [--gpu N] [--traffic] "
                   "[--context N]\n"
                   "  --traffic     print the traffic model's table only (no GPU needed)\n"
                   "  --context N   decode context of the traffic model (4096)\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (traffic_only) {
    PrintTraffic(model.empty() ? DefaultModel() : model, context);
    return 0;
  }
  const std::vector<cuda::DeviceInfo> devices = cuda::ListDevices();
  if (devices.empty()) {
    std::printf("gpu_executor_bench: no CUDA device visible; nothing measured\n");
    return 0;
  }
  if (gpu < 0 || gpu >= static_cast<int>(devices.size())) {
    Fail(absl::StrCat("--gpu ", gpu, ": ", devices.size(), " device(s) visible"));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const double copy_gbps = CopyGBps(gpu);
  std::printf("exec_device: %s (sm_%d%d)\nexec_d2d_copy_GBps %.1f\n", devices[gpu].name.c_str(),
              devices[gpu].compute_major, devices[gpu].compute_minor, copy_gbps);
  if (model.empty()) model = DefaultModel();
  PrintTraffic(model, context);

  std::unique_ptr<Executor> ex = Make(model, gpu, /*graphs=*/true);
  const double weight_bytes = WeightBytesPerStep(*ex);
  std::printf("exec_model: %s on %s weight_MB_per_step=%.1f\n", model.c_str(),
              ex->device_name().c_str(), weight_bytes / 1e6);
  std::fflush(stdout);
  Prefill(*ex);
  Decode(*ex, 1, true, weight_bytes, copy_gbps);
  Decode(*ex, kBigBatch, true, weight_bytes, copy_gbps);
  ex.reset();
  std::unique_ptr<Executor> plain = Make(model, gpu, /*graphs=*/false);
  Decode(*plain, 1, false, weight_bytes, copy_gbps);
  Decode(*plain, kBigBatch, false, weight_bytes, copy_gbps);
  std::printf("exec_bench_seconds %.1f\n", Seconds(t0, std::chrono::steady_clock::now()));
  return 0;
}

}  // namespace
}  // namespace tessera::executor

int main(int argc, char** argv) { return tessera::executor::Run(argc, argv); }
