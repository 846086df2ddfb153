#include "worker/executor/executor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>

#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/model/arch.h"
#include "common/model/fixups.h"
#include "common/model/shard_plan.h"
#include "common/model/tensor_map.h"
#include "common/quant/dequantize.h"
#include "common/util/half.h"
#include "common/util/status_macros.h"
#include "common/util/strings.h"
#include "worker/executor/cpu_ops.h"
#include "worker/executor/cuda_forward.h"
#include "worker/executor/executor_impl.h"
#include "worker/executor/forward.h"

namespace tessera::executor {
namespace {

// Where each tensor of a block goes (spec tables 6-12): the member of `L` that
// ForEachBlockWeight names `name` (one of the two is set), or neither.
void FindBlockWeight(LayerWeights& L, std::string_view name, std::vector<float>** vec,
                     QuantMatrix** mat) {
  name = BlockWeightName(name);
  ForEachBlockWeight(
      [&](std::string_view n, std::vector<float>& v) {
        if (n == name) *vec = &v;
      },
      [&](std::string_view n, QuantMatrix& m) {
        if (n == name) *mat = &m;
      },
      L);
}

}  // namespace

namespace {

// One tensor as this rank holds it: its bytes (in place in the mapping, or gathered from
// strided file ranges) and its dims after the split.
struct ShardView {
  absl::Span<const uint8_t> bytes;
  std::vector<int64_t> dims;
  int64_t begin = 0, end = 0;  // along the split dim
  int64_t rows() const {
    int64_t r = 1;
    for (size_t i = 1; i < dims.size(); ++i) r *= dims[i];
    return r;
  }
  int64_t elements() const { return rows() * dims[0]; }
};

// Reads `length` bytes at `offset` of `path` with pread (not through the mapping, so that
// a strided shard costs only its own bytes, not every page it crosses).
absl::Status ReadRange(int fd, const std::string& path, uint64_t offset, uint64_t length,
                       uint8_t* out) {
  while (length > 0) {
    ssize_t n = ::pread(fd, out, length, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::DataLossError(
          absl::StrCat(path, ": reading ", length, " bytes at offset ", offset,
                       " failed: ", n < 0 ? std::strerror(errno) : "end of file"));
    }
    out += n;
    offset += static_cast<uint64_t>(n);
    length -= static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

// Faults in the pages of an in-place view, so that loading reads the weights (and
// reports true progress) rather than the first step, and the rank's resident mapping is
// what its shard plan names.
void Prefault(absl::Span<const uint8_t> bytes) {
  if (bytes.empty()) return;
  const uintptr_t page = 4096;
  uintptr_t p = reinterpret_cast<uintptr_t>(bytes.data()) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(bytes.data() + bytes.size());
  madvise(reinterpret_cast<void*>(p), end - p, MADV_WILLNEED);
  uint8_t acc = 0;
  for (; p < end; p += page) acc ^= *reinterpret_cast<const volatile uint8_t*>(p);
  asm volatile("" : : "r"(acc));
}

// Reads this rank's view of each tensor: in place in the mapping when its shard is one
// contiguous range, else gathered from the file's strided ranges with pread into
// `owned_bytes` (a strided shard then costs only its own bytes, not every page it crosses).
class ShardReader {
 public:
  ShardReader(const gguf::GgufModel& file, const model::TensorMap& map, const model::RankPlan& mine,
              int tp, bool prefault, std::deque<std::vector<uint8_t>>& owned_bytes)
      : file_(file),
        map_(map),
        shard_of_(map.tensors.size(), nullptr),
        tp_(tp),
        prefault_(prefault),
        owned_bytes_(owned_bytes),
        fds_(file.part_count(), -1) {
    for (const model::TensorShard& sh : mine.shards) shard_of_[sh.mapping] = &sh;
  }
  ~ShardReader() {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  absl::StatusOr<ShardView> View(const model::TensorMapping& m) {
    const gguf::TensorInfo& t = *m.info;
    const model::TensorShard* sh = shard_of_[&m - map_.tensors.data()];
    ShardView v;
    v.dims = t.dims;
    absl::Span<const uint8_t> whole = file_.TensorData(t);
    if (sh == nullptr) return absl::InternalError(absl::StrCat(m.name, " has no shard"));
    done_ += sh->read_bytes;
    const int dim = sh->dim;
    v.begin = sh->begin;
    v.end = sh->end;
    if (dim < 0 || tp_ == 1) {
      v.bytes = whole;
      if (prefault_) Prefault(v.bytes);
      return v;
    }
    v.dims[dim] = sh->extent;
    if (sh->ranges.empty()) return v;  // nothing of it on this rank
    if (sh->ranges.size() == 1 && sh->ranges[0].count == 1) {
      v.bytes = whole.subspan(sh->ranges[0].offset - t.file_offset, sh->ranges[0].length);
      if (prefault_) Prefault(v.bytes);
      return v;
    }
    std::vector<uint8_t>& buf = owned_bytes_.emplace_back(sh->read_bytes);
    int& fd = fds_[t.part];
    const std::string& path = file_.part(t.part).path();
    if (fd < 0) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
    }
    uint8_t* out = buf.data();
    for (const model::ByteRange& r : sh->ranges) {
      for (uint64_t i = 0; i < r.count; ++i) {
        TESSERA_RETURN_IF_ERROR(ReadRange(fd, path, r.offset + i * r.stride, r.length, out));
        out += r.length;
      }
    }
    v.bytes = absl::MakeConstSpan(buf);
    return v;
  }
  // Bytes of the rank's plan read so far.
  uint64_t done() const { return done_; }

 private:
  const gguf::GgufModel& file_;
  const model::TensorMap& map_;
  std::vector<const model::TensorShard*> shard_of_;
  const int tp_;
  const bool prefault_;
  std::deque<std::vector<uint8_t>>& owned_bytes_;
  std::vector<int> fds_;
  uint64_t done_ = 0;
};

// A tensor view's values in float32.
absl::StatusOr<std::vector<float>> Floats(const model::TensorMapping& m, const ShardView& v) {
  std::vector<float> out(static_cast<size_t>(v.elements()));
  if (auto s = quant::DequantizeToFloat(m.info->type, v.bytes, out.size(), out.data()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", m.name, ": ", s.message()));
  }
  return out;
}

// Puts this rank's view of tensor `m` in its place in `w`: the embedding and head as views,
// vectors and `needs_float` matrices dequantized, a legacy MLA file's kv_b split into k_b /
// v_b (spec 10.4), every other matrix as a quantized view.
absl::Status PlaceTensor(const model::TensorMapping& m, const ShardView& view,
                         const model::HyperParams& hp, HostWeights& w) {
  const gguf::TensorInfo& t = *m.info;
  const std::string local = m.spec->name;
  const bool global = m.spec->scope == model::Scope::kGlobal;
  auto matrix = [&]() {
    return QuantMatrix::Make(t.type, view.rows(), view.dims[0], view.bytes, m.name);
  };
  if (global) {
    if (local == "token_embd.weight") {
      w.embd_type = t.type;
      w.embd_data = view.bytes;
      w.vocab_begin = view.begin;
      w.vocab_end = view.end;
      return absl::OkStatus();
    }
    if (local == "output.weight") {
      auto q = matrix();
      if (!q.ok()) return q.status();
      w.output = *q;
      return absl::OkStatus();
    }
    auto f = Floats(m, view);
    if (!f.ok()) return f.status();
    if (local == "output_norm.weight") w.output_norm = *std::move(f);
    if (local == "output.bias") w.output_bias = *std::move(f);
    if (local == "rope_freqs.weight") w.rope_freqs = *std::move(f);
    return absl::OkStatus();
  }
  LayerWeights& L = w.layers[m.layer];
  // None of it on this rank (its share of the block's heads or hidden dim is empty): the
  // slot stays empty and the pass computes nothing of that part.
  if (view.elements() == 0) return absl::OkStatus();
  std::vector<float>* vec_slot = nullptr;
  QuantMatrix* slot = nullptr;
  FindBlockWeight(L, local, &vec_slot, &slot);
  if (vec_slot != nullptr) {
    auto f = Floats(m, view);
    if (!f.ok()) return f.status();
    *vec_slot = *std::move(f);
    return absl::OkStatus();
  }
  if (local == "attn_kv_b.weight") {
    // Legacy MLA file: split kv_b into the absorbed form's k_b / v_b (spec 10.4), for
    // this rank's heads.
    auto kv = Floats(m, view);
    if (!kv.ok()) return kv.status();
    const int64_t per_head = hp.qk_nope() + hp.value_length_mla;
    model::KvBShape s{view.rows() / per_head, hp.qk_nope(), hp.value_length_mla, hp.kv_lora_rank};
    std::vector<float> k_b(s.heads * s.nope * s.latent), v_b(s.heads * s.v * s.latent);
    if (auto st = model::SplitKvB(s, *kv, absl::MakeSpan(k_b), absl::MakeSpan(v_b)); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", m.name, ": ", st.message()));
    }
    L.wk_b = w.OwnedMatrix(std::move(k_b), s.heads * s.latent, s.nope);
    L.wv_b = w.OwnedMatrix(std::move(v_b), s.heads * s.v, s.latent);
    return absl::OkStatus();
  }
  if (local == "nextn.embed_tokens.weight") {
    return absl::UnimplementedError(
        absl::StrCat("tensor ", m.name,
                     ": an MTP block with token embeddings of its own is not supported yet "
                     "(those that use token_embd.weight load)"));
  }
  if (slot == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("tensor ", m.name, ": not used by the CPU executor yet"));
  }
  if (m.spec->needs_float && t.type != gguf::GgmlType::kF32) {
    // The `dequantize` fixup: router and indexer.proj compute in float (spec 13.2).
    auto f = Floats(m, view);
    if (!f.ok()) return f.status();
    *slot = w.OwnedMatrix(*std::move(f), view.rows(), view.dims[0]);
    return absl::OkStatus();
  }
  auto q = matrix();
  if (!q.ok()) return q.status();
  *slot = *q;
  return absl::OkStatus();
}

// MemAvailable of /proc/meminfo in bytes (0 when unreadable).
uint64_t MemAvailableBytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  uint64_t kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long v = 0;
    if (std::sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
      kib = v;
      break;
    }
  }
  std::fclose(f);
  return kib * 1024;
}

// A CPU step allocates its activations (megabytes for a prefill chunk) afresh in every layer.
// Above glibc's mmap threshold each one was a new mapping: page faults and kernel zeroing on
// every allocation, a third of a 512-token prefill. Up to 32 MiB (glibc's largest threshold)
// they come from the heap instead, and freed memory stays for the next layer and step
// rather than being trimmed back to the system.
void KeepStepBuffersInTheHeap() {
  static const bool done = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    return true;
  }();
  (void)done;
}

}  // namespace

