// The device operations the forward pass (forward.h) is written against, and the types
// they share. A device implements them in a class of its own (CpuOps in cpu_ops.h,
// CudaOps in cuda_forward.cc); ForwardPass<Ops> is instantiated once per device. Not a
// graph: each call runs (or, on a GPU, enqueues) one operation, in the order the pass
// makes them.
//
// The contract (`Ops` below is the device's class):
//
//   using Vec, Mat;                       a weight vector and matrix as the device holds them
//   using Layer = BlockWeights<Vec, Mat>;
//   using Product = MatProduct<Mat>;  using Expert = ExpertProduct<Mat>;
//   hparams(), config(), layer(l), output(), output_norm(), output_bias(), tp_rank()
//   share(l)                              this rank's part of block l (model::BlockShare:
//                                         its query and KV heads, its routed experts)
//   head_rows()                           the rows whose logits the step wants (HeadRows)
//   head_chunk_rows(), SetHeadChunk(first, n)
//                                         the head runs over its rows this many at a time
//                                         (all of them on the CPU; a GPU's planned buffer);
//                                         GatherHeadRows, TakeHidden (head rows) and
//                                         GatherVocab then take rows [first, first + n)
//   all_hidden_rows()                     TakeHidden takes every row's final-norm state
//                                         (SequenceInput::all_hidden), not the head rows'
//   Act Tensor(Buf, rows, cols, Prec)     the step's buffer for that role, rows × cols
//                                         (contents kept while the role's size holds)
//   Act AsF32(Act a, Buf scratch)         `a` in float32 (a itself where it already is)
//                                         (these two return no status: a device that cannot
//                                         provide the tensor reports it from every later
//                                         operation of the step)
//   Phase(name)                           an RAII scope timing a part of the step
//
//   Embed(x)                              the step's tokens' embedding rows (F32; rows of
//                                         tokens outside this rank's vocabulary are zero)
//   Products({{&w, x, y, row_seq, per_vector}, ...})
//                                         y = x · wᵀ for each (x rows are tokens); several
//                                         products may share one hand-off; per_vector: a
//                                         row's result never depends on its batch-mates,
//                                         with the same kernels at every batch size (for
//                                         results that decide something discrete); row_seq:
//                                         each row's sequence where the rows are not the
//                                         step's tokens (null: they are)
//   HeadProducts(stack, H, x, y)          row i of y = member (i mod H) of `stack` (H
//                                         matrices of y.cols rows each) times row i of x
//   ExpertProducts({{&stack, rows, y}, ...}, x, per_choice)
//                                         per (token, choice) of the current routing, one
//                                         row of y (T·K rows, in an order the device
//                                         chooses: the GPU's t·K + k, the CPU's grouped by
//                                         expert) = the chosen expert's member (of `rows`
//                                         rows) times x's row t, or with per_choice x's row
//                                         of the same (token, choice)
//   Route(layer, logits, bias)            the experts and weights of each token (spec 5.6),
//                                         kept for ExpertProducts and Combine; returns
//                                         the rows of the per-choice tensors: T·K, or
//                                         under expert parallelism the choices of this
//                                         rank's experts (the others add nothing here)
//   Combine(down, y)                      y[t] = Σ_k weight[t][k] · down[row of (t, k)]
//   RmsNorm(in, w, eps, out)              each row of `in` normalized (may be in place)
//   LayerNorm(x, w, b, eps)               in place, float32
//   Rope(v, heads, head_stride)           the step's RoPE on n_rot values at v's row t,
//                                         head h: v.data + t·ld + h·head_stride
//   AddBias(y, b)                         y[t] += b (nothing when b is absent)
//   Add(x, y)                             x += y
//   SiluMul(gate, up)                     gate = silu(gate) · up
//   Scale(x, s), Copy(src, dst), Zero(x)
//   RoundToAct(hr)                        the head's rows (Buf::kHeadIn, F32) rounded to the
//                                         compute dtype and kept in float32; a device may
//                                         keep the scratch for it beside that buffer
//   WriteKv(layer, shape, k, v)           the step's keys (and values) into the paged cache
//   Attend(layer, shape, q, out)          causal attention of the step's queries over the
//                                         cache (and, with DSA, only the selected keys)
//   WriteIndexKeys(layer, k), SelectKeys(layer, q, w), TraceSelection(layer)
//                                         the DSA indexer's cache, its top-k choice, and
//                                         the step trace's copy of it
//   GatherHeadRows(x, hr), GatherVocab(logits)
//   InputHidden(g)                        an MTP step's given hidden rows (F32, n_embd each:
//                                         the trunk's final-norm hidden state of the
//                                         position before each token), one per token
//   TakeHidden(hr)                        the head's normalized rows (F32) kept for the
//                                         caller where the step asked for them (nothing
//                                         otherwise)
//   AllReduce(x)                          the sum over the tensor-parallel group, in x's
//                                         precision
//
// Every operation leaves its output in the output's precision (see forward.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "worker/executor/block_weights.h"

