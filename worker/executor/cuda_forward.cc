// The GPU forward pass: the pass of forward.h, shared with the CPU, over CudaOps (below),
// whose operations queue the kernels of kernels/cuda/ on one stream per executor:
//   - weights: every matrix and vector LoadWeights chose for this rank, uploaded once into
//     one allocation through pinned staging buffers (staging_upload.h), reads overlapping
//     copies; quantized matrices stay quantized and are decoded in the kernels;
//   - products: GEMV (weights decoded in registers) up to kGemvRows tokens, dequantize +
//     cuBLAS above; with batch_invariant, rows are multiplied per prefill sequence and
//     decode rows with GEMV, as on the CPU, so a sequence's results do not depend on what
//     shares its step;
//   - the paged KV cache (K/V, or the MLA latent, plus DSA index keys) in device memory,
//     sized from cudaMemGetInfo and gpu_memory_utilization (memory_planner.h);
//   - tensor parallelism: all-reduce after the row-parallel products and all-gather of the
//     vocab-parallel head, on the stream when the communicator is NCCL, through host
//     copies otherwise;
//   - decode-only steps run as CUDA graphs, one per (padded batch, padded block-table width):
//     pad tokens have no cache slot and no visible key, so they change nothing.
// State is the device context (stream, cuBLAS, graphs) with the state by lifetime:
// DeviceWeights (uploaded once), DeviceKvCache (planned once), StepBuffers (planned, kept
// across steps); each step's host-side data (StepState) lives for that step only.
#include "worker/executor/cuda_forward.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/constants.h"
#include "common/util/status_macros.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/cuda_types.h"
#include "kernels/cuda/glue_kernels.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/launcher_checks.h"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/memory_planner.h"
#include "kernels/cuda/nn_kernels.h"
#include "kernels/cuda/rope_factors.h"
#include "kernels/cuda/selection_kernels.h"
#include "kernels/cuda/staging_upload.h"
#include "worker/executor/forward.h"
#include "worker/executor/ops.h"

namespace tessera::executor {
namespace {

using cuda::DeviceMatrix;
using cuda::DType;

// Decode attention (PagedAttentionDecode) keeps the split partials of at most this many queries
// at a time (more run in passes).
constexpr int64_t kDecodePartialQueries = 256;
// A sequence with more new tokens than this attends with the tiled prefill kernel (each key
// read once per tile of queries); shorter ones (decode, verification of drafts, small prompt
// chunks) with the decode kernel, so that a verified row equals its one-token step.
constexpr int64_t kTiledAttentionMin = 64;
// Products of up to this many tokens run as GEMV, which reads each weight byte once per
// kGemvMaxBatch (64) tokens; above, dequantizing for cuBLAS (a Q4_K matrix: 0.56 bytes per
// element read, 2 written, 2 read again) amortizes over the prompt.
constexpr int64_t kGemvRows = 64;
// The grouped products (routed experts, MLA's per-head matrices) sort their choices by member
// when there are at least this many choices per member on average: each member is then
// decoded once per kGroupedPass of its choices instead of once per choice, at the cost of the
// sort and of one block row per member. (A threshold to measure on a GPU.)
constexpr int64_t kSortedChoicesPerMember = 2;
bool SortPays(int64_t choices, int64_t members) {
  return choices >= kSortedChoicesPerMember * members;
}
// Decode steps up to this many sequences are captured as graphs (GEMV only inside).
constexpr int64_t kGraphMaxBatch = 64;
constexpr size_t kGemmScratchBytes = size_t{64} << 20;
// The DSA indexer's scores (query rows × keys, float32) are computed at most this much at a
// time; TESSERA_CUDA_INDEXER_SCORE_BYTES (read when an executor is created) overrides it, so
// that tests can exercise the pieces.
int64_t IndexerScoreBytesFromEnv() {
  const char* env = std::getenv("TESSERA_CUDA_INDEXER_SCORE_BYTES");
  const long long v = env != nullptr ? std::atoll(env) : 0;
  return v > 0 ? static_cast<int64_t>(v) : int64_t{64} << 20;
}

// Query rows per pass of the indexer's scores and top-k over `keys` keys (at least one).
int64_t IndexerRowsPerPass(int64_t tokens, int64_t keys, int64_t budget_bytes) {
  if (keys <= 0) return tokens;
  return std::max<int64_t>(1, std::min<int64_t>(tokens, budget_bytes / (keys * 4)));
}
// The head computes at most this many logits rows at a time (the planned head buffers: an
// all-logits step of a long prompt takes its rows in chunks, each copied to the host before
// the next); TESSERA_CUDA_HEAD_CHUNK_ROWS (read when an executor is created) overrides it,
// so that tests can exercise the chunks.
int64_t HeadChunkRowsFromEnv() {
  const char* env = std::getenv("TESSERA_CUDA_HEAD_CHUNK_ROWS");
  const long long v = env != nullptr ? std::atoll(env) : 0;
  return v > 0 ? static_cast<int64_t>(v) : 256;
}
// Left for cuBLAS, NCCL, graphs and the logits of large steps when planning the cache.
constexpr uint64_t kReserveBytes = uint64_t{768} << 20;

// A device allocation that grows on demand.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  // At least `want` bytes; *grew is set when the buffer moved.
  absl::Status Ensure(size_t want, const char* what, bool* grew) {
    if (want <= bytes) return absl::OkStatus();
    if (ptr != nullptr) cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
    want = (want + 255) / 256 * 256;
    if (cudaError_t e = cudaMalloc(&ptr, want); e != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat("cuda: allocating ", cuda::FormatBytes(want),
                                                       " for ", what,
                                                       " failed: ", cudaGetErrorString(e)));
    }
    bytes = want;
    if (grew != nullptr) *grew = true;
    return absl::OkStatus();
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

void* At(void* base, int64_t elements, size_t element_bytes) {
  return static_cast<uint8_t*>(base) + elements * static_cast<int64_t>(element_bytes);
}

using DeviceLayer = BlockWeights<const float*, DeviceMatrix>;

// Member `rows` × cols of a stacked matrix (experts, heads): the grouped products' view.
DeviceMatrix Member(const DeviceMatrix& stack, int64_t rows) {
  DeviceMatrix m = stack;
  m.rows = rows;
  return m;
}

// A grouped product over `members` stacked matrices of `rows` rows each (grouped GEMV's
// arguments, matmul_kernels.h).
cuda::GroupedGemvArgs Grouped(const DeviceMatrix& stack, int64_t rows, int members,
                              const int32_t* ids, int64_t tokens, int used, const void* x,
                              bool x_per_choice, int64_t x_stride, void* y, int64_t y_stride) {
  cuda::GroupedGemvArgs g;
  g.w = Member(stack, rows);
  g.member_bytes = static_cast<size_t>(rows) * stack.row_bytes;
  g.members = members;
  g.ids = ids;
  g.tokens = tokens;
  g.used = used;
  g.x = x;
  g.x_per_choice = x_per_choice;
  g.x_stride = x_stride;
  g.y = y;
  g.y_stride = y_stride;
  return g;
}

comm::ReduceDtype ReduceType(DType t) {
  return t == DType::kF32    ? comm::ReduceDtype::kFloat32
         : t == DType::kBF16 ? comm::ReduceDtype::kBFloat16
                             : comm::ReduceDtype::kFloat16;
}

// The step's inputs, packed into one host buffer and copied to the device at once.
struct StepLayout {
  int64_t tokens = 0;  // padded
  int64_t rows = 0;    // logits rows (padded)
  int64_t seqs = 0;    // block-table rows
  int max_blocks = 1;
  size_t slots = 0, ids = 0, positions = 0, query_seq = 0, kv_len = 0, row_index = 0, table = 0;
  size_t bytes = 0;
  void Plan() {
    size_t at = 0;
    auto take = [&](size_t n) {
      const size_t here = at;
      at = (at + n + 7) / 8 * 8;
      return here;
    };
    slots = take(tokens * sizeof(int64_t));
    ids = take(tokens * sizeof(int32_t));
    positions = take(tokens * sizeof(int32_t));
    query_seq = take(tokens * sizeof(int32_t));
    kv_len = take(tokens * sizeof(int32_t));
    row_index = take(rows * sizeof(int32_t));
    table = take(seqs * max_blocks * sizeof(int32_t));
    bytes = at;
  }
};

int64_t NextPow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// The weights this rank uploaded, for the executor's lifetime: every matrix and vector
// LoadWeights chose, in one allocation (tied embeddings once), and the RoPE factors.
struct DeviceWeights {
  DeviceBuffer data, theta;
  std::vector<DeviceLayer> layers;
  DeviceMatrix embd, output;
  const float *output_norm = nullptr, *output_bias = nullptr;
  int64_t vocab_local = 0;

  // Uploads `impl`'s host views through pinned staging buffers on `stream`, then waits.
  absl::Status Upload(const Executor::Impl& impl, cudaStream_t stream);
};

// The paged KV cache and its geometry, planned once from the device's memory
// (State::PlanCache): per layer, K then V (GQA), or the latent (MLA); the DSA index keys
// (float32) apart.
struct DeviceKvCache {
  DeviceBuffer kv, index_keys;
  int block_size = model::kDefaultKvBlockSize;
  int64_t n_blocks = 0;
  int64_t k_width = 0, v_width = 0;  // elements per token per layer
  int64_t layer_elems = 0;           // elements per layer (K and V together)
  int64_t index_dim = 0;
  size_t esz = 2;  // bytes per K/V element (the compute dtype's)

  void* KBase(int layer) const { return At(kv.ptr, layer * layer_elems, esz); }
  void* VBase(int layer) const {
    return At(kv.ptr, layer * layer_elems + n_blocks * block_size * k_width, esz);
  }
  void* IndexKeys(int layer) const {
    return At(index_keys.ptr, layer * n_blocks * block_size * index_dim, 4);
  }
};

// The step buffers, planned by use (State::EnsureBuffers) and kept from step to step: the
// activations by role (kRoles), routing, the indexer's scratch, the packed step inputs and
// their pinned host copy, the logits.
struct StepBuffers {
  // Sized for `capacity` tokens and `row_capacity` logits rows.
  int64_t capacity = 0, row_capacity = 0;
  DeviceBuffer x, h, y, q, k, v, attn, qa, o, cq, gate, up, down;
  DeviceBuffer router_logits, route_ids, route_weights, h32, cq32;
  DeviceBuffer qi, ki, wi, scores, selected, head_ids;
  DeviceBuffer attn_partials;  // decode attention's per-split partials (PagedAttentionDecode)
  // The grouped products' choices sorted by member (SortByMember): routed experts, per layer;
  // MLA's per-head products, per step.
  DeviceBuffer route_order, route_offsets, head_order, head_offsets;
  DeviceBuffer gemm_scratch, inputs, hr, logits32, gathered;
  DeviceBuffer mtp_in, mtp_hidden;  // MTP steps only (executors that loaded the block)
  // Sampling on the device: per logits row its parameters, then the tokens and their
  // log-probabilities; with TP, the gathered rows as whole rows of the vocabulary.
  DeviceBuffer sample_params, sample_out, sample_logits;
  std::vector<cuda::GpuSamplingParams> host_sample_params;
  std::vector<uint8_t> host_sample_out;
  DeviceBuffer all_hidden;      // every row's hidden state (the same executors)
  void* host_inputs = nullptr;  // pinned
  size_t host_inputs_bytes = 0;
  std::vector<float> host_logits;