Executor::Impl::Impl(gguf::GgufModel f) : file(std::move(f)) {}
Executor::Impl::~Impl() = default;

QuantMatrix HostWeights::OwnedMatrix(std::vector<float> data, int64_t rows, int64_t cols) {
  owned.push_back(std::move(data));
  return FloatMatrix(owned.back().data(), rows, cols);
}

absl::Status Executor::Impl::AllReduce(std::vector<float>& v) {
  if (options.tp_size == 1) return absl::OkStatus();
  return options.comm->AllReduceSum(v.data(), v.size());
}

absl::Status Executor::Impl::LoadWeights(const model::TensorMap& map) {
  weights.layers.resize(hp.n_layer + map.mtp_blocks);
  const int tp = options.tp_size, rank = options.tp_rank;
  model::PlanOptions plan_options;
  plan_options.experts = options.expert_parallel;
  model::ShardPlan plan = model::BuildShardPlan(map, hp, tp, plan_options);
  if (!plan.problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model cannot be split ", tp, " ways: ", model::SummarizeProblems(plan.problems)));
  }
  const model::RankPlan& mine = plan.ranks[rank];
  weights.planned_read_bytes = mine.read_bytes;
  shares = mine.blocks;
  // A GPU reads the views to upload them; the CPU computes from them in place.
  ShardReader reader(file, map, mine, tp, options.device == Device::kCpu, weights.owned_bytes);
  for (const model::TensorMapping& m : map.tensors) {
    if (!m.loaded()) continue;
    absl::StatusOr<ShardView> v = reader.View(m);
    if (!v.ok()) return v.status();
    if (options.on_load_progress) options.on_load_progress(reader.done(), mine.read_bytes);
    TESSERA_RETURN_IF_ERROR(PlaceTensor(m, *v, hp, weights));
  }
  if (weights.embd_data.empty()) return absl::InvalidArgumentError("token_embd.weight is missing");
  if (weights.output.data == nullptr) {  // tied embeddings (spec 5.7): the same vocab rows
    auto q = QuantMatrix::Make(weights.embd_type, weights.vocab_end - weights.vocab_begin,
                               hp.n_embd, weights.embd_data, "token_embd.weight");
    if (!q.ok()) return q.status();
    weights.output = *q;
  }
  if (weights.output.rows != weights.vocab_end - weights.vocab_begin) {
    return absl::InvalidArgumentError(
        absl::StrCat("output.weight holds ", weights.output.rows, " vocabulary rows on rank ", rank,
                     ", token_embd.weight ", weights.vocab_end - weights.vocab_begin,
                     ": their splits disagree"));
  }
  return absl::OkStatus();
}

