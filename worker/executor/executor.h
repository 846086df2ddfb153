// The CPU executor: runs batched forward steps of a model over a paged KV cache.
//
// One Step takes several sequences, each with its new tokens (a prefill chunk or one decode
// token), the position of the first, and its block table; it writes their keys and values
// into the cache and returns logits for the positions asked for. Sequences of different
// lengths in one step give the same results as each run alone.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/gguf/split.h"
#include "common/model/constants.h"
#include "common/model/hparams.h"
#include "common/model/shard_plan.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/comm/communicator.h"
#include "worker/executor/kv_cache.h"

namespace tessera::executor {

enum class ComputeDtype { kAuto, kFloat32, kBFloat16, kFloat16 };

enum class Device { kCpu, kCuda };

// Whether a CPU executor keeps its int8-GEMM weights unpacked into panels from load on
// (cpu::PackedInt8Matrix): batched steps then do not unpack them every step, at about 2.2x
// the memory of q4_K weights (1.2x of q8_0) on top of the mapped file.
enum class WeightPacking {
  kAuto,  // pack while the panels fit in a quarter of the memory available at load
  kOn,    // pack every matrix the int8 GEMM takes
  kOff,   // unpack panels per product (the least memory)
};
// "auto" | "on" | "off" (also "true"/"false"); nullopt for anything else.
std::optional<WeightPacking> ParseWeightPacking(std::string_view s);
const char* WeightPackingName(WeightPacking p);

struct ExecutorOptions {
  // Exact path: float32 activations and KV cache, weights dequantized on the fly, no
  // activation quantization. Otherwise the fast path: quantized activations and integer dot
  // products where faster, KV cache and activations rounded to `dtype`.
  bool exact = false;
  ComputeDtype dtype = ComputeDtype::kAuto;  // auto: float32 activations, float16 KV cache
  int threads = 0;                           // 0: one per core
  int kv_block_size = model::kDefaultKvBlockSize;
  // Fast path: a sequence's results do not depend on what else shares the step (products of
  // 8+ rows run per prefill sequence, decode rows with per-vector kernels). False lets all
  // rows share one kernel choice: faster at high concurrency, batch-dependent roundings.
  bool batch_invariant = true;
  // CPU: int8-GEMM weight panels kept from load (see WeightPacking). No effect on results.
  WeightPacking weight_packing = WeightPacking::kAuto;
  // kAuto's budget in bytes; 0: a quarter of the memory available at load (MemAvailable).
  uint64_t weight_packing_budget = 0;
  // Cache capacity in tokens (rounded up to whole blocks); 0: min(4096, context length).
  // More than the model's context length is an error.
  int64_t kv_tokens = 0;

  // Tensor parallelism: this executor holds rank `tp_rank`'s shard of a `tp_size`-way plan
  // (common/model/shard_plan.h) and calls `comm` (tp_size ranks, not owned) after its
  // row-parallel products and for the vocab-parallel head. Every rank must run the same
  // steps. tp_size 1 needs no communicator.
  int tp_rank = 0;
  int tp_size = 1;
  comm::Communicator* comm = nullptr;
  // Called as the shard loads: file bytes of this rank's plan done so far, and in all.
  std::function<void(uint64_t done, uint64_t total)> on_load_progress;

  // Where the forward pass runs. kCuda (builds with the CUDA backend only): the shard is
  // uploaded to device `gpu` (a CUDA ordinal) through pinned staging buffers and every
  // step runs there; a tensor-parallel `comm` should then be NCCL (device pointers: it is
  // called on device buffers; another communicator works through host copies, slower).
  // Activations: float32 when exact or dtype float32, bfloat16 / float16 when asked for,
  // bfloat16 for auto (every GPU from sm_80 has it); the KV cache has the activations' dtype.
  Device device = Device::kCpu;
  int gpu = 0;
  // kCuda with kv_tokens 0: the KV cache gets what this fraction of the device's memory
  // leaves after the weights and the step buffers (vLLM's --gpu-memory-utilization).
  double gpu_memory_utilization = 0.9;
  // kCuda: decode-only steps (one new token per sequence) are captured as CUDA graphs, one
  // per padded batch size and block-table width, and replayed.
  bool cuda_graphs = true;
  // kCuda: the step size the buffers are planned for (0: 2048 tokens); a larger step grows
  // them (and drops the captured graphs).
  int max_step_tokens = 0;