  StepBuffers() = default;
  StepBuffers(const StepBuffers&) = delete;
  StepBuffers& operator=(const StepBuffers&) = delete;
  ~StepBuffers() {
    if (host_inputs != nullptr) cudaFreeHost(host_inputs);
  }
  // At least `bytes` of pinned host_inputs (twice that when it grows).
  absl::Status EnsureHostInputs(size_t bytes) {
    if (bytes <= host_inputs_bytes) return absl::OkStatus();
    if (host_inputs != nullptr) cudaFreeHost(host_inputs);
    host_inputs = nullptr;
    host_inputs_bytes = 0;
    TESSERA_RETURN_IF_ERROR(
        cuda::CudaStatus(cudaMallocHost(&host_inputs, bytes * 2), "cudaMallocHost (step inputs)"));
    host_inputs_bytes = bytes * 2;
    return absl::OkStatus();
  }
  // The device bytes of the planned buffers (the step inputs, sized per step, apart).
  uint64_t PlannedBytes() const {
    uint64_t sum = 0;
    for (const DeviceBuffer* b : {&x,
                                  &h,
                                  &y,
                                  &q,
                                  &k,
                                  &v,
                                  &attn,
                                  &qa,
                                  &o,
                                  &cq,
                                  &gate,
                                  &up,
                                  &down,
                                  &router_logits,
                                  &route_ids,
                                  &route_weights,
                                  &h32,
                                  &cq32,
                                  &qi,
                                  &ki,
                                  &wi,
                                  &scores,
                                  &selected,
                                  &head_ids,
                                  &attn_partials,
                                  &route_order,
                                  &route_offsets,
                                  &head_order,
                                  &head_offsets,
                                  &gemm_scratch,
                                  &hr,
                                  &logits32,
                                  &gathered}) {
      sum += b->bytes;
    }
    return sum;
  }
};

// How a step runs: its packed inputs, its logits rows, and whether it is replayed as a graph
// (then padded to the graph's shape).
struct StepPlan {
  StepLayout lay;
  std::vector<int32_t> rows;  // the token of each logits row (all_logits: every new token)
  std::vector<int> row_seq;   // and its sequence
  int64_t tokens = 0;         // real tokens
  bool graph = false;
};

// `max_graph_rows`: graphs only where the head takes every row at once (a head in chunks
// copies each to the host inside the pass).
StepPlan PlanStep(const Batch& b, bool graphs_enabled, int64_t max_graph_rows) {
  StepPlan p;
  p.tokens = b.size();
  bool decode_only = true;
  int max_blocks = 1;
  for (const SequenceInput& in : b.seqs) {
    decode_only = decode_only && in.tokens.size() == 1;
    max_blocks = std::max<int>(max_blocks, static_cast<int>(in.block_table.size()));
  }
  for (size_t q = 0; q < b.seqs.size(); ++q) {
    const int64_t n = static_cast<int64_t>(b.seqs[q].tokens.size());
    for (int64_t i = b.seqs[q].all_logits ? 0 : n - 1; i < n; ++i) {
      p.rows.push_back(static_cast<int32_t>(b.seq_begin[q] + i));
      p.row_seq.push_back(static_cast<int>(q));
    }
  }
  const int64_t T = p.tokens, R = static_cast<int64_t>(p.rows.size());
  // MTP steps and steps whose hidden rows are asked for run eagerly: their host inputs and
  // outputs are copied per step.
  p.graph = graphs_enabled && decode_only && b.trace == nullptr && !b.mtp &&
            b.hidden_out == nullptr && R == T && T <= kGraphMaxBatch &&
            NextPow2(T) <= max_graph_rows;
  p.lay.tokens = p.graph ? NextPow2(T) : T;
  p.lay.rows = p.graph ? p.lay.tokens : R;
  p.lay.seqs = p.graph ? p.lay.tokens : static_cast<int64_t>(b.seqs.size());
  p.lay.max_blocks = p.graph ? static_cast<int>(NextPow2(max_blocks)) : max_blocks;
  p.lay.Plan();
  return p;
}

// The step's host-side data the operations read (CudaOps), for one step: the sequences of
// the tokens and of the logits rows for the batch-invariant products, and the trace. Graphs
// see none of it (seq_of null, head_row_seq empty: the row sequences are the tokens' own).
struct StepState {
  const std::vector<int>* seq_of = nullptr;
  std::vector<int64_t> seq_len;  // new tokens of each sequence
  // Eager steps: each sequence's first token and the keys its last token sees.
  std::vector<int64_t> seq_begin, seq_kv_end;
  std::vector<int> head_row_seq;  // sequence of each logits row
  StepTrace* trace = nullptr;
  int64_t trace_tokens = 0;  // the real tokens (the trace's rows)
  // An MTP step (ForwardPass::RunMtp) and its tokens' hidden rows; where the head's
  // normalized rows go (null: not asked). Never in graphs.
  bool mtp = false;
  const std::vector<float>* mtp_hidden = nullptr;
  std::vector<float>* hidden_out = nullptr;
  bool all_hidden = false;  // hidden_out takes every row (executors with the MTP block)
};

StepState MakeStepState(const Batch& b, const StepPlan& plan) {
  StepState st;
  st.seq_len.assign(b.seqs.size(), 0);
  for (size_t q = 0; q < b.seqs.size(); ++q) {
    st.seq_len[q] = static_cast<int64_t>(b.seqs[q].tokens.size());
  }
  st.trace = b.trace;
  st.trace_tokens = plan.tokens;
  st.mtp = b.mtp;
  st.mtp_hidden = &b.mtp_hidden;
  st.hidden_out = b.hidden_out;
  st.all_hidden = b.all_hidden;
  if (!plan.graph) {
    st.seq_of = &b.seq_of;
    st.head_row_seq = plan.row_seq;
    st.seq_begin.assign(b.seq_begin.begin(), b.seq_begin.end());
    st.seq_kv_end.assign(b.seqs.size(), 0);
    for (size_t q = 0; q < b.seqs.size(); ++q) {
      if (st.seq_len[q] > 0) st.seq_kv_end[q] = b.pos[b.seq_begin[q + 1] - 1] + 1;
    }
  }
  return st;
}

}  // namespace

// The device context of one executor (device, dtype, stream, cuBLAS, captured graphs, the
// options read at creation) and one of each of the state types above, by lifetime.
struct CudaForward::State {
  Executor::Impl& impl;
  const model::HyperParams& hp;
  int device = 0;
  std::string name;
  cuda::DeviceLimits limits;  // the device's, for the kernels that depend on them
  DType act = DType::kBF16;
  size_t esz = 2;  // bytes per activation
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  bool graphs_enabled = true;
  int selected_k = 0;
  int64_t indexer_score_bytes = 0;
  int64_t head_chunk_rows = 256;

  DeviceWeights weights;   // the executor's lifetime
  DeviceKvCache cache;     // planned once, after the weights and a first sizing of the buffers
  StepBuffers buffers;     // grown by the steps that need more
  DeviceBuffer broadcast;  // BroadcastHost's staging

  struct CapturedGraph {
    cudaGraphExec_t exec = nullptr;
    size_t allreduces = 0;  // the timed all-reduces it holds (Communicator::queued_allreduces)
  };
  // By (padded batch, padded block-table width).
  using GraphMap = std::map<std::pair<int64_t, int>, CapturedGraph>;
  GraphMap graphs;
  std::set<std::pair<int64_t, int>> graph_failures;

  State(Executor::Impl& i) : impl(i), hp(i.hp) {}
  ~State() {
    cudaSetDevice(device);  // the buffers are freed on their own device, whatever the thread
    for (auto& [key, graph] : graphs) cudaGraphExecDestroy(graph.exec);
    if (cublas != nullptr) cublasDestroy(cublas);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  absl::Status EnsureBuffers(int64_t tokens, int64_t rows, int max_blocks, bool* grew);
  absl::Status PlanCache(uint64_t free_before, uint64_t total, int* n_blocks_out);
  absl::Status AllReduce(void* data, int64_t n, DType dt);
  void DropGraphs() {
    for (auto& [key, graph] : graphs) cudaGraphExecDestroy(graph.exec);
    graphs.clear();
  }
  // The communicator's count of timed all-reduces this step (0 without one); see
  // Communicator::queued_allreduces.
  size_t QueuedAllReduces() const {
    return impl.options.comm != nullptr ? impl.options.comm->queued_allreduces() : 0;
  }
  void SetQueuedAllReduces(size_t n) {
    if (impl.options.comm != nullptr) impl.options.comm->set_queued_allreduces(n);
  }

  // The step, in Step's order: the buffers sized and the inputs copied to the device, the
  // pass run (replaying or capturing a graph, or eagerly), the logits back to the host.
  absl::Status WriteInputs(const Batch& b, const StepPlan& plan);
  absl::Status Run(const StepPlan& plan, const StepState& step);
  GraphMap::iterator Capture(const StepLayout& lay, const StepState& step);
  absl::Status Forward(const StepLayout& lay, const StepState& step);
  absl::StatusOr<std::vector<std::vector<float>>> Logits(const Batch& b, const StepPlan& plan,
                                                         const std::vector<char>& sampled_rows);
  // The head's rows [first, first + n) of `total` into buffers.host_logits (whole rows of
  // the vocabulary): the local logits at TP 1, the gathered columns with a device
  // communicator (`gathered_rows` per rank part), a host all-gather otherwise.
  absl::Status CopyLogits(int64_t first, int64_t n, int64_t gathered_rows, int64_t total);
  // Samples the rows of the sequences with device_sample (one row each) where the logits
  // are; marks them in `rows` (per logits row) and fills (*sampled)[sequence].
  absl::Status SampleOnDevice(const Batch& b, const StepPlan& plan,
                              std::vector<SampledToken>& sampled, std::vector<char>& rows);
};

// --- loading -------------------------------------------------------------------------------

absl::Status DeviceWeights::Upload(const Executor::Impl& impl, cudaStream_t stream) {
  const model::HyperParams& hp = impl.hp;
  // Every host span once (tied embeddings share one), with a setter for its device address.
  std::vector<absl::Span<const uint8_t>> spans;
  std::map<const uint8_t*, size_t> index;
  std::vector<std::pair<size_t, std::function<void(const uint8_t*)>>> setters;
  auto add = [&](absl::Span<const uint8_t> bytes, std::function<void(const uint8_t*)> set) {
    if (bytes.empty()) return;
    auto [it, fresh] = index.emplace(bytes.data(), spans.size());
    if (fresh) spans.push_back(bytes);
    setters.emplace_back(it->second, std::move(set));
  };
  // Every matrix must be one the CUDA kernels decode: checked before any device memory is
  // taken (an unsupported quant type fails the load, not the first step).
  absl::Status unsupported;
  auto matrix = [&](const QuantMatrix& m, DeviceMatrix& d, const std::string& what) {
    if (m.data == nullptr) return;
    if (absl::Status st = cuda::CheckRowBytes(m.type, m.cols, m.row_bytes, what.c_str());
        !st.ok() && unsupported.ok()) {
      unsupported = st;
    }
    d.type = m.type;
    d.rows = m.rows;
    d.cols = m.cols;
    d.row_bytes = m.row_bytes;
    add(absl::MakeConstSpan(m.data, static_cast<size_t>(m.rows) * m.row_bytes),
        [&d](const uint8_t* p) { d.data = p; });
  };
  auto vec = [&](const std::vector<float>& v, const float*& d) {
    add(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)),
        [&d](const uint8_t* p) { d = reinterpret_cast<const float*>(p); });
  };
  layers.resize(impl.weights.layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerWeights& L = impl.weights.layers[l];
    DeviceLayer& D = layers[l];
    ForEachBlockWeight(
        [&](const char*, const std::vector<float>& host, const float*& dev) { vec(host, dev); },
        [&](const char* name, const QuantMatrix& host, DeviceMatrix& dev) {
          matrix(host, dev, absl::StrCat("blk.", l, ".", name));
        },
        L, D);
  }
  const gguf::GgmlTypeInfo* et = gguf::LookupGgmlType(impl.weights.embd_type);
  if (et == nullptr) return absl::InvalidArgumentError("token_embd.weight: unknown type");
  embd.type = impl.weights.embd_type;
  embd.rows = impl.weights.vocab_end - impl.weights.vocab_begin;
  embd.cols = hp.n_embd;
  embd.row_bytes = static_cast<size_t>(hp.n_embd) / et->block_elems * et->block_bytes;
  add(impl.weights.embd_data, [this](const uint8_t* p) { embd.data = p; });
  matrix(impl.weights.output, output, "output");
  if (absl::Status st = cuda::CheckRowBytes(embd.type, embd.cols, embd.row_bytes, "token_embd");
      !st.ok() && unsupported.ok()) {
    unsupported = st;
  }
  if (!unsupported.ok()) return unsupported;
  vec(impl.weights.output_norm, output_norm);
  vec(impl.weights.output_bias, output_bias);
  vocab_local = impl.weights.output.rows;