namespace tessera::executor {

// kF32: float32 always. kAct: the step's compute dtype (float32, bfloat16 or float16).
enum class Prec : uint8_t { kF32, kAct };

// The step buffers by role (a device may back several roles with one allocation only
// where the pass never holds them at once).
enum class Buf : uint8_t {
  kX,     // the residual stream (float32)
  kH,     // a sublayer's normalized input
  kY,     // a sublayer's output
  kQ,     // queries
  kK,     // keys (GQA) or the MLA latent and rope key
  kV,     // values
  kAttn,  // attention outputs
  kQa,    // MLA absorbed queries
  kO,     // MLA per-head values
  kCq,    // MLA query latent
  kGate,
  kUp,
  kDown,
  kRouterLogits,
  kH32,   // kH in float32
  kCq32,  // kCq in float32
  kQi,    // DSA index queries, keys and head weights
  kKi,
  kWi,
  kHeadIn,     // the head's normalized rows
  kLogits,     // this rank's vocabulary columns of the head
  kMtpIn,      // the MTP block's input [enorm(embedding) | hnorm(hidden)], 2 n_embd wide
  kMtpHidden,  // the MTP block's given trunk hidden rows (float32)
  kAllHidden,  // every row's final-norm state (float32; SequenceInput::all_hidden)
  kCount
};

// A strided matrix of activations in the device's memory: row i at data + i · ld
// elements of `elem` bytes. Views (Cols, Reshape) share the storage.
struct Act {
  void* data = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  Prec prec = Prec::kF32;
  int elem = 4;  // bytes per element as stored

  bool empty() const { return data == nullptr; }
  bool contiguous() const { return ld == cols; }
  // Columns [offset, offset + n) of every row.
  Act Cols(int64_t offset, int64_t n) const {
    Act a = *this;
    a.data = static_cast<uint8_t*>(data) + offset * elem;
    a.cols = n;
    return a;
  }
  // The same contiguous elements as rows × cols (rows · cols = this->rows · this->cols).
  Act Reshape(int64_t r, int64_t c) const {
    Act a = *this;
    a.rows = r;
    a.cols = c;
    a.ld = c;
    return a;
  }
};

// The shape of one attention call (this rank's heads).
struct AttentionShape {
  int64_t heads = 0, kv_heads = 0, d_k = 0, d_v = 0;
  // GQA under tensor parallelism: the model's index of this rank's first query head, and
  // the model's query heads per KV head (0: heads / kv_heads, all of a group on the rank).
  // A rank whose query heads start or end inside a group holds that group's KV head too.
  int64_t head0 = 0, group = 0;
  // The local query heads [first, second) that local KV head j serves.
  std::pair<int64_t, int64_t> QueryHeadsOf(int64_t j) const {
    const int64_t g = group > 0 ? group : heads / kv_heads;
    const int64_t kv0 = head0 / g;
    return {std::max<int64_t>(0, (kv0 + j) * g - head0),
            std::min<int64_t>(heads, (kv0 + j + 1) * g - head0)};
  }
  // MLA: one latent row per token serves every head as key (d_k values) and value (its
  // first d_v values).
  bool latent = false;
  // DSA: the queries attend only to the keys the indexer kept (SelectKeys); otherwise to
  // every causal key (the MTP block, which has no indexer run).
  bool sparse = false;
};

// The head's rows: `count` rows of the step's tokens; `seq` gives each row's sequence for
// the batch-invariant product (null: the device multiplies them as one batch).
struct HeadRows {
  size_t count = 0;
  const std::vector<int>* seq = nullptr;
};

template <typename Mat>
struct MatProduct {
  const Mat* w = nullptr;
  Act x, y;
  const std::vector<int>* row_seq = nullptr;
  bool per_vector = false;
};

template <typename Mat>
struct ExpertProduct {
  const Mat* stack = nullptr;  // E members of `rows` rows each
  int64_t rows = 0;
  Act y;
};

// Whether a weight is present in the file (optional biases and norms).
inline bool Present(const std::vector<float>& v) { return !v.empty(); }
inline bool Present(const float* v) { return v != nullptr; }
template <typename Mat>
bool Present(const Mat& m) {
  return m.data != nullptr;
}
template <typename Mat>
int64_t Rows(const Mat& m) {
  return m.rows;
}

}  // namespace tessera::executor

// The operations' declarations, once for every device: expanded inside a device's class,
// after its Vec, Mat, Product and Expert aliases (see the contract above).
#define TESSERA_DEVICE_OPS                                                                     \
  absl::Status Embed(Act x);                                                                   \
  absl::Status Products(std::initializer_list<Product> products);                              \
  absl::Status HeadProducts(const Mat& stack, int64_t heads, Act x, Act y);                    \
  absl::Status ExpertProducts(std::initializer_list<Expert> products, Act x, bool per_choice); \
  absl::StatusOr<int64_t> Route(int layer, Act logits, const Vec& bias);                       \
  absl::Status Combine(Act down, Act y);                                                       \
  absl::Status RmsNorm(Act in, const Vec& w, float eps, Act out);                              \
  absl::Status LayerNorm(Act x, const Vec& w, const Vec& b, float eps);                        \
  absl::Status Rope(Act v, int64_t heads, int64_t head_stride);                                \
  absl::Status AddBias(Act y, const Vec& bias);                                                \
  absl::Status Add(Act x, Act y);                                                              \
  absl::Status SiluMul(Act gate, Act up);                                                      \
  absl::Status Scale(Act x, float s);                                                          \
  absl::Status Copy(Act src, Act dst);                                                         \
  absl::Status Zero(Act x);                                                                    \
  absl::Status RoundToAct(Act x);                                                              \
  absl::Status WriteKv(int layer, const AttentionShape& shape, Act k, Act v);                  \
  absl::Status Attend(int layer, const AttentionShape& shape, Act q, Act out);                 \
  absl::Status WriteIndexKeys(int layer, Act k);                                               \
  absl::Status SelectKeys(int layer, Act q, Act w);                                            \
  absl::Status TraceSelection(int layer);                                                      \
  absl::Status GatherHeadRows(Act x, Act hr);                                                  \
  absl::Status GatherVocab(Act logits);                                                        \
  absl::Status InputHidden(Act g);                                                             \
  absl::Status TakeHidden(Act hr);                                                             \
  absl::Status AllReduce(Act x);
