// tessera eval-logits: teacher-forced logits of a token sequence, all tokens in one batch.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tools/commands.h"
#include "tools/executor_flags.h"
#include "tools/step_backend.h"
#include "worker/executor/executor.h"
#include "worker/executor/mtp_logits.h"

namespace tessera::cli {
namespace {

constexpr char kUsage[] =
    "usage: tessera eval-logits --model FILE --tokens 1,2,3,... --out PATH\n"
    "                           [--exact] [--dtype auto|float32|bfloat16|float16] [--threads N]\n"
    "                           [--device cpu|cuda|cuda:N] [--tp N [--worker-binary PATH]]\n"
    "                           [--repack-weights auto|on|off] [--mtp] [--verbose]\n"
    "\n"
    "Runs the tokens through the model in ONE batch (teacher forcing) and writes float32\n"
    "little-endian logits [n_tokens x n_vocab] to PATH: row i holds the logits after token i.\n"
    "\n"
    "  --mtp        the NextN/MTP draft head's logits instead, [n_tokens - 1 x n_vocab]: row i\n"
    "               is its prediction of token i + 2 from token i + 1 and the trunk's\n"
    "               final-norm hidden state of position i (teacher-forced, the convention of\n"
    "               the conformance vectors' mtp_logits.f32); in this process only (no --tp)\n"
    "  --exact      float32 activations and KV cache, weights dequantized, no activation\n"
    "               quantization (the path checked against reference logits)\n"
    "  --dtype D    compute dtype of the fast path's activations and KV cache (default auto)\n"
    "  --threads N  worker threads (default: one per core; per worker with --tp)\n"
    "  --repack-weights M  auto (default), on, off: keep the int8 GEMM's weight panels from\n"
    "               load (speed and memory only; the logits are the same bits)\n"
    "  --tp N       run through N tessera-worker processes with tensor parallelism (Gloo),\n"
    "               as tesserad does; compare with the default in-process run\n"
    "  --expert-parallel, --no-expert-parallel\n"
    "               with --tp: routed experts whole per rank, or each one's hidden dim\n"
    "               divided (default: chosen per model, see tessera validate --tp N)\n"
    "  --device D   cpu (default), cuda (GPU 0) or cuda:N: the forward pass on that GPU;\n"
    "               with --tp T, rank r on GPU N+r (NCCL between them)\n"
    "  --verbose    print the CPU, instruction set and the kernels chosen for this model on\n"
    "               this machine (in-process CPU runs)\n";

}  // namespace

// The MTP head's teacher-forced logits, in this process (the step protocol of --tp workers
// has no MTP step yet).
absl::StatusOr<std::vector<float>> MtpLogits(const std::string& model,
                                             executor::ExecutorOptions options,
                                             const BackendOptions& backend,
                                             const std::vector<int32_t>& tokens) {
  if (backend.tp > 0) {
    return absl::UnimplementedError("--mtp runs in this process only; drop --tp");
  }
  options.load_mtp = true;
  if (backend.gpu >= 0) {
    options.device = executor::Device::kCuda;
    options.gpu = backend.gpu;
  }
  auto ex = executor::Executor::Create(model, options);
  if (!ex.ok()) return ex.status();
  return executor::TeacherForcedMtpLogits(**ex, tokens);
}

bool WriteFloats(const std::string& path, const float* data, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(float)));
  return static_cast<bool>(f.flush());
}

int RunEvalLogits(const Args& args) {
  std::string model, tokens_arg, out;
  bool mtp = false;
  executor::ExecutorOptions options;
  BackendOptions backend;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--mtp") {
      mtp = true;
      continue;
    }
    int used = ParseExecutorFlag(args, i, options, "eval-logits");
    if (used == 0) used = ParseBackendFlag(args, i, backend, "eval-logits");
    if (used < 0) return 2;
    if (used > 0) {
      i += used - 1;
      continue;
    }
    if (i + 1 >= args.size()) {
      std::fprintf(stderr, "tessera eval-logits: '%s' needs a value or is unknown\n\n%s", a.c_str(),
                   kUsage);
      return 2;
    }
    const std::string& v = args[++i];
    if (a == "--model") {
      model = v;
    } else if (a == "--tokens") {
      tokens_arg = v;
    } else if (a == "--out") {
      out = v;
    } else {
      std::fprintf(stderr, "tessera eval-logits: unknown option '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (model.empty() || tokens_arg.empty() || out.empty()) {
    std::fprintf(stderr, "tessera eval-logits: --model, --tokens and --out are required\n\n%s",
                 kUsage);
    return 2;
  }
  auto tokens = ParseTokenList(tokens_arg);
  if (!tokens) {
    std::fprintf(stderr,
                 "tessera eval-logits: --tokens: '%s' is not a comma-separated list of ids\n",
                 tokens_arg.c_str());
    return 2;
  }
  options.kv_tokens = static_cast<int64_t>(tokens->size());
  if (mtp) {
    auto logits = MtpLogits(model, options, backend, *tokens);
    if (!logits.ok()) {
      std::fprintf(stderr, "tessera eval-logits: %s\n",
                   std::string(logits.status().message()).c_str());
      return 1;
    }
    if (!WriteFloats(out, logits->data(), logits->size())) {
      std::fprintf(stderr, "tessera eval-logits: cannot write %s\n", out.c_str());
      return 1;
    }
    std::fprintf(stderr, "wrote %s: %zu x %zu float32 MTP logits\n", out.c_str(),
                 tokens->size() - 1, logits->size() / (tokens->size() - 1));
    return 0;
  }
  auto runner = OpenStepRunner(model, options, backend, /*verbose=*/false);
  if (!runner.ok()) {
    std::fprintf(stderr, "tessera eval-logits: %s\n",
                 std::string(runner.status().message()).c_str());
    return 1;
  }
  tessera::v1::StepRequest step;
  step.set_step_id(1);
  tessera::v1::StepSequence* seq = step.add_seqs();
  seq->set_seq_id(1);
  for (int32_t t : *tokens) seq->add_tokens(t);
  seq->set_return_logits(true);
  for (int b = 0; b < (*runner)->n_blocks(); ++b) seq->add_block_table(b);
  auto result = (*runner)->RunStep(step);
  if (!result.ok()) {
    std::fprintf(stderr, "tessera eval-logits: %s\n",
                 std::string(result.status().message()).c_str());
    return 1;
  }
  const auto& logits = result->seqs(0).logits();
  const size_t n_vocab = logits.size() / tokens->size();
  if (!WriteFloats(out, logits.data(), static_cast<size_t>(logits.size()))) {
    std::fprintf(stderr, "tessera eval-logits: cannot write %s\n", out.c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s: %zu x %zu float32 logits\n", out.c_str(), tokens->size(),
               n_vocab);
  return 0;
}

}  // namespace tessera::cli