  // One synthetic "file part" per span: the staging planner packs them, the reader copies
  // from the host views (page cache for in-place tensors).
  std::vector<model::TensorShard> shards(spans.size());
  uint64_t total = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    shards[i].mapping = i;
    model::ByteRange r;
    r.part = static_cast<uint32_t>(i);
    r.offset = 0;
    r.length = spans[i].size();
    r.count = 1;
    shards[i].ranges.push_back(r);
    shards[i].read_bytes = r.length;
    total += r.length;
  }
  cuda::StagingOptions so;
  absl::StatusOr<cuda::StagingPlan> plan = cuda::PlanStagingUpload(shards, so);
  if (!plan.ok()) return plan.status();
  TESSERA_RETURN_IF_ERROR(data.Ensure(plan->device_bytes, "the weights", nullptr));
  uint64_t done = 0;
  auto last = std::chrono::steady_clock::now();
  const auto& progress = impl.options.on_load_progress;
  auto read = [&](uint32_t part, uint64_t offset, uint64_t length, void* dst) -> absl::Status {
    std::memcpy(dst, spans[part].data() + offset, length);
    done += length;
    const auto now = std::chrono::steady_clock::now();
    if (progress && (done == total || now - last > std::chrono::milliseconds(100))) {
      last = now;
      progress(done, total);
    }
    return absl::OkStatus();
  };
  TESSERA_RETURN_IF_ERROR(cuda::RunStagingUpload(*plan, so, read, data.ptr, stream));
  for (const auto& [i, set] : setters) set(data.as<uint8_t>() + plan->tensor_offsets[i]);

  std::vector<double> scales = cuda::RopeThetaScales(impl.rope);
  if (scales.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rope dimension ", impl.rope.n_rot, ": expected a positive even number"));
  }
  TESSERA_RETURN_IF_ERROR(theta.Ensure(scales.size() * sizeof(double), "rope factors", nullptr));
  TESSERA_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaMemcpyAsync(theta.ptr, scales.data(), scales.size() * sizeof(double),
                                       cudaMemcpyHostToDevice, stream),
                       "cudaMemcpyAsync (rope factors)"));
  return cuda::CudaStatus(cudaStreamSynchronize(stream), "upload sync");
}

absl::Status CudaForward::State::EnsureBuffers(int64_t tokens, int64_t rows, int max_blocks,
                                               bool* grew) {
  StepBuffers& bufs = buffers;
  const int64_t d = hp.n_embd, T = std::max(bufs.capacity, tokens);
  const int64_t R = std::max(bufs.row_capacity, rows);
  const int64_t RH = std::min(R, head_chunk_rows);  // the head's rows at a time
  int64_t q_w = 0, k_w = 0, v_w = 0, attn_w = 0, qa_w = 0, o_w = 0, cq_w = 0;
  // An upper bound of this rank's heads.
  const int64_t H_all = *std::max_element(hp.n_head.begin(), hp.n_head.end());
  if (impl.config.mla) {
    const int64_t c = hp.kv_lora_rank, r = hp.n_rot, dq = hp.key_length_mla;
    q_w = H_all * dq;
    k_w = c + r;
    attn_w = H_all * c;
    qa_w = H_all * (c + r);
    o_w = H_all * hp.value_length_mla;
    cq_w = hp.q_lora_rank;
  } else {
    q_w = H_all * hp.head_dim_k;
    k_w = static_cast<int64_t>(hp.n_head_kv[0]) * hp.head_dim_k;
    v_w = static_cast<int64_t>(hp.n_head_kv[0]) * hp.head_dim_v;
    attn_w = H_all * hp.head_dim_v;
  }
  // The attention's value width per head (MLA: the latent rank).
  const int64_t attn_v = impl.config.mla ? hp.kv_lora_rank : hp.head_dim_v;
  int64_t ffn_w = 0, down_w = 0, experts = 0, used = 0;
  for (const DeviceLayer& L : weights.layers) {
    ffn_w = std::max(ffn_w, L.w_gate.rows);
    ffn_w = std::max(ffn_w, L.gate_sh.rows);
  }
  if (hp.is_moe()) {
    experts = hp.n_expert;
    used = hp.n_expert_used;
    int64_t F = 0;  // the widest of this rank's experts' hidden dims
    for (size_t l = 0; l < weights.layers.size() && l < impl.shares.size(); ++l) {
      const model::BlockShare& s = impl.shares[l];
      const int64_t local = s.expert_end - s.expert_begin;
      if (weights.layers[l].gate_exps.rows > 0 && local > 0) {
        F = std::max(F, weights.layers[l].gate_exps.rows / local);
      }
    }
    ffn_w = std::max(ffn_w, used * F);
    down_w = used * d;
  }
  down_w = std::max(down_w, d);
  const bool f32_side = act != DType::kF32;  // router and indexer inputs in float32
  const int64_t HI = hp.indexer_heads, DI = hp.indexer_head_dim;
  const int64_t keys = impl.config.dsa ? static_cast<int64_t>(max_blocks) * cache.block_size : 0;
  struct Need {
    DeviceBuffer* buf;
    int64_t bytes;
    const char* what;
  };
  const int64_t dsa_k = impl.config.dsa ? std::max<int64_t>(1, hp.indexer_top_k) : 0;
  const Need needs[] = {
      {&bufs.x, T * d * 4, "the residual stream"},
      {&bufs.h, T * d * (int64_t)esz, "activations"},
      {&bufs.y, T * d * (int64_t)esz, "activations"},
      {&bufs.q, T * q_w * (int64_t)esz, "queries"},
      {&bufs.k, T * k_w * (int64_t)esz, "keys"},
      {&bufs.v, T * v_w * (int64_t)esz, "values"},
      {&bufs.attn, T * attn_w * (int64_t)esz, "attention outputs"},
      {&bufs.qa, T * qa_w * (int64_t)esz, "absorbed queries"},
      {&bufs.o, T * o_w * (int64_t)esz, "attention outputs"},
      {&bufs.cq, T * cq_w * (int64_t)esz, "query latents"},
      {&bufs.gate, T * ffn_w * (int64_t)esz, "ffn activations"},
      {&bufs.up, T * ffn_w * (int64_t)esz, "ffn activations"},
      {&bufs.down, T * down_w * (int64_t)esz, "expert outputs"},
      {&bufs.router_logits, T * experts * 4, "router logits"},
      {&bufs.route_ids, T * used * 4, "routing"},
      {&bufs.route_weights, T * used * 4, "routing"},
      {&bufs.h32, f32_side ? T * d * 4 : 0, "float32 activations"},
      {&bufs.cq32, f32_side ? T * cq_w * 4 : 0, "float32 query latents"},
      {&bufs.qi, impl.config.dsa ? T * HI * DI * 4 : 0, "indexer queries"},
      {&bufs.ki, impl.config.dsa ? T * DI * 4 : 0, "indexer keys"},
      {&bufs.wi, impl.config.dsa ? T * HI * 4 : 0, "indexer weights"},
      {&bufs.scores, IndexerRowsPerPass(tokens, keys, indexer_score_bytes) * keys * 4,
       "indexer scores"},
      {&bufs.selected, T * dsa_k * 4, "indexer selection"},
      {&bufs.head_ids, impl.config.mla ? T * H_all * 4 : 0, "head ids"},
      {&bufs.attn_partials,
       std::min(T, kDecodePartialQueries) * H_all *
           cuda::DecodePartialFloats(static_cast<int>(attn_v)) * 4,
       "attention partials"},
      {&bufs.route_order, T * used * 4, "routing order"},
      {&bufs.route_offsets, (experts + 2) * 4, "routing order"},
      {&bufs.head_order, impl.config.mla ? T * H_all * 4 : 0, "head order"},
      {&bufs.head_offsets, impl.config.mla ? (H_all + 2) * 4 : 0, "head order"},
      {&bufs.gemm_scratch, static_cast<int64_t>(kGemmScratchBytes), "the GEMM scratch"},
      {&bufs.hr, RH * d * (4 + (int64_t)esz), "head inputs"},
      {&bufs.logits32, RH * weights.vocab_local * 4, "logits"},
      {&bufs.mtp_in, impl.mtp_blocks > 0 ? T * 2 * d * 4 : 0, "MTP inputs"},
      {&bufs.mtp_hidden, impl.mtp_blocks > 0 ? T * d * 4 : 0, "MTP hidden rows"},
      {&bufs.all_hidden, impl.mtp_blocks > 0 ? T * d * 4 : 0, "every row's hidden state"},
  };
  for (const Need& n : needs) {
    TESSERA_RETURN_IF_ERROR(
        n.buf->Ensure(static_cast<size_t>(std::max<int64_t>(n.bytes, 256)), n.what, grew));
  }
  if (impl.options.tp_size > 1) {
    const int tp = impl.options.tp_size;
    const int64_t width = VocabWidth(hp.n_vocab, tp);
    TESSERA_RETURN_IF_ERROR(bufs.gathered.Ensure(static_cast<size_t>(RH * width * 4 * (tp + 1)),
                                                 "gathered logits", grew));
  }
  bufs.capacity = T;
  bufs.row_capacity = R;
  return absl::OkStatus();
}

absl::Status CudaForward::State::PlanCache(uint64_t free_before, uint64_t total,
                                           int* n_blocks_out) {
  const ExecutorOptions& opt = impl.options;
  DeviceKvCache& c = cache;
  // The cache's geometry as the executor planned it (Executor::Create): one source for
  // both devices; only the number of blocks is decided here.
  c.block_size = impl.kv_shape.block_size;
  // Cache layers: the trunk's, then the MTP blocks' (dense: no index keys).
  const int64_t L = impl.kv_shape.n_layers, L_index = hp.n_layer;
  c.k_width = impl.kv_shape.k_width;
  c.v_width = impl.kv_shape.v_width;
  c.index_dim = impl.config.dsa ? hp.indexer_head_dim : 0;
  c.esz = esz;
  const uint64_t per_token = static_cast<uint64_t>(L) * (c.k_width + c.v_width) * esz +
                             static_cast<uint64_t>(L_index) * c.index_dim * 4;
  const uint64_t workspace = kReserveBytes + buffers.PlannedBytes();
  cuda::GpuMemoryRequest req;
  req.free_bytes = free_before;
  req.total_bytes = total;
  req.gpu_memory_utilization = opt.gpu_memory_utilization;
  req.weight_bytes = weights.data.bytes;
  req.kv_bytes_per_token = per_token;
  req.workspace_bytes = workspace;
  req.block_tokens = c.block_size;
  req.min_tokens = opt.kv_tokens;
  absl::StatusOr<cuda::GpuMemoryPlan> plan = cuda::PlanGpuMemory(req);
  if (!plan.ok()) return plan.status();
  c.n_blocks =
      opt.kv_tokens > 0 ? (opt.kv_tokens + c.block_size - 1) / c.block_size : plan->kv_blocks;
  c.n_blocks = std::min<int64_t>(c.n_blocks, std::numeric_limits<int>::max() / 2);
  c.layer_elems = c.n_blocks * c.block_size * (c.k_width + c.v_width);
  TESSERA_RETURN_IF_ERROR(
      c.kv.Ensure(static_cast<size_t>(L * c.layer_elems) * esz, "the KV cache", nullptr));
  if (c.index_dim > 0) {
    TESSERA_RETURN_IF_ERROR(c.index_keys.Ensure(
        static_cast<size_t>(L_index * c.n_blocks * c.block_size * c.index_dim) * 4,
        "the DSA index keys", nullptr));
  }
  *n_blocks_out = static_cast<int>(c.n_blocks);
  return absl::OkStatus();
}

// --- collectives ------------------------------------------------------------------------

absl::Status CudaForward::State::AllReduce(void* data, int64_t n, DType dt) {
  const ExecutorOptions& opt = impl.options;
  if (opt.tp_size == 1) return absl::OkStatus();
  if (opt.comm->on_device()) {
    return opt.comm->AllReduceSumOnStream(data, static_cast<size_t>(n), ReduceType(dt), stream);
  }
  // A host communicator (Gloo): through host memory.
  std::vector<uint8_t> host(static_cast<size_t>(n) * cuda::DTypeBytes(dt));
  TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(
      cudaMemcpyAsync(host.data(), data, host.size(), cudaMemcpyDeviceToHost, stream),
      "cudaMemcpyAsync (all-reduce)"));
  TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamSynchronize(stream), "all-reduce sync"));
  TESSERA_RETURN_IF_ERROR(
      opt.comm->AllReduceSum(host.data(), static_cast<size_t>(n), ReduceType(dt)));
  return cuda::CudaStatus(
      cudaMemcpyAsync(data, host.data(), host.size(), cudaMemcpyHostToDevice, stream),
      "cudaMemcpyAsync (all-reduce)");
}

// --- the device operations of the shared forward pass -------------------------------------