std::vector<QuantMatrix*> HostWeights::WeightMatrices() {
  std::vector<QuantMatrix*> out;
  for (LayerWeights& L : layers) {
    ForEachBlockWeight([](std::string_view, std::vector<float>&) {},
                       [&](std::string_view, QuantMatrix& m) {
                         if (m.data != nullptr) out.push_back(&m);
                       },
                       L);
  }
  if (output.data != nullptr) out.push_back(&output);
  return out;
}

bool Executor::Impl::DecodePanelsApply() const {
  return cpu::IsaSupported(cpu::Isa::kAvx512) &&
         static_cast<int>(matmul.isa) >= static_cast<int>(cpu::Isa::kAvx512);
}

Executor::Impl::PackPlan Executor::Impl::PackingPlan(const std::vector<QuantMatrix*>& ms) const {
  PackPlan plan;
  plan.decode.assign(ms.size(), false);
  plan.int8.assign(ms.size(), false);
  if (options.exact || options.weight_packing == WeightPacking::kOff) {
    plan.why = options.exact ? "exact path" : "--repack-weights off";
    return plan;
  }
  uint64_t budget = std::numeric_limits<uint64_t>::max();
  if (options.weight_packing == WeightPacking::kAuto) {
    budget =
        options.weight_packing_budget > 0 ? options.weight_packing_budget : MemAvailableBytes() / 4;
  }
  // Decode panels first (every decode step reads them; about the bytes of the rows
  // themselves), then int8 panels (batched steps) with what is left.
  const bool decode_panels = DecodePanelsApply();
  uint64_t wanted = 0, planned = 0;
  for (size_t i = 0; decode_panels && i < ms.size(); ++i) {
    const QuantMatrix& m = *ms[i];
    const uint64_t bytes = cpu::DecodePanelMatrix::Bytes(m.type, m.rows, m.cols);
    if (bytes == 0) continue;
    wanted += bytes;
    if (planned + bytes > budget) continue;
    planned += bytes;
    plan.decode[i] = true;
  }
  for (size_t i = 0; i < ms.size(); ++i) {
    const QuantMatrix& m = *ms[i];
    if (!cpu::GemmPacksType(m.type, matmul)) continue;
    const uint64_t bytes =
        cpu::PackedInt8Matrix::Bytes(*cpu::FindInt8GemmLayout(m.type), m.rows, m.cols);
    wanted += bytes;
    if (planned + bytes > budget) continue;
    planned += bytes;
    plan.int8[i] = true;
  }
  constexpr double kMiB = 1 << 20;
  plan.why = wanted == 0         ? "no matrix has panels"
             : planned == wanted ? absl::StrFormat("%.1f MiB", planned / kMiB)
                                 : absl::StrFormat(
                                       "%.1f of %.1f MiB: the budget is %.1f MiB, %s "
                                       "(--repack-weights on packs all)",
                                       planned / kMiB, wanted / kMiB, budget / kMiB,
                                       options.weight_packing_budget > 0
                                           ? "as set"
                                           : "a quarter of the memory available at load");
  return plan;
}

