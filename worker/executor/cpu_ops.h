// The forward pass's operations on the CPU (the Ops contract of ops.h) over kernels/cpu:
// the products through the executor's batch-invariant matmul paths, attention over the
// paged cache (in place for decode tokens, gathered for prefill chunks), MoE routing and
// the experts grouped by expert, collectives through the communicator. Activations are
// float32 in memory; kAct tensors are rounded to the compute dtype after every operation
// that writes them. One CpuOps serves one step (Executor::Impl::Step).
//
// Implementation files: cpu_ops.cc (buffers, products, elementwise ops, head,
// collectives), attention.cc (Attend, the KV and index-key writes, the DSA selection),
// moe.cc (Route, ExpertProducts, Combine).
#pragma once

#include <chrono>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/util/status_macros.h"
#include "worker/executor/executor_impl.h"
#include "worker/executor/ops.h"

namespace tessera::executor {

class CpuOps {
 public:
  using Vec = std::vector<float>;
  using Mat = QuantMatrix;
  using Layer = LayerWeights;
  using Product = MatProduct<Mat>;
  using Expert = ExpertProduct<Mat>;

  // `b` is the step Impl::Flatten built; both outlive the CpuOps.
  CpuOps(Executor::Impl& impl, Batch& b);
  ~CpuOps();

  // The model.
  const model::HyperParams& hparams() const { return impl_.hp; }
  const ArchConfig& config() const { return impl_.config; }
  const Layer& layer(int l) const { return impl_.weights.layers[l]; }
  const Mat& output() const { return impl_.weights.output; }
  const Vec& output_norm() const { return impl_.weights.output_norm; }
  const Vec& output_bias() const { return impl_.weights.output_bias; }
  int tp_rank() const { return impl_.options.tp_rank; }
  const model::BlockShare& share(int l) const { return impl_.shares[l]; }
  const HeadRows& head_rows() const { return head_rows_; }
  // The CPU's head takes every row at once.
  int64_t head_chunk_rows() const { return static_cast<int64_t>(head_rows_.count); }
  void SetHeadChunk(int64_t, int64_t) {}
  bool all_hidden_rows() const { return b_.all_hidden; }

  // The step's buffers.
  Act Tensor(Buf role, int64_t rows, int64_t cols, Prec prec);
  Act AsF32(Act a, Buf scratch) const;

  // Adds the time between construction and destruction to Executor::Profile()'s entry
  // `name`; a phase started inside another is taken out of the outer one.
  class PhaseScope {
   public:
    PhaseScope(CpuOps& ops, const char* name);
    ~PhaseScope();
    PhaseScope(const PhaseScope&) = delete;
    PhaseScope& operator=(const PhaseScope&) = delete;

   private:
    CpuOps& ops_;
  };
  PhaseScope Phase(const char* name) { return PhaseScope(*this, name); }

  TESSERA_DEVICE_OPS

  // After the pass: each sequence's logits, as Executor::Step returns them.
  std::vector<std::vector<float>> TakeLogits();

 private:
  // Rounds a kAct tensor's values to the compute dtype (nothing for kF32 or float32).
  void Round(const Act& a) const;
  void RoundValues(float* x, int64_t n) const;

  // --- products (cpu_ops.cc) ---
  // y[b][r] = W[r] . x[b] for the rows [row_begin, row_end) of w. On the fast path a
  // product of 8+ rows is run in segments so that each row's result does not depend on
  // what else shares the step (batch-invariant serving): the rows of a sequence with
  // several new tokens (a prefill chunk) as one product of their own (the kernel its size
  // picks, as when it runs alone), rows of one-token sequences (decodes) with per-vector
  // kernels (MatmulPath::kDots). `row_seq` gives each row's sequence; null means the rows
  // are the step's tokens in order.
  absl::Status MatMulRows(const QuantMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                          int64_t batch, float* y, int64_t ldy,
                          const std::vector<int>* row_seq = nullptr);
  absl::Status MatMul(const QuantMatrix& w, const float* x, int64_t batch, float* y) {
    return MatMulRows(w, 0, w.rows, x, batch, y, w.rows);
  }
  // y = W x for products whose results decide something discrete (MoE routing, the DSA
  // indexer's weights): per-vector kernels at every batch size, so that a row's bits never
  // depend on how many rows share its step or prefill chunk (a different chunking, e.g.
  // after a prefix-cache hit, would otherwise flip an expert or a kept key on a near tie).
  absl::Status MatMulPerVector(const QuantMatrix& w, const float* x, int64_t batch, float* y);
  // Several products y = W x over the same batch. For decode-sized batches they share one
  // hand-off to the thread pool (row chunks of all of them are the tasks), instead of one
  // per product; larger batches run each product with the pool inside the kernel.
  struct MatMulProduct {
    const QuantMatrix* w;
    const float* x;
    float* y;            // [batch][w->rows]
    int64_t batch = -1;  // this product's vectors; -1: the call's batch
  };
  absl::Status MatMulMany(absl::Span<const MatMulProduct> products, int64_t batch);
  // True under batch invariance when the step has prompt rows and `w`'s prefill kernels give
  // other bits than its per-vector ones (float weights, or no int8 GEMM): such products go
  // through MatMulRows with each row's sequence, never in decode-sized groups.
  bool PrefillRowsTakeOtherKernels(const QuantMatrix& w) const;