namespace {

// Each step-buffer role's allocation and what it holds (for errors), in Buf's order.
struct Role {
  DeviceBuffer StepBuffers::*buffer;
  const char* what;
};
constexpr Role kRoles[] = {
    {&StepBuffers::x, "the residual stream"},
    {&StepBuffers::h, "normalized activations"},
    {&StepBuffers::y, "sublayer outputs"},
    {&StepBuffers::q, "queries"},
    {&StepBuffers::k, "keys"},
    {&StepBuffers::v, "values"},
    {&StepBuffers::attn, "attention outputs"},
    {&StepBuffers::qa, "absorbed queries"},
    {&StepBuffers::o, "per-head values"},
    {&StepBuffers::cq, "query latents"},
    {&StepBuffers::gate, "ffn gates"},
    {&StepBuffers::up, "ffn up projections"},
    {&StepBuffers::down, "expert outputs"},
    {&StepBuffers::router_logits, "router logits"},
    {&StepBuffers::h32, "float32 activations"},
    {&StepBuffers::cq32, "float32 query latents"},
    {&StepBuffers::qi, "indexer queries"},
    {&StepBuffers::ki, "indexer keys"},
    {&StepBuffers::wi, "indexer weights"},
    {&StepBuffers::hr, "head inputs"},
    {&StepBuffers::logits32, "logits"},
    {&StepBuffers::mtp_in, "MTP inputs"},
    {&StepBuffers::mtp_hidden, "MTP hidden rows"},
    {&StepBuffers::all_hidden, "every row's hidden state"},
};
static_assert(std::size(kRoles) == static_cast<size_t>(Buf::kCount),
              "every Buf role needs a step buffer");

// The Ops of forward.h on the GPU (the contract is in ops.h): each operation queues, on the
// step's stream and over the step buffers, the kernels this pass has always run, with the
// same arguments. kAct tensors are stored in the compute dtype (esz bytes), kF32 ones in
// float32. One CudaOps serves one State::Forward (eager, or captured into a graph); it reads
// the uploaded weights and the cache's geometry, writes the step buffers, and takes the
// step's host-side data (StepState) and input layout (StepLayout) from Step.
class CudaOps {
 public:
  using Vec = const float*;
  using Mat = DeviceMatrix;
  using Layer = DeviceLayer;
  using Product = MatProduct<Mat>;
  using Expert = ExpertProduct<Mat>;

  CudaOps(CudaForward::State& s, const StepLayout& lay, const StepState& step)
      : s_(s), weights_(s.weights), cache_(s.cache), bufs_(s.buffers), step_(step), lay_(lay) {
    // The head's rows as Step laid them out (padded in graphs, where head_row_seq is empty
    // and the rows go to GEMV as one batch).
    head_rows_.count = static_cast<size_t>(lay.rows);
    head_rows_.seq = step.head_row_seq.empty() ? nullptr : &step.head_row_seq;
  }

  // The model.
  const model::HyperParams& hparams() const { return s_.hp; }
  const ArchConfig& config() const { return s_.impl.config; }
  const Layer& layer(int l) const { return weights_.layers[l]; }
  const Mat& output() const { return weights_.output; }
  Vec output_norm() const { return weights_.output_norm; }
  Vec output_bias() const { return weights_.output_bias; }
  int tp_rank() const { return s_.impl.options.tp_rank; }
  const model::BlockShare& share(int l) const { return s_.impl.shares[l]; }
  const HeadRows& head_rows() const { return head_rows_; }
  int64_t head_chunk_rows() const { return s_.head_chunk_rows; }
  void SetHeadChunk(int64_t first, int64_t) { head_first_ = first; }
  bool all_hidden_rows() const { return step_.all_hidden; }

  // The step's buffers.
  Act Tensor(Buf role, int64_t rows, int64_t cols, Prec prec);
  Act AsF32(Act a, Buf scratch);

  // Nothing is timed on the GPU: the operations only queue kernels (and may be captured
  // into a graph), so host time says nothing about the phases. The destructor keeps the
  // pass's unused scope variables from warning.
  struct NoPhase {
    ~NoPhase() {}
  };
  NoPhase Phase(const char*) { return NoPhase(); }

  TESSERA_DEVICE_OPS

 private:
  // The dtype an Act is stored in.
  DType Dt(const Act& a) const { return a.prec == Prec::kF32 ? DType::kF32 : s_.act; }
  // Whether the routed experts of a step of `tokens` tokens run sequence by sequence (16-bit
  // activations, more than kGemvRows tokens, batch invariance: ExpertProducts), each run
  // sorting its own choices.
  bool ExpertRunsPerSequence(int64_t tokens) const {
    return s_.act != DType::kF32 && tokens > kGemvRows && s_.impl.options.batch_invariant &&
           step_.seq_of != nullptr && static_cast<int64_t>(step_.seq_of->size()) == tokens;
  }
  // An error for a call the pass should never make (a shape or layout these kernels do not
  // take), naming the operation.
  static absl::Status Unsupported(const char* op, const std::string& why) {
    return absl::InternalError(absl::StrCat("cuda executor: ", op, ": ", why));
  }
  // Contiguous rows (the element-wise kernels take one flat count).
  static absl::Status Flat(const char* op, const Act& a) {
    if (a.contiguous()) return absl::OkStatus();
    return Unsupported(op, absl::StrCat("expected contiguous rows, got ", a.cols,
                                        " values at a stride of ", a.ld));
  }
  // The step inputs Step copied to the device (StepLayout's offsets into `inputs`).
  const int64_t* Slots() const {
    return reinterpret_cast<const int64_t*>(bufs_.inputs.as<uint8_t>() + lay_.slots);
  }
  const int32_t* I32(size_t offset) const {
    return reinterpret_cast<const int32_t*>(bufs_.inputs.as<uint8_t>() + offset);
  }
  // y = W x: GEMV up to kGemvRows rows, dequantize + cuBLAS above; with batch_invariant,
  // per prefill sequence and decode rows with GEMV. `row_seq` gives each row's sequence
  // (null: the step's tokens, when the rows are those).
  absl::Status MatMul(const DeviceMatrix& w, const void* x, int64_t tokens, void* y, DType dt,
                      const std::vector<int>* row_seq);
  absl::Status TraceRouting(int layer, int64_t tokens);
  // `bytes` of device memory at `src` copied to `dst` on the host, waiting for the stream
  // (the step traces only: traced steps run eagerly, never in graphs).
  absl::Status ReadBack(const void* src, size_t bytes, void* dst) {
    TESSERA_RETURN_IF_ERROR(
        cuda::CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s_.stream),
                         "cudaMemcpyAsync (trace)"));
    return cuda::CudaStatus(cudaStreamSynchronize(s_.stream), "trace sync");
  }

  CudaForward::State& s_;  // the device context: stream, cuBLAS, dtype, options
  const DeviceWeights& weights_;
  const DeviceKvCache& cache_;
  StepBuffers& bufs_;
  const StepState& step_;
  const StepLayout& lay_;
  HeadRows head_rows_;
  // The first failure of an operation that returns no status (Tensor, AsF32): every
  // operation after it returns it before queueing anything.
  absl::Status error_;
  // The (tokens, heads) whose per-head member ids head_ids holds, so that HeadProducts
  // fills them once per step rather than once per product.
  std::pair<int64_t, int64_t> head_ids_for_{-1, -1};
  int layer_ = 0;              // the block whose routing Route last made (ExpertProducts' experts)
  int64_t head_first_ = 0;     // the head's first row in progress (SetHeadChunk)
  bool route_sorted_ = false;  // Route sorted its choices by expert (route_order/offsets)
};

Act CudaOps::Tensor(Buf role, int64_t rows, int64_t cols, Prec prec) {
  const Role& r = kRoles[static_cast<size_t>(role)];
  const DeviceBuffer& buf = bufs_.*r.buffer;
  Act a;
  a.data = buf.ptr;
  a.rows = rows;
  a.cols = cols;
  a.ld = cols;
  a.prec = prec;
  a.elem = prec == Prec::kF32 ? 4 : static_cast<int>(s_.esz);
  const size_t want = static_cast<size_t>(rows * cols) * a.elem;
  if (want > buf.bytes) {
    // EnsureBuffers sized the buffers from the same shapes; a miss is a bug, not the step's.
    if (error_.ok()) {
      error_ = Unsupported("step buffer",
                           absl::StrCat(r.what, " need ", rows, " × ", cols, " values of ", a.elem,
                                        " bytes, the buffer holds ", buf.bytes, " bytes"));
    }
    a.data = nullptr;
  }
  return a;
}

Act CudaOps::AsF32(Act a, Buf scratch) {
  if (Dt(a) == DType::kF32) return a;
  Act f = Tensor(scratch, a.rows, a.cols, Prec::kF32);
  if (!error_.ok()) return f;
  absl::Status st = Flat("AsF32", a);
  if (st.ok()) st = cuda::Convert(a.data, s_.act, f.data, DType::kF32, a.rows * a.cols, s_.stream);
  if (!st.ok()) error_ = st;
  return f;
}

// The runs of a batch-invariant step's first `tokens` rows: each prefill sequence's rows, and
// runs of consecutive decode rows (sequences of one new token); fn(begin, n, decode) for each
// in order, stopping at the first error.
template <typename Fn>
absl::Status ForEachRun(const std::vector<int>& row_seq, const std::vector<int64_t>& seq_len,
                        int64_t tokens, Fn fn) {
  auto decode = [&](int64_t i) { return seq_len[row_seq[i]] == 1; };
  for (int64_t i = 0; i < tokens;) {
    int64_t j = i + 1;
    if (decode(i)) {
      while (j < tokens && decode(j)) ++j;
    } else {
      while (j < tokens && row_seq[j] == row_seq[i]) ++j;
    }
    TESSERA_RETURN_IF_ERROR(fn(i, j - i, decode(i)));
    i = j;
  }
  return absl::OkStatus();
}

absl::Status CudaOps::MatMul(const DeviceMatrix& w, const void* xin, int64_t tokens, void* yout,
                             DType dt, const std::vector<int>* row_seq) {
  if (w.data == nullptr) return absl::InternalError("cuda executor: a weight was not uploaded");
  auto run = [&](const void* xs, int64_t n, void* ys) -> absl::Status {
    if (n <= kGemvRows) return cuda::Gemv(w, xs, dt, n, ys, s_.stream);
    return cuda::GemmDequantized(s_.cublas, w, xs, dt, n, ys, bufs_.gemm_scratch.ptr,
                                 bufs_.gemm_scratch.bytes, s_.stream);
  };
  if (row_seq == nullptr && step_.seq_of != nullptr &&
      static_cast<int64_t>(step_.seq_of->size()) == tokens) {
    row_seq = step_.seq_of;
  }
  if (tokens <= kGemvRows || !s_.impl.options.batch_invariant || row_seq == nullptr) {
    return run(xin, tokens, yout);
  }
  // Batch-invariant: each prefill sequence's rows as a product of their own, runs of decode
  // rows with GEMV (per token the same arithmetic whatever the batch).
  const size_t de = cuda::DTypeBytes(dt);
  return ForEachRun(*row_seq, step_.seq_len, tokens, [&](int64_t i, int64_t n, bool decode) {
    const void* xs = At(const_cast<void*>(xin), i * w.cols, de);
    void* ys = At(yout, i * w.rows, de);
    return decode ? cuda::Gemv(w, xs, dt, n, ys, s_.stream) : run(xs, n, ys);
  });
}

// Vocab-parallel embedding: ids outside this rank's range were sent as -1 and come out zero.
absl::Status CudaOps::Embed(Act x) {
  TESSERA_RETURN_IF_ERROR(error_);
  return cuda::GatherRows(weights_.embd, I32(lay_.ids), x.rows, Dt(x), x.data, s_.stream);
}

// GEMV up to kGemvRows rows, dequantize + cuBLAS above, per sequence with batch_invariant
// (MatMul). per_vector is not honoured: the GPU has always multiplied the router's and
// the indexer's weights like any product, GEMV or GEMM by the row count, and keeping that
// keeps its numerics.
absl::Status CudaOps::Products(std::initializer_list<Product> products) {
  TESSERA_RETURN_IF_ERROR(error_);
  for (const Product& p : products) {
    TESSERA_RETURN_IF_ERROR(Flat("Products", p.x));
    TESSERA_RETURN_IF_ERROR(Flat("Products", p.y));
    if (p.w->data == nullptr) return Unsupported("Products", "a weight was not uploaded");
    if (p.x.rows != p.y.rows || p.x.cols != p.w->cols || p.y.cols != p.w->rows ||
        Dt(p.x) != Dt(p.y)) {
      return Unsupported(
          "Products",
          absl::StrCat("x ", p.x.rows, " × ", p.x.cols, " ", cuda::DTypeName(Dt(p.x)), " and y ",
                       p.y.rows, " × ", p.y.cols, " ", cuda::DTypeName(Dt(p.y)), " do not fit a ",
                       p.w->rows, " × ", p.w->cols, " weight"));
    }
    TESSERA_RETURN_IF_ERROR(MatMul(*p.w, p.x.data, p.x.rows, p.y.data, Dt(p.y), p.row_seq));
  }
  return absl::OkStatus();
}