  // Also load the NextN/MTP block (<arch>.nextn_predict_layers > 0) for MtpStep: its
  // tensors, sharded as any block's, and a cache layer of its own. A model without one is
  // an error naming the key (model::MtpUnavailable).
  bool load_mtp = false;
  // How the routed experts are divided at tp_size > 1 (model::PlanOptions::experts):
  // whole experts per rank (expert parallelism), or every expert's hidden dim.
  model::ExpertParallel expert_parallel = model::ExpertParallel::kAuto;
  // kCuda: sample SequenceInput::device_sample sequences on the device (samples_on_device).
  // Off, every logits row comes back to the host (for comparisons and debugging).
  bool device_sampling = true;
};

// A sequence's next token sampled where its logits are (Executor::samples_on_device): the
// GPU sampler's chain (kernels/cuda/selection_kernels.h, Sample) with the draw's uniform.
struct DeviceSampling {
  float temperature = 1.0f;  // < 1e-5: greedy
  int32_t top_k = 0;         // ≤ 0: off
  float top_p = 1.0f;        // ≥ 1: off
  float min_p = 0.0f;        // ≤ 0: off
  double uniform = 0.0;      // u in [0, 1)
};
// A token sampled by the executor, and its raw log-probability (log-softmax of the logits).
struct SampledToken {
  int32_t token = -1;  // -1: not sampled here (the sequence's logits row was returned)
  float logprob = 0.0f;
};

struct SequenceInput {
  std::vector<int32_t> tokens;       // new tokens of this step
  int64_t start_pos = 0;             // position of tokens[0]
  std::vector<int32_t> block_table;  // physical blocks for positions [0, start_pos + n)
  bool all_logits = false;           // logits for every new token, else only the last
  // Every new token is computed as a one-token step would compute it (on the CPU's fast
  // path attention reads the cache in place per token instead of a chunk's gathered
  // product), so that its logits equal that step's bit for bit: speculative verification.
  bool rows_as_decodes = false;
  // A one-token chunk of a prompt: computed as a prefill chunk computes its rows (gathered
  // attention, a prefill batch's kernels), not as a decode step, so that the token gets the
  // bits it gets in a longer chunk. Chunks of several tokens are prefills anyway.
  bool prefill = false;
  // Step's `hidden` holds the final-norm state of every new token of every sequence of the
  // step (when any asks), not only of the logits rows: an MTP block then pairs each prompt
  // position with the token after it (its cache covers the prompt), without the LM head
  // computed for every row. The GPU executor does it with the MTP block loaded (load_mtp).
  bool all_hidden = false;
  // Sample the last row here (Step's `sampled`) instead of returning it, where the executor
  // samples on its device; with all_logits, and on executors that do not, the row is
  // returned as usual.
  std::optional<DeviceSampling> device_sample = std::nullopt;
  // Executor::MtpStep only: row i (n_embd floats, row-major) is the trunk's final-norm hidden
  // state (Step's `hidden`) of position start_pos + i, paired with tokens[i], the token at
  // the position after it.
  std::vector<float> mtp_hidden = {};
};

// What routing and sparse attention chose in a step, for tests and debugging. Tokens are
// numbered across the step's sequences in order.
struct StepTrace {
  // layer -> token -> experts chosen (in selection order) and their final weights.
  std::map<int, std::vector<std::vector<int32_t>>> experts;
  std::map<int, std::vector<std::vector<float>>> expert_weights;
  // layer -> token -> key positions the DSA indexer kept (ascending).
  std::map<int, std::vector<std::vector<int32_t>>> dsa_keys;
};

class Executor {
 public:
  // Opens the model (any part of a split set), checks it with the architecture tables and
  // builds the weights and the cache. Errors name the problem (unsupported architecture,
  // missing tensor, ...).
  static absl::StatusOr<std::unique_ptr<Executor>> Create(const std::string& model_path,
                                                          const ExecutorOptions& options);
  ~Executor();