void Executor::Impl::PackWeights() {
  const std::vector<QuantMatrix*> ms = weights.WeightMatrices();
  const PackPlan plan = PackingPlan(ms);
  const bool decode_panels = DecodePanelsApply();
  int n = 0, candidates = 0, n_decode = 0, decode_candidates = 0;
  for (size_t i = 0; i < ms.size(); ++i) {
    QuantMatrix& m = *ms[i];
    if (decode_panels && cpu::DecodePanelMatrix::Bytes(m.type, m.rows, m.cols) > 0) {
      ++decode_candidates;
    }
    if (plan.decode[i]) {
      weights.decode_panels.push_back(
          cpu::DecodePanelMatrix::Pack(m.type, m.data, m.row_bytes, m.rows, m.cols, pool.get()));
      m.decode_panels = weights.decode_panels.back().get();
      m.decode_panels_row0 = 0;
      weights.packed_bytes += m.decode_panels->bytes();
      ++n_decode;
    }
    if (cpu::GemmPacksType(m.type, matmul)) ++candidates;
    if (!plan.int8[i]) continue;
    weights.packed.push_back(cpu::PackedInt8Matrix::Pack(*cpu::FindInt8GemmLayout(m.type), m.data,
                                                         m.row_bytes, m.rows, m.cols,
                                                         cpu::Isa::kAvx512, pool.get()));
    m.packed = weights.packed.back().get();
    m.packed_row0 = 0;
    weights.packed_bytes += m.packed->bytes();
    ++n;
  }
  absl::StrAppend(&kernel_summary, "; weights: decode panels ",
                  decode_panels ? absl::StrCat("kept for ", n_decode, " of ", decode_candidates,
                                               " q4_K/q5_K/q6_K/q8_0 matrices")
                                : std::string("none (they need AVX-512 VNNI)"),
                  ", int8 panels for ", n, " of ", candidates, " GEMM matrices (", plan.why, ")");
  // Per packed type, from which batch the GEMM on the panels beats the dots, measured over
  // the model's own matrices in step order.
  std::map<gguf::GgmlType, std::vector<const QuantMatrix*>> packed_of_type;
  for (const QuantMatrix* m : ms) {
    if (m->packed != nullptr) packed_of_type[m->type].push_back(m);
  }
  for (const auto& [type, of_type] : packed_of_type) {
    absl::StrAppend(&kernel_summary, "; ", cpu::CalibratePackedGemm(of_type, pool.get(), &matmul));
  }
  // Per type with matrices that have decode panels but no int8 panels: from which batch the
  // kDots path's GEMM (unpacking their rows) beats the panels.
  std::map<gguf::GgmlType, std::vector<const QuantMatrix*>> of_type;
  for (const QuantMatrix* m : ms) of_type[m->type].push_back(m);
  for (const auto& [type, group] : of_type) {
    const bool wanted = std::any_of(group.begin(), group.end(), [](const QuantMatrix* m) {
      return m->decode_panels != nullptr && m->packed == nullptr;
    });
    if (wanted) {
      absl::StrAppend(&kernel_summary, "; ",
                      cpu::CalibrateDecodePanelGemm(group, pool.get(), &matmul));
    }
  }
}