// One grouped GEMV over the heads: member h of the stack for every row t·H + h of x, which
// are strided views into the heads' layout.
absl::Status CudaOps::HeadProducts(const Mat& stack, int64_t heads, Act x, Act y) {
  TESSERA_RETURN_IF_ERROR(error_);
  if (heads <= 0 || x.rows % heads != 0 || x.rows != y.rows || Dt(x) != Dt(y)) {
    return Unsupported("HeadProducts", absl::StrCat(x.rows, " rows of x and ", y.rows,
                                                    " of y over ", heads, " heads"));
  }
  const int64_t tokens = x.rows / heads;
  const int H = static_cast<int>(heads);
  int32_t* ids = bufs_.head_ids.as<int32_t>();
  const bool sorted = SortPays(tokens * H, H);
  if (head_ids_for_ != std::make_pair(tokens, heads)) {
    TESSERA_RETURN_IF_ERROR(cuda::FillHeadIds(ids, tokens, H, s_.stream));
    if (sorted) {
      TESSERA_RETURN_IF_ERROR(cuda::SortByMember(ids, tokens * H, H, 0,
                                                 bufs_.head_order.as<int32_t>(),
                                                 bufs_.head_offsets.as<int32_t>(), s_.stream));
    }
    head_ids_for_ = {tokens, heads};
  }
  cuda::GroupedGemvArgs g =
      Grouped(stack, y.cols, H, ids, tokens, H, x.data, true, x.ld, y.data, y.ld);
  if (sorted) {
    g.order = bufs_.head_order.as<int32_t>();
    g.offsets = bufs_.head_offsets.as<int32_t>();
  }
  return cuda::GroupedGemv(g, Dt(y), s_.stream);
}

// One grouped product per stack over the current routing (GEMV, or tensor-core tiles for
// long 16-bit prompts): gate and up read the token's row of x, down one row per (token,
// choice).
absl::Status CudaOps::ExpertProducts(std::initializer_list<Expert> products, Act x,
                                     bool per_choice) {
  TESSERA_RETURN_IF_ERROR(error_);
  const int K = static_cast<int>(s_.hp.n_expert_used);
  // This rank's experts (all unless expert-parallel): the stacks hold [e0, e1), and the
  // other choices' rows come out zero (weighted by Combine into nothing).
  const model::BlockShare& share = s_.impl.shares[layer_];
  const int E = static_cast<int>(share.expert_end - share.expert_begin);
  const int32_t* ids = bufs_.route_ids.as<int32_t>();
  const DType dt = Dt(x);
  const size_t de = cuda::DTypeBytes(dt);
  int32_t* order = bufs_.route_order.as<int32_t>();
  int32_t* offsets = bufs_.route_offsets.as<int32_t>();
  const int64_t T = per_choice ? x.rows / K : x.rows;
  for (const Expert& e : products) {
    if (e.y.rows != T * K || x.rows != (per_choice ? T * K : T) || Dt(x) != Dt(e.y)) {
      return Unsupported("ExpertProducts", absl::StrCat(x.rows, " rows of x and ", e.y.rows,
                                                        " of y with ", K, " experts per token"));
    }
  }
  // Tokens [t0, t0 + n) of the step as one grouped product: on tensor cores (each expert's
  // weight tiles decoded once per 128 of its choices, weights rounded to 16 bits, as the
  // dense GEMM) or as GEMV (each choice's rows in float, the same bits sorted or not).
  auto product = [&](const Expert& e, int64_t t0, int64_t n, bool tiles,
                     bool sorted) -> absl::Status {
    cuda::GroupedGemvArgs g = Grouped(*e.stack, e.rows, E, ids + t0 * K, n, K,
                                      At(x.data, (per_choice ? t0 * K : t0) * x.ld, de), per_choice,
                                      x.ld, At(e.y.data, t0 * K * e.y.ld, de), e.y.ld);
    g.member0 = static_cast<int>(share.expert_begin);
    if (tiles || sorted) {
      g.order = order;
      g.offsets = offsets;
    }
    if (tiles) return cuda::GroupedGemmTiles(g, dt, s_.stream);
    return cuda::GroupedGemv(g, dt, s_.stream);
  };
  auto sort = [&](int64_t t0, int64_t n) {
    return cuda::SortByMember(ids + t0 * K, n * K, E, static_cast<int>(share.expert_begin), order,
                              offsets, s_.stream);
  };
  // Tensor cores where the dense products take the GEMM (more than kGemvRows tokens, per
  // sequence under batch invariance), with 16-bit activations.
  const bool tiles = dt != DType::kF32 && E > 0 && T > kGemvRows;
  if (!tiles || !ExpertRunsPerSequence(T)) {
    if (tiles && !route_sorted_) {
      TESSERA_RETURN_IF_ERROR(sort(0, T));
      route_sorted_ = true;
    }
    for (const Expert& e : products) {
      TESSERA_RETURN_IF_ERROR(product(e, 0, T, tiles, route_sorted_));
    }
    return absl::OkStatus();
  }
  // Batch-invariant, as MatMul: each prefill sequence's tokens as a product of their own
  // (tensor cores above kGemvRows tokens), runs of decode tokens with GEMV. Each run sorts
  // its own choices once for all the products (Route made no sort for the step).
  return ForEachRun(*step_.seq_of, step_.seq_len, T, [&](int64_t i, int64_t n, bool decode) {
    const bool run_tiles = !decode && n > kGemvRows;
    const bool run_sorted = run_tiles || SortPays(n * K, E);
    if (run_sorted) TESSERA_RETURN_IF_ERROR(sort(i, n));
    for (const Expert& e : products) {
      TESSERA_RETURN_IF_ERROR(product(e, i, n, run_tiles, run_sorted));
    }
    return absl::OkStatus();
  });
}

// Spec 5.6 on the device; the choice stays in route_ids / route_weights for ExpertProducts
// and Combine.
absl::StatusOr<int64_t> CudaOps::Route(int layer, Act logits, const Vec& bias) {
  TESSERA_RETURN_IF_ERROR(error_);
  layer_ = layer;
  if (Dt(logits) != DType::kF32) return Unsupported("Route", "router logits must be float32");
  const model::HyperParams& hp = s_.hp;
  cuda::MoeRoutingArgs r;
  r.tokens = logits.rows;
  r.experts = static_cast<int>(hp.n_expert);
  r.used = static_cast<int>(hp.n_expert_used);
  r.groups = std::max<int>(1, static_cast<int>(hp.n_expert_groups));
  r.topk_groups = std::max<int>(1, static_cast<int>(hp.n_group_used));
  r.gating = hp.gating == model::GatingFunc::kSigmoid ? cuda::MoeGating::kSigmoid
                                                      : cuda::MoeGating::kSoftmax;
  r.norm_weights = s_.impl.config.moe_always_norm || hp.expert_weights_norm;
  r.weights_scale = hp.expert_weights_scale;
  r.logits = static_cast<const float*>(logits.data);
  r.bias = bias;
  r.ids = bufs_.route_ids.as<int32_t>();
  r.weights = bufs_.route_weights.as<float>();
  TESSERA_RETURN_IF_ERROR(cuda::MoeRoute(r, s_.stream));
  // Every (token, choice) keeps its row, t·K + k (another rank's expert: a zero row).
  const int64_t rows = logits.rows * r.used;
  const model::BlockShare& share = s_.impl.shares[layer];
  const int E = static_cast<int>(share.expert_end - share.expert_begin);
  route_sorted_ = E > 0 && SortPays(rows, E) && !ExpertRunsPerSequence(logits.rows);
  if (route_sorted_) {
    TESSERA_RETURN_IF_ERROR(cuda::SortByMember(r.ids, rows, E, static_cast<int>(share.expert_begin),
                                               bufs_.route_order.as<int32_t>(),
                                               bufs_.route_offsets.as<int32_t>(), s_.stream));
  }
  if (step_.trace == nullptr) return rows;
  TESSERA_RETURN_IF_ERROR(TraceRouting(layer, logits.rows));
  return rows;
}

// The step trace's copy of the routing (never in graphs: traced steps run eagerly).
absl::Status CudaOps::TraceRouting(int layer, int64_t tokens) {
  const int K = static_cast<int>(s_.hp.n_expert_used);
  std::vector<int32_t> ids(static_cast<size_t>(tokens) * K);
  std::vector<float> wts(ids.size());
  TESSERA_RETURN_IF_ERROR(ReadBack(bufs_.route_ids.ptr, ids.size() * 4, ids.data()));
  TESSERA_RETURN_IF_ERROR(ReadBack(bufs_.route_weights.ptr, wts.size() * 4, wts.data()));
  auto& ex = step_.trace->experts[layer];
  auto& wt = step_.trace->expert_weights[layer];
  ex.assign(step_.trace_tokens, {});
  wt.assign(step_.trace_tokens, {});
  for (int64_t t = 0; t < step_.trace_tokens; ++t) {
    ex[t].assign(ids.begin() + t * K, ids.begin() + (t + 1) * K);
    wt[t].assign(wts.begin() + t * K, wts.begin() + (t + 1) * K);
  }
  return absl::OkStatus();
}

absl::Status CudaOps::Combine(Act down, Act y) {
  TESSERA_RETURN_IF_ERROR(error_);
  const int K = static_cast<int>(s_.hp.n_expert_used);
  TESSERA_RETURN_IF_ERROR(Flat("Combine", down));
  TESSERA_RETURN_IF_ERROR(Flat("Combine", y));
  if (down.rows != y.rows * K || down.cols != y.cols || Dt(down) != Dt(y)) {
    return Unsupported("Combine", absl::StrCat(down.rows, " expert rows for ", y.rows,
                                               " tokens with ", K, " experts per token"));
  }
  return cuda::MoeCombine(down.data, bufs_.route_weights.as<float>(), y.rows, K, y.cols, Dt(y),
                          y.data, s_.stream);
}

// A float32 input into a 16-bit output (the residual stream into a sublayer's input) is
// normalized in float32 through h32 and rounded once; otherwise in place or row to row in
// the tensors' dtype, strided where the rows are column ranges (MLA's latent).
absl::Status CudaOps::RmsNorm(Act in, const Vec& w, float eps, Act out) {
  TESSERA_RETURN_IF_ERROR(error_);
  if (in.rows != out.rows || in.cols != out.cols) {
    return Unsupported("RmsNorm",
                       absl::StrCat(in.rows, " × ", in.cols, " into ", out.rows, " × ", out.cols));
  }
  const int64_t rows = in.rows, n = in.cols;
  if (Dt(in) != Dt(out)) {
    if (Dt(in) != DType::kF32) {
      return Unsupported("RmsNorm", "a 16-bit input into a float32 output");
    }
    TESSERA_RETURN_IF_ERROR(Flat("RmsNorm", in));
    TESSERA_RETURN_IF_ERROR(Flat("RmsNorm", out));
    Act f = Tensor(Buf::kH32, rows, n, Prec::kF32);
    TESSERA_RETURN_IF_ERROR(error_);
    TESSERA_RETURN_IF_ERROR(
        cuda::RmsNorm(in.data, w, rows, n, eps, DType::kF32, f.data, s_.stream));
    return cuda::Convert(f.data, DType::kF32, out.data, Dt(out), rows * n, s_.stream);
  }
  if (in.contiguous() && out.contiguous()) {
    return cuda::RmsNorm(in.data, w, rows, n, eps, Dt(in), out.data, s_.stream);
  }
  return cuda::RmsNormStrided(in.data, in.ld, w, rows, n, eps, Dt(in), out.data, out.ld, s_.stream);
}

absl::Status CudaOps::LayerNorm(Act x, const Vec& w, const Vec& b, float eps) {
  TESSERA_RETURN_IF_ERROR(error_);
  TESSERA_RETURN_IF_ERROR(Flat("LayerNorm", x));
  if (Dt(x) != DType::kF32) return Unsupported("LayerNorm", "the kernel is float32 only");
  float* v = static_cast<float*>(x.data);
  return cuda::LayerNormF32(v, w, b, x.rows, x.cols, eps, v, s_.stream);
}

absl::Status CudaOps::Rope(Act v, int64_t heads, int64_t head_stride) {
  TESSERA_RETURN_IF_ERROR(error_);
  const Executor::Impl& impl = s_.impl;
  const cuda::RopeArgs rope{.tokens = v.rows,
                            .heads = static_cast<int>(heads),
                            .head_dim = static_cast<int>(head_stride),
                            .token_stride = v.ld,
                            .n_rot = impl.rope.n_rot,
                            .neox = impl.config.rope == cpu::RopeLayout::kNeox,
                            .magnitude = impl.rope.magnitude,
                            .positions = I32(lay_.positions),
                            .theta_scales = weights_.theta.as<double>()};
  return cuda::Rope(rope, Dt(v), v.data, s_.stream);
}