  // --- attention (attention.cc) ---
  // True when a sequence with `new_tokens` tokens in the step attends through
  // cpu::PagedAttention, reading the cache in place (decode tokens on the fast path; the
  // exact path and prefill chunks gather keys and values and multiply them as matrices).
  // Whether a sequence's `new_tokens` rows read the paged cache in place, one query row at a
  // time (decodes, and SequenceInput::rows_as_decodes), rather than as a gathered product.
  bool AttendInPlace(const SequenceInput& seq, int64_t new_tokens) const;
  // PagedAttention's arguments for `seq`'s first `n_keys` keys of `layer` (K and V rows of
  // the whole slot; the caller sets the head offsets, the queries and the output).
  cpu::PagedAttentionArgs PagedArgs(int layer, const SequenceInput& seq, int64_t n_keys) const;
  // Runs the calls (independent heads or sequences) as tasks of the pool.
  void RunPaged(const std::vector<cpu::PagedAttentionArgs>& calls);
  // Softmax attention of `nq` query rows against `n_keys` cached rows: scores = Q K^T *
  // scale over the keys [0, last[row]] (causal), further limited to mask[row][key] != 0 when
  // `mask` is given (DSA), then out = P V. K is [n_keys][dk], V^T is [dv][n_keys], both
  // contiguous float32. The products run on `threads` (null: the calling thread).
  absl::Status AttendRows(const float* q, int64_t nq, int64_t dk, const float* k, const float* v_t,
                          int64_t dv, int64_t n_keys, float scale, const std::vector<int64_t>& last,
                          const std::vector<const char*>* mask, float* out, int64_t ld_out,
                          cpu::ThreadPool* threads);
  // Options for products of activations (attention scores and values, DSA indexer dots):
  // the float path, with the kernel a prefill batch takes whatever the row count, so that a
  // query row's bits do not depend on how many rows its chunk (or piece of one) has.
  cpu::MatmulOptions ActivationProductOptions() const;
  static absl::Status NeedContiguous(const Act& a, const char* what);
  static float* Row(const Act& a, int64_t i) { return static_cast<float*>(a.data) + i * a.ld; }
  absl::Status AttendGqa(int layer, const AttentionShape& shape, Act q, Act out);
  absl::Status AttendLatent(int layer, const AttentionShape& shape, Act q, Act out);

  Executor::Impl& impl_;
  Batch& b_;
  // The step's token -> sequence map and new tokens per sequence.
  const std::vector<int>* seq_of_ = nullptr;
  // Per sequence: its rows are decodes (one-token steps, or rows_as_decodes), not a prefill.
  std::vector<char> seq_decode_;
  bool prompt_rows_ = false;             // some sequence's rows are a prefill's
  std::vector<int64_t> head_row_index_;  // the step's token row of each head row
  std::vector<int> head_row_seq_;        // and its sequence
  HeadRows head_rows_;
  // The current MoE layer's routing: per token, the chosen experts (selection order) and
  // their weights.
  std::vector<std::vector<int32_t>> route_experts_;
  std::vector<std::vector<float>> route_weights_;
  // The per-choice tensors' rows are grouped by expert (ops.h lets the device choose their
  // order): expert e's rows are [expert_begin_[e], expert_begin_[e + 1]); choice k of token t
  // is row choice_row_[t · K + k], and row r belongs to token choice_token_[r].
  // Under expert parallelism only this rank's experts' choices have rows (choice_row_ -1
  // for the others), and its stacks start at expert expert0_.
  std::vector<int64_t> expert_begin_, choice_row_, choice_token_;
  int64_t expert0_ = 0;
  std::vector<float> logits_;  // [head rows][n_vocab] after GatherVocab
  // Open phases (innermost last) and when each last resumed.
  std::vector<std::pair<const char*, std::chrono::steady_clock::time_point>> phases_;
};

}  // namespace tessera::executor
