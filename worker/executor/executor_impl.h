// The executor's private state, shared by its implementation files (executor.cc: loading
// and the step driver; cpu_ops.h: the CPU's operations of the forward pass, forward.h;
// cuda_forward.h: the GPU's). Not part of the public interface.
#pragma once

#include <array>
#include <chrono>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/gguf/split.h"
#include "common/model/hparams.h"
#include "common/model/shard_plan.h"
#include "common/model/tensor_map.h"
#include "kernels/cpu/decode_panels.h"
#include "kernels/cpu/int8_gemm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/executor/arch_config.h"
#include "worker/executor/block_weights.h"
#include "worker/executor/executor.h"
#include "worker/executor/kv_cache.h"
#include "worker/executor/ops.h"

namespace tessera::executor {

using cpu::QuantMatrix;

class CudaForward;  // cuda_forward.h

// A view of `rows` x `cols` contiguous float32 values as a matrix for cpu::Matmul.
inline QuantMatrix FloatMatrix(const float* data, int64_t rows, int64_t cols) {
  QuantMatrix q;
  q.type = gguf::GgmlType::kF32;
  q.rows = rows;
  q.cols = cols;
  q.row_bytes = static_cast<size_t>(cols) * sizeof(float);
  q.data = reinterpret_cast<const uint8_t*>(data);
  return q;
}

// Rows [r0, r1) of `w` as a matrix of their own (an expert of a stacked 3-D tensor).
inline QuantMatrix RowsOf(const QuantMatrix& w, int64_t r0, int64_t r1) {
  QuantMatrix q = w;
  q.rows = r1 - r0;
  q.data = w.data + r0 * w.row_bytes;
  q.packed_row0 = w.packed_row0 + r0;
  q.decode_panels_row0 = w.decode_panels_row0 + r0;
  return q;
}

using LayerWeights = BlockWeights<std::vector<float>, QuantMatrix>;

// The tokens of one step, flattened across sequences.
struct Batch {
  absl::Span<const SequenceInput> seqs;
  std::vector<int32_t> tok;
  std::vector<int64_t> pos, slot;
  std::vector<int> seq_of;
  std::vector<int64_t> seq_begin;  // first token of each sequence (size seqs + 1)
  std::vector<float> cos, sin;     // RoPE per token, n_rot/2 each
  StepTrace* trace = nullptr;
  // DSA: per token, the key positions the most recent full indexer layer kept (shared
  // layers reuse them, spec 12.4).
  std::vector<std::vector<int32_t>> dsa_keep;
  // An MTP step (Executor::MtpStep): each token's given hidden, [tokens][n_embd].
  bool mtp = false;
  std::vector<float> mtp_hidden;
  // Where the head's normalized rows go, [head rows][n_embd] (null: not asked); with
  // all_hidden, every token's row instead (SequenceInput::all_hidden).
  std::vector<float>* hidden_out = nullptr;
  bool all_hidden = false;
  int64_t size() const { return static_cast<int64_t>(tok.size()); }
};

// The weights this rank loaded, by role, for the executor's lifetime: host views in the
// file's mapping, shards gathered from strided ranges and float32 fixups (owned here), and
// the panels kept for the int8 GEMM and the decode dots.
struct HostWeights {
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm, output_bias, rope_freqs;
  // This rank's rows [vocab_begin, vocab_end) of the token embedding (vocab-parallel).
  gguf::GgmlType embd_type = gguf::GgmlType::kF32;
  absl::Span<const uint8_t> embd_data;
  int64_t vocab_begin = 0, vocab_end = 0;
  QuantMatrix output;                    // rows [vocab_begin, vocab_end) of the LM head
  std::deque<std::vector<float>> owned;  // float32 weights made by fixups (stable addresses)
  std::deque<std::vector<uint8_t>> owned_bytes;  // shards gathered from strided file ranges
  std::deque<std::unique_ptr<cpu::PackedInt8Matrix>> packed;
  std::deque<std::unique_ptr<cpu::DecodePanelMatrix>> decode_panels;
  uint64_t packed_bytes = 0;  // of both kinds of panels
  uint64_t planned_read_bytes = 0;

  // A float32 matrix held by `owned`.
  QuantMatrix OwnedMatrix(std::vector<float> data, int64_t rows, int64_t cols);
  // The layers' and the head's quantized matrices (the ones products read).
  std::vector<QuantMatrix*> WeightMatrices();
};

// The CPU's step buffers, planned by use and kept from step to step: the activations by
// role (CpuOps::Tensor), quantized product inputs (CpuOps::MatMulMany) and attention scores
// per thread (CpuOps::RunPaged). Per-step state lives in CpuOps.
// One role's floats: grown on demand (contents are not kept across a growth), never
// shrunk. Large ones are their own mappings with transparent huge pages asked for: a first
// step (a whole prompt) touches tens of MB of new buffers, and 4 KiB page faults are slow,
// under virtualization most of all.
class StepBuffer {
 public:
  StepBuffer() = default;
  StepBuffer(const StepBuffer&) = delete;
  StepBuffer& operator=(const StepBuffer&) = delete;
  ~StepBuffer();
  float* Reserve(size_t n);  // at least n floats