absl::Status CudaOps::AddBias(Act y, const Vec& bias) {
  TESSERA_RETURN_IF_ERROR(error_);
  if (bias == nullptr) return absl::OkStatus();
  TESSERA_RETURN_IF_ERROR(Flat("AddBias", y));
  return cuda::AddBias(y.data, bias, y.rows, y.cols, Dt(y), s_.stream);
}

// x += y in x's dtype; a 16-bit y into the float32 residual stream goes through h32.
absl::Status CudaOps::Add(Act x, Act y) {
  TESSERA_RETURN_IF_ERROR(error_);
  TESSERA_RETURN_IF_ERROR(Flat("Add", x));
  TESSERA_RETURN_IF_ERROR(Flat("Add", y));
  const int64_t n = x.rows * x.cols;
  if (y.rows * y.cols != n) {
    return Unsupported("Add", absl::StrCat(y.rows * y.cols, " values onto ", n));
  }
  if (Dt(x) == Dt(y)) return cuda::AddInPlace(x.data, y.data, n, Dt(x), s_.stream);
  if (Dt(x) != DType::kF32) return Unsupported("Add", "float32 values onto 16-bit ones");
  Act f = Tensor(Buf::kH32, y.rows, y.cols, Prec::kF32);
  TESSERA_RETURN_IF_ERROR(error_);
  TESSERA_RETURN_IF_ERROR(cuda::Convert(y.data, Dt(y), f.data, DType::kF32, n, s_.stream));
  return cuda::AddInPlace(x.data, f.data, n, DType::kF32, s_.stream);
}

absl::Status CudaOps::SiluMul(Act gate, Act up) {
  TESSERA_RETURN_IF_ERROR(error_);
  TESSERA_RETURN_IF_ERROR(Flat("SiluMul", gate));
  TESSERA_RETURN_IF_ERROR(Flat("SiluMul", up));
  return cuda::SiluMul(gate.data, up.data, gate.rows * gate.cols, Dt(gate), gate.data, s_.stream);
}

absl::Status CudaOps::Scale(Act x, float s) {
  TESSERA_RETURN_IF_ERROR(error_);
  TESSERA_RETURN_IF_ERROR(Flat("Scale", x));
  if (Dt(x) != DType::kF32) return Unsupported("Scale", "the kernel is float32 only");
  return cuda::Scale(static_cast<float*>(x.data), x.rows * x.cols, s, s_.stream);
}

absl::Status CudaOps::Zero(Act x) {
  TESSERA_RETURN_IF_ERROR(error_);
  const size_t e = cuda::DTypeBytes(Dt(x));
  if (x.contiguous()) {
    return cuda::CudaStatus(cudaMemsetAsync(x.data, 0, x.rows * x.cols * e, s_.stream),
                            "cudaMemsetAsync");
  }
  for (int64_t t = 0; t < x.rows; ++t) {
    TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(
        cudaMemsetAsync(static_cast<uint8_t*>(x.data) + t * x.ld * e, 0, x.cols * e, s_.stream),
        "cudaMemsetAsync"));
  }
  return absl::OkStatus();
}

absl::Status CudaOps::Copy(Act src, Act dst) {
  TESSERA_RETURN_IF_ERROR(error_);
  if (src.rows != dst.rows || src.cols != dst.cols || Dt(src) != Dt(dst)) {
    return Unsupported(
        "Copy", absl::StrCat(src.rows, " × ", src.cols, " into ", dst.rows, " × ", dst.cols));
  }
  return cuda::CopyRows(src.data, src.ld, dst.data, dst.ld, src.rows, src.cols, Dt(src), s_.stream);
}

// Through the compute dtype and back, in the tail of the head-input buffer (EnsureBuffers
// gives hr R·d·(4 + esz) bytes for this): only the head's rows are rounded this way.
absl::Status CudaOps::RoundToAct(Act x) {
  TESSERA_RETURN_IF_ERROR(error_);
  if (s_.act == DType::kF32) return absl::OkStatus();
  TESSERA_RETURN_IF_ERROR(Flat("RoundToAct", x));
  const int64_t n = x.rows * x.cols;
  if (x.data != bufs_.hr.ptr || Dt(x) != DType::kF32 ||
      static_cast<size_t>(n) * (4 + s_.esz) > bufs_.hr.bytes) {
    return Unsupported("RoundToAct", "only the head's float32 inputs (kHeadIn) are rounded");
  }
  void* rounded = At(bufs_.hr.ptr, n, 4);
  TESSERA_RETURN_IF_ERROR(cuda::Convert(x.data, DType::kF32, rounded, s_.act, n, s_.stream));
  return cuda::Convert(rounded, s_.act, x.data, DType::kF32, n, s_.stream);
}

// GQA: K then V of each KV head, each into its own cache; MLA: the latent row [c_KV |
// k_rope], one per token, into the K cache.
absl::Status CudaOps::WriteKv(int layer, const AttentionShape& shape, Act k, Act v) {
  TESSERA_RETURN_IF_ERROR(error_);
  const int block_size = cache_.block_size;
  cuda::KvWriteArgs w{.tokens = k.rows,
                      .kv_heads = static_cast<int>(shape.kv_heads),
                      .width = static_cast<int>(shape.d_k),
                      .block_size = block_size,
                      .src = k.data,
                      .src_token_stride = k.ld,
                      .cache = cache_.KBase(layer),
                      .block_stride = block_size * cache_.k_width,
                      .token_stride = cache_.k_width,
                      .head_stride = shape.latent ? cache_.k_width : shape.d_k,
                      .slot_mapping = Slots()};
  TESSERA_RETURN_IF_ERROR(cuda::WriteKvCache(w, Dt(k), s_.stream));
  if (shape.latent) return absl::OkStatus();
  w.width = static_cast<int>(shape.d_v);
  w.src = v.data;
  w.src_token_stride = v.ld;
  w.cache = cache_.VBase(layer);
  w.block_stride = block_size * cache_.v_width;
  w.token_stride = cache_.v_width;
  w.head_stride = shape.d_v;
  return cuda::WriteKvCache(w, Dt(v), s_.stream);
}

// Paged attention over the cache; MLA reads the latent as key and (its first d_v values)
// value, and with DSA only the keys SelectKeys left in `selected`.
absl::Status CudaOps::Attend(int layer, const AttentionShape& shape, Act q, Act out) {
  TESSERA_RETURN_IF_ERROR(error_);
  const int block_size = cache_.block_size;
  cuda::PagedAttentionArgs a;
  a.queries = q.rows;
  a.heads = static_cast<int>(shape.heads);
  a.kv_heads = static_cast<int>(shape.kv_heads);
  a.d_k = static_cast<int>(shape.d_k);
  a.d_v = static_cast<int>(shape.d_v);
  if (!shape.latent && shape.group > 0) {
    a.head0 = static_cast<int>(shape.head0);
    a.group = static_cast<int>(shape.group);
  }
  a.block_size = block_size;
  a.scale = s_.impl.attn_scale;
  a.q = q.data;
  a.q_token_stride = q.ld;
  a.out = out.data;
  a.out_token_stride = out.ld;
  if (shape.latent) {
    a.k = {cache_.KBase(layer), block_size * cache_.k_width, cache_.k_width, 0};
    a.v = a.k;
  } else {
    a.k = {cache_.KBase(layer), block_size * cache_.k_width, cache_.k_width, shape.d_k};
    a.v = {cache_.VBase(layer), block_size * cache_.v_width, cache_.v_width, shape.d_v};
  }
  a.block_table = I32(lay_.table);
  a.max_blocks = lay_.max_blocks;
  a.query_seq = I32(lay_.query_seq);
  a.query_kv_len = I32(lay_.kv_len);
  if (shape.latent && shape.sparse) {
    a.selected = bufs_.selected.as<int32_t>();
    a.selected_per_query = s_.selected_k;
  }
  auto part = [&](int64_t from, int64_t n) { return cuda::QueryRange(a, from, n, Dt(q)); };
  // The kernels whose key tile fits shared memory for this shape (head dims above 384 with
  // separate values do not): the others run per query.
  int per_lane = 0;
  const bool tiles_fit =
      cuda::TiledAttentionLaunch(cuda::ShapeOf(a), cuda::ValuesInKeys(a), &per_lane).ok();
  const bool decode_fits =
      cuda::DecodeAttentionLaunch(cuda::ShapeOf(a), cuda::ValuesInKeys(a), &per_lane).ok();
  // Prompts in f16/bf16 with head dims of 16·n whose tile fits the device's (opt-in) shared
  // memory: on tensor cores, all the query heads of a KV head in one tile (its keys, MLA's
  // latent, read once for them all).
  const bool mma_fits = cuda::MmaAttentionLaunch(cuda::ShapeOf(a), cuda::ValuesInKeys(a),
                                                 cuda::DTypeBytes(Dt(q)), s_.limits)
                            .ok();
  // The queries of decode steps and short chunks: by KV head with the keys split.
  auto short_queries = [&](const cuda::PagedAttentionArgs& p) {
    if (!decode_fits) return cuda::PagedAttention(p, Dt(q), s_.stream);
    return cuda::PagedAttentionDecode(
        p, bufs_.attn_partials.as<float>(),
        static_cast<int64_t>(bufs_.attn_partials.bytes / sizeof(float)), Dt(q), s_.stream);
  };
  // Long prompts tiled, one launch each; the rest in runs between them. DSA: only where no
  // query sees more keys than the top-k (then every visible key is selected).
  int64_t done = 0;
  const int64_t seqs = static_cast<int64_t>(step_.seq_kv_end.size());
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t begin = step_.seq_begin[s], n = step_.seq_len[s];
    if (!tiles_fit || n <= kTiledAttentionMin ||
        (a.selected != nullptr && step_.seq_kv_end[s] > s_.selected_k)) {
      continue;
    }
    if (begin > done) TESSERA_RETURN_IF_ERROR(short_queries(part(done, begin - done)));
    cuda::PagedAttentionArgs tiled = part(begin, n);
    tiled.selected = nullptr;
    tiled.selected_per_query = 0;
    TESSERA_RETURN_IF_ERROR(mma_fits ? cuda::PagedAttentionMma(tiled, Dt(q), s_.stream)
                                     : cuda::PagedAttentionTiled(tiled, Dt(q), s_.stream));
    done = begin + n;
  }
  if (done == 0) return short_queries(a);
  if (done < a.queries) return short_queries(part(done, a.queries - done));
  return absl::OkStatus();
}

// The DSA index keys (float32, one head of index_dim per token) into their own cache.
absl::Status CudaOps::WriteIndexKeys(int layer, Act k) {
  TESSERA_RETURN_IF_ERROR(error_);
  const int block_size = cache_.block_size;
  const int64_t index_dim = cache_.index_dim;
  const cuda::KvWriteArgs w{.tokens = k.rows,
                            .kv_heads = 1,
                            .width = static_cast<int>(k.cols),
                            .block_size = block_size,
                            .src = k.data,
                            .src_token_stride = k.ld,
                            .cache = cache_.IndexKeys(layer),
                            .block_stride = block_size * index_dim,
                            .token_stride = index_dim,
                            .head_stride = index_dim,
                            .slot_mapping = Slots()};
  return cuda::WriteKvCache(w, Dt(k), s_.stream);
}