void Executor::Impl::CalibrateKernels() {
  kernel_summary = absl::StrCat(
      "cpu ", cpu::CpuModelName(), ", ", cpu::IsaName(matmul.isa),
      "; attention: ", options.exact ? "gathered (exact path)" : "paged in place (decode)");
  if (options.exact) return;  // the float path everywhere: nothing to choose
  // One matrix of each weight type the layers and the head use: the one with the longest
  // rows.
  std::vector<const QuantMatrix*> of_type;
  for (const QuantMatrix* m : weights.WeightMatrices()) {
    if (m->type == gguf::GgmlType::kF32) continue;
    bool seen_type = false;
    for (const QuantMatrix*& seen : of_type) {
      if (seen->type != m->type) continue;
      seen_type = true;
      if (m->cols > seen->cols) seen = m;
      break;
    }
    if (!seen_type) of_type.push_back(m);
  }
  for (const QuantMatrix* m : of_type) {
    absl::StrAppend(&kernel_summary, "; ", cpu::CalibrateMatmul(*m, &matmul));
  }
}

void UnpadVocab(const std::vector<float>& parts, int tp, int64_t rows_gathered, int64_t rows,
                int64_t V, std::vector<float>& out) {
  const int64_t width = VocabWidth(V, tp);
  out.assign(rows * V, 0.0f);
  for (int p = 0; p < tp; ++p) {
    const int64_t begin = V * p / tp, n = V * (p + 1) / tp - begin;
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(&parts[(p * rows_gathered + r) * width], n, &out[r * V + begin]);
    }
  }
}

std::vector<std::vector<float>> LogitsBySequence(absl::Span<const SequenceInput> seqs,
                                                 const std::vector<float>& rows, int64_t V,
                                                 bool every_row) {
  std::vector<std::vector<float>> result(seqs.size());
  int64_t r = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int64_t n =
        every_row || seqs[s].all_logits ? static_cast<int64_t>(seqs[s].tokens.size()) : 1;
    result[s].assign(rows.begin() + r * V, rows.begin() + (r + n) * V);
    r += n;
  }
  return result;
}

