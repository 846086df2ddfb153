// The executor's private state, shared by its implementation files (executor.cc: loading
// and the step driver; attention.cc: GQA, MLA and the DSA indexer; moe.cc: routing and
// experts). Not part of the public interface.
#pragma once

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
#include "common/model/tensor_map.h"
#include "kernels/cpu/int8_gemm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/executor/arch_config.h"
#include "worker/executor/block_weights.h"
#include "worker/executor/executor.h"
#include "worker/executor/kv_cache.h"

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
  return q;
}

using LayerWeights = BlockWeights<std::vector<float>, QuantMatrix>;

// Adds the seconds between construction and destruction to a profile entry.
class PhaseTimer {
 public:
  explicit PhaseTimer(double& sink) : sink_(sink), start_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer() {
    sink_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  double& sink_;
  std::chrono::steady_clock::time_point start_;
};

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
  int64_t size() const { return static_cast<int64_t>(tok.size()); }
};

struct Executor::Impl {
  ExecutorOptions options;
  ComputeDtype act_dtype = ComputeDtype::kFloat32;
  gguf::GgufModel file;
  model::HyperParams hp;
  ArchConfig config;
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm, output_bias, rope_freqs;
  // This rank's rows [vocab_begin, vocab_end) of the token embedding (vocab-parallel).
  gguf::GgmlType embd_type = gguf::GgmlType::kF32;
  absl::Span<const uint8_t> embd_data;
  int64_t vocab_begin = 0, vocab_end = 0;
  QuantMatrix output;  // rows [vocab_begin, vocab_end) of the LM head
  cpu::RopeParams rope;
  float attn_scale = 1.0f;
  std::deque<std::vector<float>> owned;  // float32 weights made by fixups (stable addresses)
  std::deque<std::vector<uint8_t>> owned_bytes;  // shards gathered from strided file ranges
  uint64_t planned_read_bytes = 0;
  std::unique_ptr<cpu::ThreadPool> pool;
  KvCacheShape kv_shape;                        // of `cache`, or of the GPU's cache
  std::unique_ptr<CudaForward> gpu;             // device kCuda: runs the steps
  std::unique_ptr<PagedKvCache> cache;          // K/V, or the MLA latent + rope key (CPU)
  std::unique_ptr<PagedKvCache> indexer_cache;  // DSA indexer keys (float32)
  cpu::MatmulOptions matmul;
  // Measures the matmul kernels on this machine for the model's weight types (CPU only) and
  // records the choices in `matmul` and `kernel_summary`.
  void CalibrateKernels();
  std::string kernel_summary;
  // The layers' and the head's quantized matrices (the ones products read).
  std::vector<QuantMatrix*> WeightMatrices();
  // Keeps int8 panels of the matrices the GEMM takes (options.weight_packing; after
  // CalibrateKernels), then measures from which batch the GEMM on them beats the dots.
  void PackWeights();
  // Which of `ms` (WeightMatrices()) get panels under options.weight_packing (the first
  // ones that fit the budget), and the budget's line.
  std::vector<bool> PackingPlan(const std::vector<QuantMatrix*>& ms, std::string* why) const;
  std::deque<std::unique_ptr<cpu::PackedInt8Matrix>> packed;
  uint64_t packed_bytes = 0;
  std::map<std::string, double> profile;  // seconds per phase (Executor::Profile)

  explicit Impl(gguf::GgufModel f);
  ~Impl();  // in executor.cc, where CudaForward is complete

  absl::Status LoadWeights(const model::TensorMap& map);
  // Sums `v` over the tensor-parallel group (nothing to do at tp 1).
  absl::Status AllReduce(std::vector<float>& v);
  QuantMatrix OwnedMatrix(std::vector<float> data, int64_t rows, int64_t cols);