// The indexer's scores against every visible index key and each query's top-k, into
// `selected`. The scores (query rows × keys, float32) are computed at most
// indexer_score_bytes at a time: long contexts take query rows in pieces.
absl::Status CudaOps::SelectKeys(int layer, Act q, Act w) {
  TESSERA_RETURN_IF_ERROR(error_);
  if (Dt(q) != DType::kF32 || Dt(w) != DType::kF32) {
    return Unsupported("SelectKeys", "index queries and weights must be float32");
  }
  const int block_size = cache_.block_size, k = s_.selected_k;
  const int64_t T = q.rows, index_dim = cache_.index_dim;
  const int64_t n_keys = static_cast<int64_t>(lay_.max_blocks) * block_size;
  const int64_t rows = IndexerRowsPerPass(T, n_keys, s_.indexer_score_bytes);
  cuda::IndexerScoreArgs a;
  a.heads = static_cast<int>(hparams().indexer_heads);
  a.dim = static_cast<int>(hparams().indexer_head_dim);
  a.n_keys = n_keys;
  a.block_size = block_size;
  a.keys = {cache_.IndexKeys(layer), block_size * index_dim, index_dim, index_dim};
  a.block_table = I32(lay_.table);
  a.max_blocks = lay_.max_blocks;
  a.scores = bufs_.scores.as<float>();
  for (int64_t q0 = 0; q0 < T; q0 += rows) {
    a.queries = std::min(rows, T - q0);
    a.q = static_cast<const float*>(q.data) + q0 * q.ld;
    a.weights = static_cast<const float*>(w.data) + q0 * w.ld;
    a.query_seq = I32(lay_.query_seq) + q0;
    a.query_kv_len = I32(lay_.kv_len) + q0;
    TESSERA_RETURN_IF_ERROR(cuda::IndexerScores(a, s_.stream));
    TESSERA_RETURN_IF_ERROR(cuda::TopK(a.scores, a.queries, n_keys, k, a.query_kv_len,
                                       bufs_.selected.as<int32_t>() + q0 * k, s_.stream));
  }
  return absl::OkStatus();
}

// The step trace's copy of each real token's selected keys (never in graphs: traced steps
// run eagerly).
absl::Status CudaOps::TraceSelection(int layer) {
  TESSERA_RETURN_IF_ERROR(error_);
  if (step_.trace == nullptr) return absl::OkStatus();
  const int k = s_.selected_k;
  std::vector<int32_t> host(static_cast<size_t>(lay_.tokens) * k);
  TESSERA_RETURN_IF_ERROR(ReadBack(bufs_.selected.ptr, host.size() * 4, host.data()));
  auto& keys = step_.trace->dsa_keys[layer];
  keys.assign(step_.trace_tokens, {});
  for (int64_t t = 0; t < step_.trace_tokens; ++t) {
    for (int j = 0; j < k; ++j) {
      if (host[t * k + j] >= 0) keys[t].push_back(host[t * k + j]);
    }
  }
  return absl::OkStatus();
}

absl::Status CudaOps::GatherHeadRows(Act x, Act hr) {
  TESSERA_RETURN_IF_ERROR(error_);
  TESSERA_RETURN_IF_ERROR(Flat("GatherHeadRows", x));
  TESSERA_RETURN_IF_ERROR(Flat("GatherHeadRows", hr));
  if (x.cols != hr.cols || Dt(x) != Dt(hr)) {
    return Unsupported("GatherHeadRows", "the head's rows must match the stream's");
  }
  return cuda::GatherRowsByIndex(x.data, I32(lay_.row_index) + head_first_, hr.rows, hr.cols, Dt(x),
                                 hr.data, s_.stream);
}

// The vocab-parallel head gathered on the device (NCCL): every rank's columns padded to the
// widest rank's, into `gathered` for Step. Without tensor parallelism there is nothing to
// gather, and a host communicator gathers in Step after the copy back.
absl::Status CudaOps::GatherVocab(Act logits) {
  TESSERA_RETURN_IF_ERROR(error_);
  const ExecutorOptions& opt = s_.impl.options;
  // A head in chunks: each chunk's rows go to the host before the next overwrites them.
  const int64_t total = static_cast<int64_t>(head_rows_.count);
  const bool chunked = total > s_.head_chunk_rows;
  if (opt.tp_size == 1 || !opt.comm->on_device()) {
    if (!chunked) return absl::OkStatus();
    return s_.CopyLogits(head_first_, logits.rows, logits.rows, total);
  }
  TESSERA_RETURN_IF_ERROR(Flat("GatherVocab", logits));
  if (Dt(logits) != DType::kF32) return Unsupported("GatherVocab", "logits must be float32");
  const int tp = opt.tp_size;
  const int64_t R = logits.rows, Vl = logits.cols;
  const int64_t width = VocabWidth(s_.hp.n_vocab, tp);
  float* mine = bufs_.gathered.as<float>() + static_cast<int64_t>(tp) * R * width;
  TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(
      cudaMemsetAsync(mine, 0, R * width * sizeof(float), s_.stream), "cudaMemsetAsync"));
  TESSERA_RETURN_IF_ERROR(
      cuda::CopyRows(logits.data, Vl, mine, width, R, Vl, DType::kF32, s_.stream));
  TESSERA_RETURN_IF_ERROR(opt.comm->AllGatherOnStream(mine, static_cast<size_t>(R * width),
                                                      bufs_.gathered.as<float>(), s_.stream));
  if (!chunked) return absl::OkStatus();
  return s_.CopyLogits(head_first_, R, R, total);
}

// The MTP step's hidden rows from the host (MTP steps run eagerly, never in graphs).
absl::Status CudaOps::InputHidden(Act g) {
  TESSERA_RETURN_IF_ERROR(error_);
  TESSERA_RETURN_IF_ERROR(Flat("InputHidden", g));
  const size_t bytes = static_cast<size_t>(g.rows * g.cols) * sizeof(float);
  if (Dt(g) != DType::kF32 || step_.mtp_hidden == nullptr ||
      step_.mtp_hidden->size() * sizeof(float) != bytes) {
    return Unsupported("InputHidden", "the step's hidden rows must fill a float32 tensor");
  }
  return cuda::CudaStatus(
      cudaMemcpyAsync(g.data, step_.mtp_hidden->data(), bytes, cudaMemcpyHostToDevice, s_.stream),
      "cudaMemcpyAsync (MTP hidden)");
}

// The head's normalized rows back to the host where the step asked for them (such steps
// run eagerly, never in graphs).
absl::Status CudaOps::TakeHidden(Act hr) {
  TESSERA_RETURN_IF_ERROR(error_);
  if (step_.hidden_out == nullptr) return absl::OkStatus();
  TESSERA_RETURN_IF_ERROR(Flat("TakeHidden", hr));
  if (Dt(hr) != DType::kF32) return Unsupported("TakeHidden", "head rows must be float32");
  // A chunk of the head's rows lands at its rows (every row at once: from the first).
  const size_t at = static_cast<size_t>(head_first_ * hr.cols);
  const size_t n = static_cast<size_t>(hr.rows * hr.cols);
  if (step_.hidden_out->size() < at + n) step_.hidden_out->resize(at + n);
  return ReadBack(hr.data, n * sizeof(float), step_.hidden_out->data() + at);
}

absl::Status CudaOps::AllReduce(Act x) {
  TESSERA_RETURN_IF_ERROR(error_);
  TESSERA_RETURN_IF_ERROR(Flat("AllReduce", x));
  return s_.AllReduce(x.data, x.rows * x.cols, Dt(x));
}

}  // namespace

// --- the step ------------------------------------------------------------------------------

// The step buffers sized for the plan and the step's inputs copied to the device; pad
// tokens (graphs) have no slot, no visible key, no vocabulary row.
absl::Status CudaForward::State::WriteInputs(const Batch& b, const StepPlan& plan) {
  const StepLayout& lay = plan.lay;
  // Growing moves buffers that captured graphs point to (a failed growth may have freed some).
  bool grew = false;
  absl::Status sized = EnsureBuffers(lay.tokens, lay.rows, lay.max_blocks, &grew);
  if (sized.ok()) sized = buffers.inputs.Ensure(lay.bytes, "step inputs", &grew);
  if (grew || !sized.ok()) DropGraphs();
  if (!sized.ok()) return sized;
  TESSERA_RETURN_IF_ERROR(buffers.EnsureHostInputs(lay.bytes));
  const int64_t T = plan.tokens, R = static_cast<int64_t>(plan.rows.size());
  uint8_t* hin = static_cast<uint8_t*>(buffers.host_inputs);
  auto* slots = reinterpret_cast<int64_t*>(hin + lay.slots);
  auto* ids = reinterpret_cast<int32_t*>(hin + lay.ids);
  auto* pos = reinterpret_cast<int32_t*>(hin + lay.positions);
  auto* qseq = reinterpret_cast<int32_t*>(hin + lay.query_seq);
  auto* kvlen = reinterpret_cast<int32_t*>(hin + lay.kv_len);
  auto* rix = reinterpret_cast<int32_t*>(hin + lay.row_index);
  auto* table = reinterpret_cast<int32_t*>(hin + lay.table);
  const int64_t vb = impl.weights.vocab_begin, ve = impl.weights.vocab_end;
  for (int64_t t = 0; t < lay.tokens; ++t) {
    const bool real = t < T;
    slots[t] = real ? b.slot[t] : -1;
    ids[t] = real && b.tok[t] >= vb && b.tok[t] < ve ? static_cast<int32_t>(b.tok[t] - vb) : -1;
    pos[t] = real ? static_cast<int32_t>(b.pos[t]) : 0;
    qseq[t] = real ? b.seq_of[t] : 0;
    kvlen[t] = real ? static_cast<int32_t>(b.pos[t] + 1) : 0;
  }
  for (int64_t r = 0; r < lay.rows; ++r) rix[r] = r < R ? plan.rows[r] : 0;
  std::fill(table, table + lay.seqs * lay.max_blocks, 0);
  for (size_t q = 0; q < b.seqs.size(); ++q) {
    const auto& bt = b.seqs[q].block_table;
    std::copy(bt.begin(), bt.end(), table + q * lay.max_blocks);
  }
  return cuda::CudaStatus(
      cudaMemcpyAsync(buffers.inputs.ptr, hin, lay.bytes, cudaMemcpyHostToDevice, stream),
      "cudaMemcpyAsync (step inputs)");
}

// The pass: a decode-only step replays the graph of its shape (captured on first use), any
// other step, or a shape whose capture failed, runs eagerly.
absl::Status CudaForward::State::Run(const StepPlan& plan, const StepState& step) {
  const StepLayout& lay = plan.lay;
  if (!plan.graph) return Forward(lay, step);
  const std::pair<int64_t, int> key{lay.tokens, lay.max_blocks};
  auto it = graphs.find(key);
  if (it == graphs.end() && !graph_failures.count(key)) it = Capture(lay, step);
  if (it == graphs.end()) return Forward(lay, step);
  TESSERA_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaGraphLaunch(it->second.exec, stream), "cudaGraphLaunch"));
  SetQueuedAllReduces(QueuedAllReduces() + it->second.allreduces);
  return absl::OkStatus();
}