absl::Status Executor::Impl::Flatten(absl::Span<const SequenceInput> seqs, StepTrace* trace,
                                     Batch& b, bool mtp) const {
  const int64_t V = hp.n_vocab;
  b.seqs = seqs;
  b.trace = trace;
  b.mtp = mtp;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const SequenceInput& in = seqs[s];
    b.seq_begin.push_back(b.size());
    b.all_hidden = b.all_hidden || in.all_hidden;
    if (in.tokens.empty())
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": no tokens"));
    if (mtp) {
      const size_t want = in.tokens.size() * hp.n_embd;
      if (in.mtp_hidden.size() != want) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequence ", s, ": mtp_hidden holds ", in.mtp_hidden.size(), " values, expected ",
            in.tokens.size(), " tokens x n_embd ", hp.n_embd, " = ", want));
      }
      b.mtp_hidden.insert(b.mtp_hidden.end(), in.mtp_hidden.begin(), in.mtp_hidden.end());
    }
    for (size_t i = 0; i < in.tokens.size(); ++i) {
      int32_t id = in.tokens[i];
      if (id < 0 || id >= static_cast<int32_t>(V)) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": token id ", id,
                                                       " is outside the vocabulary (", V, ")"));
      }
      int64_t p = in.start_pos + static_cast<int64_t>(i);
      int64_t sl = CacheSlot(kv_shape, in.block_table, p);
      if (sl < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequence ", s, ": position ", p, " has no cache slot (block table of ",
                         in.block_table.size(), " blocks of ", kv_shape.block_size, ")"));
      }
      b.tok.push_back(id);
      b.pos.push_back(p);
      b.slot.push_back(sl);
      b.seq_of.push_back(static_cast<int>(s));
    }
  }
  b.seq_begin.push_back(b.size());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> Executor::Impl::Step(
    absl::Span<const SequenceInput> seqs, StepTrace* trace, bool mtp,
    std::vector<std::vector<float>>* hidden, std::vector<SampledToken>* sampled) {
  if (sampled != nullptr) sampled->assign(seqs.size(), SampledToken{});
  if (mtp && mtp_blocks == 0) {
    return absl::FailedPreconditionError(
        "an MTP step needs the MTP (NextN) block loaded (ExecutorOptions::load_mtp)");
  }
  Batch b;
  TESSERA_RETURN_IF_ERROR(Flatten(seqs, trace, b, mtp));
  std::vector<float> hidden_rows;
  if (hidden != nullptr) b.hidden_out = &hidden_rows;
  absl::StatusOr<std::vector<std::vector<float>>> logits;
  if (gpu != nullptr && b.all_hidden && mtp_blocks == 0) {
    return absl::FailedPreconditionError(
        "the GPU executor returns every row's hidden state (SequenceInput::all_hidden) only "
        "with the MTP block loaded (ExecutorOptions::load_mtp), whose buffers it uses");
  }
  if (gpu != nullptr) {
    const bool on_device =
        !mtp && options.device_sampling &&
        (options.tp_size == 1 || (options.comm != nullptr && options.comm->on_device()));
    logits = gpu->Step(b, on_device ? sampled : nullptr);
  } else {
    CpuOps ops(*this, b);
    ForwardPass<CpuOps> pass(ops);
    TESSERA_RETURN_IF_ERROR(mtp ? pass.RunMtp(b.size()) : pass.Run(b.size()));
    logits = ops.TakeLogits();
  }
  if (logits.ok() && hidden != nullptr) {
    *hidden = LogitsBySequence(seqs, hidden_rows, hp.n_embd, b.all_hidden);
  }
  return logits;
}

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::~Executor() = default;

const model::HyperParams& Executor::hparams() const { return impl_->hp; }
const gguf::GgufModel& Executor::file() const { return impl_->file; }
int Executor::block_size() const { return impl_->kv_shape.block_size; }
int Executor::n_blocks() const { return impl_->kv_shape.n_blocks; }
std::string Executor::device_name() const {
  return impl_->gpu != nullptr ? impl_->gpu->device_name() : "cpu";
}
int Executor::threads() const { return impl_->pool->size(); }
cpu::ThreadPool& Executor::thread_pool() const { return *impl_->pool; }
uint64_t Executor::planned_read_bytes() const { return impl_->weights.planned_read_bytes; }
uint64_t Executor::packed_weight_bytes() const { return impl_->weights.packed_bytes; }

std::optional<WeightPacking> ParseWeightPacking(std::string_view s) {
  if (s == "auto") return WeightPacking::kAuto;
  if (s == "on" || s == "true") return WeightPacking::kOn;
  if (s == "off" || s == "false") return WeightPacking::kOff;
  return std::nullopt;
}

const char* WeightPackingName(WeightPacking p) {
  switch (p) {
    case WeightPacking::kOn:
      return "on";
    case WeightPacking::kOff:
      return "off";
    case WeightPacking::kAuto:
      break;
  }
  return "auto";
}
const std::string& Executor::kernel_summary() const { return impl_->kernel_summary; }
std::map<std::string, double> Executor::Profile() const { return impl_->profile; }
void Executor::ResetProfile() { impl_->profile.clear(); }

absl::StatusOr<std::vector<std::vector<float>>> Executor::Step(
    absl::Span<const SequenceInput> seqs, StepTrace* trace, std::vector<std::vector<float>>* hidden,
    std::vector<SampledToken>* sampled) {
  return impl_->Step(seqs, trace, /*mtp=*/false, hidden, sampled);
}

bool Executor::samples_on_device() const {
  return impl_->gpu != nullptr && impl_->options.device_sampling &&
         (impl_->options.tp_size == 1 ||
          (impl_->options.comm != nullptr && impl_->options.comm->on_device()));
}

bool Executor::has_mtp() const { return impl_->mtp_blocks > 0; }

