#include "tools/step_backend.h"

#include <cstdio>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "controller/workers/gpu_plan.h"
#include "controller/workers/worker_group.h"
#include "worker/engine/step_engine.h"

namespace tessera::cli {
namespace {

class LocalRunner : public serving::StepRunner {
 public:
  explicit LocalRunner(std::unique_ptr<executor::Executor> ex)
      : block_size_(ex->block_size()), n_blocks_(ex->n_blocks()), engine_(std::move(ex), 0) {}
  absl::StatusOr<tessera::v1::StepResult> RunStep(const tessera::v1::StepRequest& step) override {
    std::lock_guard<std::mutex> lock(mu_);
    return engine_.Run(step);
  }
  int block_size() const override { return block_size_; }
  int n_blocks() const override { return n_blocks_; }
  bool ready() const override { return true; }

 private:
  const int block_size_, n_blocks_;
  std::mutex mu_;
  worker::StepEngine engine_;
};

const char* DtypeName(executor::ComputeDtype d) {
  switch (d) {
    case executor::ComputeDtype::kFloat32:
      return "float32";
    case executor::ComputeDtype::kBFloat16:
      return "bfloat16";
    case executor::ComputeDtype::kFloat16:
      return "float16";
    default:
      return "auto";
  }
}

}  // namespace

int ParseBackendFlag(const Args& args, size_t i, BackendOptions& o, const char* command) {
  const std::string& a = args[i];
  if (a == "--verbose") {
    o.verbose = true;
    return 1;
  }
  if (a == "--expert-parallel" || a == "--no-expert-parallel") {
    o.expert_parallel =
        a == "--expert-parallel" ? model::ExpertParallel::kOn : model::ExpertParallel::kOff;
    return 1;
  }
  if (a != "--tp" && a != "--worker-binary" && a != "--device") return 0;
  if (i + 1 >= args.size()) {
    std::fprintf(stderr, "tessera %s: %s needs a value\n", command, a.c_str());
    return -1;
  }
  const std::string& v = args[i + 1];
  if (a == "--worker-binary") {
    o.worker_binary = v;
    return 2;
  }
  if (a == "--device") {
    absl::StatusOr<int> gpu = workers::ParseDeviceFlag(v);
    if (!gpu.ok()) {
      std::fprintf(stderr, "tessera %s: --device: %s\n", command,
                   std::string(gpu.status().message()).c_str());
      return -1;
    }
    o.gpu = *gpu;
    return 2;
  }
  if (!absl::SimpleAtoi(v, &o.tp) || o.tp < 1 || o.tp > 64) {
    std::fprintf(stderr, "tessera %s: --tp: '%s' is not in 1..64\n", command, v.c_str());
    return -1;
  }
  return 2;
}

absl::StatusOr<std::unique_ptr<serving::StepRunner>> OpenStepRunner(
    const std::string& model, const executor::ExecutorOptions& exec, const BackendOptions& backend,
    bool verbose) {
#ifndef TESSERA_HAVE_CUDA
  if (backend.gpu >= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--device cuda:", backend.gpu,
                     ": this build has no CUDA backend (rebuild where CMake finds a CUDA "
                     "toolkit, or use --device cpu)"));
  }
#endif
  if (backend.tp == 0) {
    executor::ExecutorOptions local = exec;
    if (backend.gpu >= 0) {
      local.device = executor::Device::kCuda;
      local.gpu = backend.gpu;
    }
    auto ex = executor::Executor::Create(model, local);
    if (!ex.ok()) return ex.status();
    if (backend.verbose && !(*ex)->kernel_summary().empty()) {
      std::fprintf(stderr, "kernels: %s\n", (*ex)->kernel_summary().c_str());
    }
    return std::unique_ptr<serving::StepRunner>(new LocalRunner(*std::move(ex)));
  }
  workers::WorkerGroupOptions o;
  o.model_path = model;
  o.world_size = backend.tp;
  o.worker_binary = backend.worker_binary;
  o.threads_per_worker = exec.threads;
  o.dtype = DtypeName(exec.dtype);
  o.exact = exec.exact;
  o.weight_packing = executor::WeightPackingName(exec.weight_packing);
  o.expert_parallel = std::string(model::ExpertParallelName(backend.expert_parallel));
  o.kv_block_size = exec.kv_block_size;
  o.kv_tokens = exec.kv_tokens;
  o.max_restarts = 0;  // an offline command fails instead of retrying
  if (backend.gpu >= 0) {
    o.gpus = workers::ConsecutiveGpus(backend.gpu, backend.tp);
    o.gpu_memory_utilization = exec.gpu_memory_utilization;
#ifdef TESSERA_HAVE_NCCL
    constexpr bool kHaveNccl = true;
#else
    constexpr bool kHaveNccl = false;
#endif
    std::vector<std::string> warnings;
    o.comm_backend = workers::GpuCommBackend(backend.tp, kHaveNccl, &warnings);
    for (const std::string& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  }
  if (verbose) o.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  auto group = workers::WorkerGroup::Create(o);
  if (!group.ok()) return group.status();
  if (absl::Status s = (*group)->Start(); !s.ok()) return s;
  return std::unique_ptr<serving::StepRunner>(std::move(*group));
}

tessera::v1::StepSampling ToStepSampling(const serving::Sampling& p,
                                         const std::vector<int32_t>& stop_token_ids) {
  tessera::v1::StepSampling s;
  s.set_temperature(p.temperature);
  s.set_top_k(p.top_k);
  s.set_top_p(p.top_p);
  s.set_min_p(p.min_p);
  s.set_repetition_penalty(p.repetition_penalty);
  s.set_presence_penalty(p.presence_penalty);
  s.set_frequency_penalty(p.frequency_penalty);
  if (p.seed) s.set_seed(*p.seed);
  for (int32_t id : stop_token_ids) s.add_stop_token_ids(id);
  return s;
}

}  // namespace tessera::cli