  // y[b][r] = W[r] . x[b] for the rows [row_begin, row_end) of w.
  absl::Status MatMul(const QuantMatrix& w, const float* x, int64_t batch, float* y) {
    return MatMulRows(w, 0, w.rows, x, batch, y, w.rows);
  }
  // On the fast path a product of 8+ rows is run in segments so that each row's result does
  // not depend on what else shares the step (batch-invariant serving): the rows of a
  // sequence with several new tokens (a prefill chunk) as one product of their own (the
  // kernel its size picks, as when it runs alone), rows of one-token sequences (decodes)
  // with per-vector kernels (MatmulPath::kDots). `row_seq` gives each row's sequence;
  // null means the rows are the step's tokens in order.
  absl::Status MatMulRows(const QuantMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                          int64_t batch, float* y, int64_t ldy,
                          const std::vector<int>* row_seq = nullptr);
  // y = W x for products whose results decide something discrete (MoE routing, the DSA
  // indexer's weights): per-vector kernels at every batch size, so that a row's bits never
  // depend on how many rows share its step or prefill chunk (a different chunking, e.g. after
  // a prefix-cache hit, would otherwise flip an expert or a kept key on a near tie).
  absl::Status MatMulPerVector(const QuantMatrix& w, const float* x, int64_t batch, float* y);
  // The current step's token -> sequence map and new tokens per sequence (set by Step).
  const std::vector<int>* step_seq_of = nullptr;
  std::vector<int64_t> step_seq_len;
  void Round(float* x, int64_t n) const;

  // Several products y = W x over the same batch. For decode-sized batches they share one
  // hand-off to the thread pool (row chunks of all of them are the tasks), instead of one
  // per product; larger batches run each product with the pool inside the kernel.
  struct Product {
    const QuantMatrix* w;
    const float* x;
    float* y;            // [batch][w->rows]
    int64_t batch = -1;  // this product's vectors; -1: the call's batch
  };
  absl::Status MatMulMany(absl::Span<const Product> products, int64_t batch);
  std::vector<cpu::QuantizedActivations> act_scratch;  // MatMulMany's quantized inputs

  absl::StatusOr<std::vector<std::vector<float>>> Step(absl::Span<const SequenceInput> seqs,
                                                       StepTrace* trace);
  // Checks the step's sequences (tokens in the vocabulary, a cache slot for every position)
  // and flattens them into `b` (tokens, positions, slots, sequence of each token).
  absl::Status Flatten(absl::Span<const SequenceInput> seqs, StepTrace* trace, Batch& b) const;
  // Each appends its output (T x n_embd) to `out` (overwriting).
  absl::Status GqaAttention(int layer, const Batch& b, const std::vector<float>& h,
                            std::vector<float>& out);
  absl::Status MlaAttention(int layer, Batch& b, const std::vector<float>& h,
                            std::vector<float>& out);
  absl::Status DenseFfn(int layer, const Batch& b, const std::vector<float>& h,
                        std::vector<float>& out);
  absl::Status MoeFfn(int layer, const Batch& b, const std::vector<float>& h,
                      std::vector<float>& out);

  // True when a sequence with `new_tokens` tokens in the step attends through
  // cpu::PagedAttention, reading the cache in place (decode tokens on the fast path; the
  // exact path and prefill chunks gather keys and values and multiply them as matrices).
  bool AttendInPlace(int64_t new_tokens) const;
  // PagedAttention's arguments for `seq`'s first `n_keys` keys of `layer` (K and V rows of
  // the whole slot; the caller sets the head offsets, the queries and the output).
  cpu::PagedAttentionArgs PagedArgs(int layer, const SequenceInput& seq, int64_t n_keys) const;
  // Runs the calls (independent heads or sequences) as tasks of the pool.
  void RunPaged(const std::vector<cpu::PagedAttentionArgs>& calls);
  std::vector<std::vector<float>> attn_scratch;  // PagedAttention's scores, per thread

  // Softmax attention of `nq` query rows against `n_keys` cached rows: scores = Q K^T *
  // scale over the keys [0, last[row]] (causal), further limited to mask[row][key] != 0 when
  // `mask` is given (DSA), then out = P V. K is [n_keys][dk], V^T is [dv][n_keys], both
  // contiguous float32. The products run on `threads` (null: the calling thread).
  absl::Status AttendRows(const float* q, int64_t nq, int64_t dk, const float* k, const float* v_t,
                          int64_t dv, int64_t n_keys, float scale, const std::vector<int64_t>& last,
                          const std::vector<const char*>* mask, float* out, int64_t ld_out,
                          cpu::ThreadPool* threads);
};

}  // namespace tessera::executor