absl::Status Executor::BroadcastFromRank0(void* data, size_t bytes) {
  if (impl_->options.tp_size <= 1 || impl_->options.comm == nullptr || bytes == 0) {
    return absl::OkStatus();
  }
  if (impl_->options.comm->on_device()) {
    if (impl_->gpu == nullptr) {
      return absl::FailedPreconditionError("a device communicator on a CPU executor");
    }
    return impl_->gpu->BroadcastHost(data, bytes, impl_->options.comm);
  }
  return impl_->options.comm->Broadcast(data, bytes, 0);
}

absl::StatusOr<std::vector<std::vector<float>>> Executor::MtpStep(
    absl::Span<const SequenceInput> seqs, std::vector<std::vector<float>>* hidden) {
  return impl_->Step(seqs, nullptr, /*mtp=*/true, hidden, nullptr);
}

void Executor::Impl::PlanRope() {
  rope.n_rot = static_cast<int>(hp.n_rot);
  rope.freq_base = hp.rope_freq_base;
  const float s_rope =
      hp.rope_scaling_factor > 0 && hp.rope_scaling_type != "none" ? hp.rope_scaling_factor : 1.0f;
  rope.freq_scale = 1.0f / s_rope;
  rope.yarn = hp.rope_scaling_type == "yarn";
  rope.yarn_orig_ctx = static_cast<int>(hp.rope_orig_ctx);
  rope.freq_factors = weights.rope_freqs.empty() ? nullptr : weights.rope_freqs.data();
  // Rope magnitude M (spec 5.3) and, for MLA, the attention scale with the mscale (10.6).
  float magnitude = 1.0f;
  const bool log_mul = config.mla_yarn_log_multiplier && hp.yarn_log_multiplier != 0;
  if (rope.yarn && !log_mul) magnitude = cpu::YarnMagnitude(s_rope, hp.rope_attn_factor);
  if (rope.yarn && log_mul) {
    const float mu_all = hp.yarn_log_multiplier / 0.1f;
    const float mu = mu_all != 1.0f ? mu_all : 1.0f;
    auto g = [&](float m) { return s_rope <= 1 ? 1.0f : 1.0f + 0.1f * m * std::log(s_rope); };
    magnitude = g(mu) / g(mu_all);
  }
  rope.magnitude = magnitude;
  if (config.mla) {
    const float l_mul = config.mla_yarn_log_multiplier ? hp.yarn_log_multiplier / 0.1f : 0.0f;
    const float mscale = magnitude * (1.0f + 0.1f * l_mul * std::log(s_rope));
    attn_scale = mscale * mscale / std::sqrt(static_cast<float>(hp.key_length_mla));
  } else {
    attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
  }
}

KvCacheShape Executor::Impl::PlanCacheShape() {
  // The compute dtype (16-bit activations on the fast path when asked) and the cache's.
  CacheDtype kv_dtype = CacheDtype::kF32;
  act_dtype = ComputeDtype::kFloat32;
  if (!options.exact) {
    switch (options.dtype) {
      case ComputeDtype::kAuto:
        kv_dtype = CacheDtype::kF16;
        break;
      case ComputeDtype::kFloat32:
        break;
      case ComputeDtype::kBFloat16:
        kv_dtype = CacheDtype::kBF16;
        act_dtype = ComputeDtype::kBFloat16;
        break;
      case ComputeDtype::kFloat16:
        kv_dtype = CacheDtype::kF16;
        act_dtype = ComputeDtype::kFloat16;
        break;
    }
  }
  KvCacheShape shape;
  // The trunk's layers, then the MTP blocks' (layer n_layer + i is MTP block i's).
  shape.n_layers = static_cast<int>(hp.n_layer) + mtp_blocks;
  shape.block_size = std::max(1, options.kv_block_size);
  shape.dtype = kv_dtype;
  if (config.mla) {
    // The latent and the shared rope key only: c + r values per token (spec 10.3).
    shape.k_width = static_cast<int>(hp.kv_lora_rank + hp.n_rot);
    shape.v_width = 0;
  } else {
    // This rank's KV heads only, every layer as wide as its widest (the shard plan's
    // kv_bytes_per_token).
    int64_t heads_kv = 0;
    for (const model::BlockShare& s : shares) heads_kv = std::max(heads_kv, s.kv_heads());
    shape.k_width = static_cast<int>(heads_kv * hp.head_dim_k);
    shape.v_width = static_cast<int>(heads_kv * hp.head_dim_v);
  }
  return shape;
}