 private:
  float* data_ = nullptr;
  size_t capacity_ = 0, mapped_bytes_ = 0;  // mapped_bytes_ 0: data_ is from new[]
};

struct CpuStepBuffers {
  std::array<StepBuffer, static_cast<size_t>(Buf::kCount)> by_role;
  std::vector<cpu::QuantizedActivations> act_scratch;
  std::vector<std::vector<float>> attn_scratch;
};

// The vocab-parallel head's columns: rank p holds [V p / tp, V (p + 1) / tp) (the shard
// plan's split), gathered padded to the widest rank's, VocabWidth(V, tp) per row.
inline int64_t VocabWidth(int64_t V, int tp) { return (V + tp - 1) / tp; }
// `parts` as all-gathered ([tp][rows_gathered][width]) into `out`: `rows` whole rows of V.
void UnpadVocab(const std::vector<float>& parts, int tp, int64_t rows_gathered, int64_t rows,
                int64_t V, std::vector<float>& out);
// Logits rows (every new token of all_logits sequences, or of every sequence with
// `every_row`, else the last; whole rows of V) as Executor::Step returns them: per sequence.
std::vector<std::vector<float>> LogitsBySequence(absl::Span<const SequenceInput> seqs,
                                                 const std::vector<float>& rows, int64_t V,
                                                 bool every_row = false);

struct Executor::Impl {
  ExecutorOptions options;
  ComputeDtype act_dtype = ComputeDtype::kFloat32;
  gguf::GgufModel file;
  model::HyperParams hp;
  ArchConfig config;
  HostWeights weights;  // loaded once (LoadWeights); the GPU uploads its copy from them
  cpu::RopeParams rope;
  float attn_scale = 1.0f;
  std::unique_ptr<cpu::ThreadPool> pool;
  int mtp_blocks = 0;  // NextN/MTP blocks loaded (load_mtp)
  // This rank's share of each block (heads, KV heads, experts), from the shard plan.
  std::vector<model::BlockShare> shares;
  KvCacheShape kv_shape;                        // of `cache`, or of the GPU's cache
  std::unique_ptr<CudaForward> gpu;             // device kCuda: runs the steps
  std::unique_ptr<PagedKvCache> cache;          // K/V, or the MLA latent + rope key (CPU)
  std::unique_ptr<PagedKvCache> indexer_cache;  // DSA indexer keys (float32)
  cpu::MatmulOptions matmul;
  // Measures the matmul kernels on this machine for the model's weight types (CPU only) and
  // records the choices in `matmul` and `kernel_summary`.
  void CalibrateKernels();
  std::string kernel_summary;
  // Keeps decode panels of the q4_K, q5_K, q6_K and q8_0 matrices (AVX-512 VNNI hosts) and int8
  // panels of the matrices the GEMM takes (options.weight_packing; after CalibrateKernels), then
  // measures from which batch the GEMM on the int8 panels beats the dots.
  void PackWeights();
  // Which of `ms` (WeightMatrices()) get decode panels and int8 panels under
  // options.weight_packing (decode panels first, then int8 panels, each while it fits the
  // budget), and the budget's line.
  struct PackPlan {
    std::vector<bool> decode, int8;
    std::string why;
  };
  PackPlan PackingPlan(const std::vector<QuantMatrix*>& ms) const;
  // Whether the matmul's instruction set has the decode-panel kernels (AVX-512 VNNI).
  bool DecodePanelsApply() const;
  std::map<std::string, double> profile;  // seconds per phase (Executor::Profile)

  explicit Impl(gguf::GgufModel f);
  ~Impl();  // in executor.cc, where CudaForward is complete

  absl::Status LoadWeights(const model::TensorMap& map);
  // `rope` and `attn_scale` from the hyper-parameters and the architecture (spec 5.3, 10.6).
  void PlanRope();
  // The KV cache's geometry for this rank (all but its number of blocks), and `act_dtype`.
  KvCacheShape PlanCacheShape();
  // The CPU's paged caches for `shape` and options.kv_tokens (or the model's context, at
  // most 4096 tokens).
  absl::Status CreateHostCache(KvCacheShape shape);
  // Sums `v` over the tensor-parallel group (nothing to do at tp 1).
  absl::Status AllReduce(std::vector<float>& v);

  CpuStepBuffers buffers;  // the CPU's steps' planned buffers (CpuOps)

  // A trunk step, or (mtp) a step of the NextN/MTP block; the head's normalized rows into
  // `hidden` per sequence where given.
  absl::StatusOr<std::vector<std::vector<float>>> Step(absl::Span<const SequenceInput> seqs,
                                                       StepTrace* trace, bool mtp,
                                                       std::vector<std::vector<float>>* hidden,
                                                       std::vector<SampledToken>* sampled);
  // Checks the step's sequences (tokens in the vocabulary, a cache slot for every position;
  // for an MTP step, a hidden row per token) and flattens them into `b` (tokens, positions,
  // slots, sequence of each token, the MTP hidden rows).
  absl::Status Flatten(absl::Span<const SequenceInput> seqs, StepTrace* trace, Batch& b,
                       bool mtp = false) const;
};

}  // namespace tessera::executor