// Captures the pass for `lay`'s shape into a graph; on failure, records the shape to run
// eagerly from now on and returns graphs.end() (the error is not the step's).
CudaForward::State::GraphMap::iterator CudaForward::State::Capture(const StepLayout& lay,
                                                                   const StepState& step) {
  const std::pair<int64_t, int> key{lay.tokens, lay.max_blocks};
  cudaGraph_t g = nullptr;
  const size_t allreduces_before = QueuedAllReduces();
  absl::Status captured = cuda::CudaStatus(
      cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
  if (captured.ok()) {
    absl::Status fwd = Forward(lay, step);
    captured = cuda::CudaStatus(cudaStreamEndCapture(stream, &g), "end capture");
    if (!fwd.ok()) captured = fwd;
  }
  // The captured all-reduces run (and count) when the graph is launched.
  const size_t allreduces = QueuedAllReduces() - allreduces_before;
  SetQueuedAllReduces(allreduces_before);
  cudaGraphExec_t exec = nullptr;
  if (captured.ok()) {
    captured = cuda::CudaStatus(cudaGraphInstantiate(&exec, g, 0), "graph instantiate");
  }
  if (g != nullptr) cudaGraphDestroy(g);
  if (captured.ok()) return graphs.emplace(key, CapturedGraph{exec, allreduces}).first;
  cudaGetLastError();
  graph_failures.insert(key);
  return graphs.end();
}

// forward.h's pass over CudaOps, on the stream (or into a graph being captured).
absl::Status CudaForward::State::Forward(const StepLayout& lay, const StepState& step) {
  if (impl.config.dsa) {
    // No selection yet: nothing attended until a full indexer layer chose (as on the CPU).
    TESSERA_RETURN_IF_ERROR(
        cuda::CudaStatus(cudaMemsetAsync(buffers.selected.ptr, 0xff,
                                         static_cast<size_t>(lay.tokens) * selected_k * 4, stream),
                         "cudaMemsetAsync"));
  }
  CudaOps ops(*this, lay, step);
  ForwardPass<CudaOps> pass(ops);
  return step.mtp ? pass.RunMtp(lay.tokens) : pass.Run(lay.tokens);
}

absl::Status CudaForward::State::SampleOnDevice(const Batch& b, const StepPlan& plan,
                                                std::vector<SampledToken>& sampled,
                                                std::vector<char>& rows) {
  const ExecutorOptions& opt = impl.options;
  const int64_t V = hp.n_vocab, R = static_cast<int64_t>(plan.rows.size());
  rows.assign(R, 0);
  std::vector<cuda::GpuSamplingParams>& params = buffers.host_sample_params;
  params.assign(R, cuda::GpuSamplingParams{.temperature = 0.0f});  // others: greedy, unread
  bool any = false;
  for (int64_t r = 0; r < R; ++r) {
    const SequenceInput& in = b.seqs[plan.row_seq[r]];
    if (!in.device_sample.has_value() || in.all_logits) continue;
    const DeviceSampling& d = *in.device_sample;
    params[r] = {.temperature = d.temperature,
                 .top_k = d.top_k,
                 .top_p = d.top_p,
                 .min_p = d.min_p,
                 .uniform = d.uniform};
    rows[r] = 1;
    any = true;
  }
  // A head in chunks (an all-logits step beyond the planned rows) keeps only its last chunk
  // on the device: such steps sample on the host.
  if (!any || plan.lay.rows > head_chunk_rows) {
    rows.assign(R, 0);
    return absl::OkStatus();
  }
  // The rows as whole vocabulary rows on the device: the head's output at TP 1; with TP, the
  // gathered columns ([tp][rows][width], rank p's [V p / tp, V (p + 1) / tp)) put together.
  const float* logits = buffers.logits32.as<float>();
  if (opt.tp_size > 1) {
    const int tp = opt.tp_size;
    const int64_t width = VocabWidth(V, tp), Rl = plan.lay.rows;
    TESSERA_RETURN_IF_ERROR(
        buffers.sample_logits.Ensure(static_cast<size_t>(R * V) * 4, "logits to sample", nullptr));
    for (int p = 0; p < tp; ++p) {
      const int64_t begin = V * p / tp, n = V * (p + 1) / tp - begin;
      if (n <= 0) continue;
      TESSERA_RETURN_IF_ERROR(cuda::CopyRows(At(buffers.gathered.ptr, p * Rl * width, 4), width,
                                             At(buffers.sample_logits.ptr, begin, 4), V, R, n,
                                             DType::kF32, stream));
    }
    logits = buffers.sample_logits.as<float>();
  }
  const size_t param_bytes = params.size() * sizeof(cuda::GpuSamplingParams);
  TESSERA_RETURN_IF_ERROR(
      buffers.sample_params.Ensure(param_bytes, "sampling parameters", nullptr));
  TESSERA_RETURN_IF_ERROR(
      buffers.sample_out.Ensure(static_cast<size_t>(R) * 8, "sampled tokens", nullptr));
  TESSERA_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaMemcpyAsync(buffers.sample_params.ptr, params.data(), param_bytes,
                                       cudaMemcpyHostToDevice, stream),
                       "cudaMemcpyAsync (sampling parameters)"));
  auto* tokens = buffers.sample_out.as<int32_t>();
  auto* logprobs = reinterpret_cast<float*>(tokens + R);
  TESSERA_RETURN_IF_ERROR(cuda::Sample(
      logits, R, V, buffers.sample_params.as<cuda::GpuSamplingParams>(), tokens, stream));
  TESSERA_RETURN_IF_ERROR(cuda::ChosenLogprobs(logits, R, V, tokens, logprobs, stream));
  std::vector<uint8_t>& out = buffers.host_sample_out;
  out.resize(static_cast<size_t>(R) * 8);
  TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(
      cudaMemcpyAsync(out.data(), tokens, out.size(), cudaMemcpyDeviceToHost, stream),
      "cudaMemcpyAsync (sampled tokens)"));
  TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamSynchronize(stream), "sampling sync"));
  for (int64_t r = 0; r < R; ++r) {
    if (!rows[r]) continue;
    SampledToken& t = sampled[plan.row_seq[r]];
    std::memcpy(&t.token, out.data() + r * 4, 4);
    std::memcpy(&t.logprob, out.data() + (R + r) * 4, 4);
  }
  return absl::OkStatus();
}

absl::Status CudaForward::State::CopyLogits(int64_t first, int64_t n, int64_t gathered_rows,
                                            int64_t total) {
  const ExecutorOptions& opt = impl.options;
  const int64_t V = hp.n_vocab, Vl = weights.vocab_local;
  std::vector<float>& out = buffers.host_logits;
  if (first == 0) out.resize(static_cast<size_t>(total * V));
  if (opt.tp_size == 1) {
    TESSERA_RETURN_IF_ERROR(
        cuda::CudaStatus(cudaMemcpyAsync(out.data() + first * V, buffers.logits32.ptr,
                                         n * V * sizeof(float), cudaMemcpyDeviceToHost, stream),
                         "cudaMemcpyAsync (logits)"));
    return cuda::CudaStatus(cudaStreamSynchronize(stream), "step sync");
  }
  const int tp = opt.tp_size;
  const int64_t width = VocabWidth(V, tp), Rl = gathered_rows;
  std::vector<float> parts(static_cast<size_t>(tp) * Rl * width);
  if (opt.comm->on_device()) {
    TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(
        cudaMemcpyAsync(parts.data(), buffers.gathered.ptr, parts.size() * sizeof(float),
                        cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync (logits)"));
    TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamSynchronize(stream), "step sync"));
  } else {
    std::vector<float> local(Rl * Vl), mine(Rl * width, 0.0f);
    TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(
        cudaMemcpyAsync(local.data(), buffers.logits32.ptr, local.size() * sizeof(float),
                        cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync (logits)"));
    TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamSynchronize(stream), "step sync"));
    for (int64_t r = 0; r < Rl; ++r) std::copy_n(&local[r * Vl], Vl, &mine[r * width]);
    TESSERA_RETURN_IF_ERROR(opt.comm->AllGather(mine.data(), mine.size(), parts.data()));
  }
  std::vector<float> rows;
  UnpadVocab(parts, tp, Rl, n, V, rows);
  std::copy(rows.begin(), rows.end(), out.begin() + first * V);
  return absl::OkStatus();
}

// Logits back to the host: [R][V] whole rows (the vocab-parallel head's columns gathered),
// split by sequence as Executor::Step returns them; none when every row was sampled on the
// device (`sampled_rows`), whose sequences get empty vectors.
absl::StatusOr<std::vector<std::vector<float>>> CudaForward::State::Logits(
    const Batch& b, const StepPlan& plan, const std::vector<char>& sampled_rows) {
  const int64_t V = hp.n_vocab;
  const int64_t R = static_cast<int64_t>(plan.rows.size());
  const bool any_sampled =
      std::find(sampled_rows.begin(), sampled_rows.end(), 1) != sampled_rows.end();
  if (any_sampled && std::count(sampled_rows.begin(), sampled_rows.end(), 1) == R) {
    return std::vector<std::vector<float>>(b.seqs.size());
  }
  // A head in chunks copied each chunk as it went (CudaOps::GatherVocab).
  if (plan.lay.rows <= head_chunk_rows) {
    TESSERA_RETURN_IF_ERROR(CopyLogits(0, R, plan.lay.rows, R));
  }
  const std::vector<float>& out = buffers.host_logits;
  std::vector<std::vector<float>> by_seq = LogitsBySequence(b.seqs, out, V);
  for (int64_t r = 0; r < R && any_sampled; ++r) {
    if (sampled_rows[r]) by_seq[plan.row_seq[r]].clear();
  }
  return by_seq;
}

// --- the public side ---------------------------------------------------------------------

CudaForward::CudaForward(std::unique_ptr<State> state) : state_(std::move(state)) {}
CudaForward::~CudaForward() = default;

std::string CudaForward::device_name() const { return state_->name; }

absl::StatusOr<std::unique_ptr<CudaForward>> CudaForward::Create(Executor::Impl& impl,
                                                                 int* n_blocks) {
  const ExecutorOptions& opt = impl.options;
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA device is visible (", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices",
        "): run on CPU, or check the driver and CUDA_VISIBLE_DEVICES"));
  }
  if (opt.gpu < 0 || opt.gpu >= count) {
    return absl::InvalidArgumentError(absl::StrCat("GPU ", opt.gpu, " does not exist: ", count,
                                                   " CUDA device(s) visible (ordinals 0..",
                                                   count - 1, ")"));
  }
  auto state = std::make_unique<State>(impl);
  State& s = *state;
  s.device = opt.gpu;
  TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(cudaSetDevice(s.device), "cudaSetDevice"));
  cudaDeviceProp prop{};
  TESSERA_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaGetDeviceProperties(&prop, s.device), "cudaGetDeviceProperties"));
  s.name = absl::StrCat("cuda:", s.device, " (", prop.name, ")");
  s.limits = cuda::CurrentDeviceLimits();
  if (opt.exact || opt.dtype == ComputeDtype::kFloat32) {
    s.act = DType::kF32;
  } else if (opt.dtype == ComputeDtype::kFloat16) {
    s.act = DType::kF16;
  } else {
    s.act = DType::kBF16;
  }
  s.esz = cuda::DTypeBytes(s.act);
  s.graphs_enabled =
      opt.cuda_graphs && (opt.tp_size == 1 || (opt.comm != nullptr && opt.comm->on_device()));
  absl::StatusOr<cuda::DeviceMemoryInfo> mem = cuda::QueryDeviceMemory(s.device);
  if (!mem.ok()) return mem.status();
  TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(
      cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  if (cublasStatus_t st = cublasCreate(&s.cublas); st != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("cuda: cublasCreate failed: ", cublasGetStatusString(st)));
  }
  cublasSetStream(s.cublas, s.stream);
  s.indexer_score_bytes = IndexerScoreBytesFromEnv();
  s.head_chunk_rows = HeadChunkRowsFromEnv();
  if (impl.config.dsa)
    s.selected_k = static_cast<int>(std::max<uint32_t>(1, impl.hp.indexer_top_k));
  TESSERA_RETURN_IF_ERROR(s.weights.Upload(impl, s.stream));
  const int64_t plan_tokens = opt.max_step_tokens > 0 ? opt.max_step_tokens : 2048;
  s.cache.block_size = std::max(1, opt.kv_block_size);
  // Buffers for a full step at a context of 4096 tokens (DSA scores grow with the context).
  TESSERA_RETURN_IF_ERROR(s.EnsureBuffers(plan_tokens, std::min<int64_t>(plan_tokens, 256),
                                          (4096 + s.cache.block_size - 1) / s.cache.block_size,
                                          nullptr));
  TESSERA_RETURN_IF_ERROR(s.PlanCache(mem->free_bytes, mem->total_bytes, n_blocks));
  TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamSynchronize(s.stream), "load sync"));
  return std::unique_ptr<CudaForward>(new CudaForward(std::move(state)));
}

absl::Status CudaForward::BroadcastHost(void* data, size_t bytes, comm::Communicator* comm) {
  State& s = *state_;
  TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(cudaSetDevice(s.device), "cudaSetDevice"));
  bool grew = false;
  TESSERA_RETURN_IF_ERROR(s.broadcast.Ensure(bytes, "a broadcast's staging", &grew));
  TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(
      cudaMemcpy(s.broadcast.ptr, data, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (broadcast)"));
  TESSERA_RETURN_IF_ERROR(comm->Broadcast(s.broadcast.ptr, bytes, 0));
  return cuda::CudaStatus(cudaMemcpy(data, s.broadcast.ptr, bytes, cudaMemcpyDeviceToHost),
                          "cudaMemcpy (broadcast)");
}

absl::StatusOr<std::vector<std::vector<float>>> CudaForward::Step(
    const Batch& b, std::vector<SampledToken>* sampled) {
  State& s = *state_;
  TESSERA_RETURN_IF_ERROR(cuda::CudaStatus(cudaSetDevice(s.device), "cudaSetDevice"));
  if (b.seqs.empty()) return std::vector<std::vector<float>>();
  const StepPlan plan = PlanStep(b, s.graphs_enabled, s.head_chunk_rows);
  TESSERA_RETURN_IF_ERROR(s.WriteInputs(b, plan));
  const StepState step = MakeStepState(b, plan);
  // On every way out, including errors half-way: nothing of this step may still be queued
  // when the next one rewrites the pinned inputs.
  struct Drain {
    cudaStream_t stream;
    ~Drain() {
      cudaStreamSynchronize(stream);
      cudaGetLastError();
    }
  } drain{s.stream};
  TESSERA_RETURN_IF_ERROR(s.Run(plan, step));
  std::vector<char> sampled_rows;
  if (sampled != nullptr)
    TESSERA_RETURN_IF_ERROR(s.SampleOnDevice(b, plan, *sampled, sampled_rows));
  return s.Logits(b, plan, sampled_rows);
}

}  // namespace tessera::executor