absl::Status Executor::Impl::CreateHostCache(KvCacheShape shape) {
  int64_t kv_tokens = options.kv_tokens;
  if (kv_tokens <= 0) kv_tokens = std::min<int64_t>(4096, std::max<uint32_t>(hp.n_ctx_train, 1));
  if (hp.n_ctx_train > 0 && kv_tokens > hp.n_ctx_train) {
    return absl::InvalidArgumentError(absl::StrCat("a KV cache of ", kv_tokens,
                                                   " tokens exceeds the model's context length ",
                                                   hp.n_ctx_train));
  }
  shape.n_blocks = static_cast<int>((kv_tokens + shape.block_size - 1) / shape.block_size);
  kv_shape = shape;
  cache = std::make_unique<PagedKvCache>(shape);
  if (config.dsa) {
    KvCacheShape ks = shape;
    ks.n_layers = static_cast<int>(hp.n_layer);  // the MTP blocks run no indexer
    ks.k_width = static_cast<int>(hp.indexer_head_dim);
    ks.v_width = 0;
    ks.dtype = CacheDtype::kF32;  // indexer keys stay float32 (conformance README)
    indexer_cache = std::make_unique<PagedKvCache>(ks);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(const std::string& model_path,
                                                           const ExecutorOptions& options) {
  auto file = gguf::GgufModel::Open(model_path);
  if (!file.ok()) return file.status();
  if (options.tp_size < 1 || options.tp_rank < 0 || options.tp_rank >= options.tp_size) {
    return absl::InvalidArgumentError(absl::StrCat("tensor-parallel rank ", options.tp_rank,
                                                   " is outside a group of ", options.tp_size));
  }
  if (options.tp_size > 1 && (options.comm == nullptr || options.comm->size() != options.tp_size ||
                              options.comm->rank() != options.tp_rank)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor parallelism over ", options.tp_size,
                                                   " ranks needs a communicator of that size"));
  }
  auto impl = std::make_unique<Impl>(*std::move(file));
  impl->options = options;
  const gguf::Metadata& md = impl->file.metadata();
  std::string arch_name = md.GetString("general.architecture").value_or("");
  const model::ArchSpec* arch = model::FindArch(arch_name);
  if (arch == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown architecture '", arch_name,
                     "'; supported: ", absl::StrJoin(model::SupportedArchNames(), ", ")));
  }
  impl->config = ConfigOf(*arch);
  std::vector<model::KeyProblem> key_problems;
  impl->hp = model::LoadHyperParams(*arch, arch_name, md, nullptr, &key_problems);
  for (const model::KeyProblem& k : key_problems) {
    if (k.error) return absl::InvalidArgumentError(k.message);
  }
  if (options.load_mtp) {
    if (std::string why = model::MtpUnavailable(*arch, impl->hp, arch_name); !why.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(model_path, ": the MTP draft head was asked for, but ", why));
    }
  }
  model::TensorMap map = model::MapTensors(*arch, impl->hp, impl->file, {.mtp = options.load_mtp});
  impl->mtp_blocks = static_cast<int>(map.mtp_blocks);
  if (!map.problems.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_path, ": ", absl::StrJoin(map.problems, "; ")));
  }
  // On a GPU the upload reads the weights and reports the progress.
  if (options.device == Device::kCuda) impl->options.on_load_progress = nullptr;
  if (absl::Status s = impl->LoadWeights(map); !s.ok()) return s;
  impl->options.on_load_progress = options.on_load_progress;

  impl->PlanRope();

  // A GPU executor computes nothing on the host: no compute threads beyond its own.
  impl->pool =
      std::make_unique<cpu::ThreadPool>(options.device == Device::kCuda ? 1 : options.threads);
  impl->matmul.path = options.exact ? cpu::MatmulPath::kFloat : cpu::MatmulPath::kAuto;
  if (options.device == Device::kCpu) {
    KeepStepBuffersInTheHeap();
    impl->CalibrateKernels();
    impl->PackWeights();
  }
  KvCacheShape shape = impl->PlanCacheShape();
  if (options.device == Device::kCuda) {
    // The cache lives on the device, sized from its memory unless kv_tokens says.
    impl->kv_shape = shape;
    auto gpu = CudaForward::Create(*impl, &impl->kv_shape.n_blocks);
    if (!gpu.ok()) return gpu.status();
    impl->gpu = *std::move(gpu);
    // The host copies the upload read from are no longer needed.
    impl->weights.owned_bytes.clear();
    impl->weights.owned.clear();
    return std::unique_ptr<Executor>(new Executor(std::move(impl)));
  }
  if (absl::Status st = impl->CreateHostCache(shape); !st.ok()) return st;
  return std::unique_ptr<Executor>(new Executor(std::move(impl)));
}

}  // namespace tessera::executor