  const model::HyperParams& hparams() const;
  const gguf::GgufModel& file() const;
  int block_size() const;
  int n_blocks() const;
  int threads() const;
  // The host threads the CPU kernels run on (threads() of them, the caller included); on a
  // GPU they serve host-side work. For work between steps, never during Step.
  cpu::ThreadPool& thread_pool() const;
  // "cpu", or "cuda:N (device name)" when the forward pass runs on a GPU.
  std::string device_name() const;
  // File bytes this rank's shard plan names (what it read or mapped to load).
  uint64_t planned_read_bytes() const;
  // Bytes of weight panels kept from load, decode panels and int8 panels
  // (ExecutorOptions::weight_packing; 0: none).
  uint64_t packed_weight_bytes() const;
  // The CPU, instruction set and kernels chosen for this model on this machine, with the
  // rates measured at load ("cpu AMD EPYC (family 26 model 2), avx512; attention: ...;
  // q4_K (768 cols): prefill int8 GEMM (...); decode dots 4 vectors/pass (...)"). Empty on
  // a GPU.
  const std::string& kernel_summary() const;

  // Seconds spent per phase since the last ResetProfile(): "attention" (projections and
  // attention, the DSA indexer excluded), "indexer", "router", "experts" (routed and shared),
  // "dense_ffn", "head" (final norm and LM head), "embed".
  std::map<std::string, double> Profile() const;
  void ResetProfile();

  // Runs one step; per sequence, logits rows (all new tokens or the last) × n_vocab.
  // Errors: a token outside the vocabulary, a position beyond the block table, an empty
  // sequence; nothing is written to the cache then. With `hidden`, also per sequence the
  // final-norm hidden state (n_embd floats: the vector the LM head multiplies) of the same
  // rows as the logits, the input of an MTP step.
  // With `sampled` (one entry per sequence), sequences with device_sample are sampled on the
  // device where samples_on_device(): their logits row stays there (an empty vector is
  // returned for them) and only the token and its log-probability come back.
  absl::StatusOr<std::vector<std::vector<float>>> Step(
      absl::Span<const SequenceInput> seqs, StepTrace* trace = nullptr,
      std::vector<std::vector<float>>* hidden = nullptr,
      std::vector<SampledToken>* sampled = nullptr);
  // Whether Step samples SequenceInput::device_sample sequences on the device: a GPU
  // executor at TP 1 or with a device communicator (NCCL); never the CPU executor, nor a
  // GPU one whose logits are gathered through the host anyway.
  bool samples_on_device() const;

  // Whether the NextN/MTP block was loaded (ExecutorOptions::load_mtp).
  bool has_mtp() const;
  // `bytes` at `data` from rank 0 to every rank of the tensor-parallel group (a no-op at
  // TP = 1): what rank 0 alone decided (sampled tokens) for work every rank does next.
  absl::Status BroadcastFromRank0(void* data, size_t bytes);
  // One step of the NextN/MTP draft head (spec 12.6). Per sequence, row i pairs tokens[i]
  // with the trunk hidden mtp_hidden row i of position p = start_pos + i (the position
  // before the token's) and predicts the token after tokens[i] (position p + 2). Row i sits
  // at position p in the MTP block's own cache layer, through the sequence's block table as
  // the trunk's: it attends causally to the MTP rows at positions 0..p written so far (a
  // sequence's first row is the pair of its tokens 1 and hidden 0). Logits as Step returns
  // them; with `hidden`, the MTP head's normalized rows (a further draft step's hidden).
  // FailedPrecondition when the block was not loaded; the errors of Step otherwise, and a
  // sequence whose mtp_hidden is not tokens.size() × n_embd.
  absl::StatusOr<std::vector<std::vector<float>>> MtpStep(
      absl::Span<const SequenceInput> seqs, std::vector<std::vector<float>>* hidden = nullptr);

  struct Impl;

 private:
  friend struct ExecutorPeer;  // tests that run the forward pass over instrumented ops
  explicit Executor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::executor
