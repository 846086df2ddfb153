#include "worker/executor/cpu_ops.h"

#include <algorithm>
#include <cstring>

#include <sys/mman.h>

#include "absl/strings/str_cat.h"
#include "common/quant/dequantize.h"
#include "common/util/half.h"

namespace tessera::executor {
absl::Status CpuOps::NeedContiguous(const Act& a, const char* what) {
  if (a.contiguous()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cpu ops: ", what, " needs contiguous rows"));
}

CpuOps::CpuOps(Executor::Impl& impl, Batch& b) : impl_(impl), b_(b) {
  const int64_t T = b.size();
  seq_of_ = &b.seq_of;
  seq_decode_.assign(b.seqs.size(), 0);
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const SequenceInput& in = b.seqs[s];
    seq_decode_[s] = in.rows_as_decodes || (in.tokens.size() == 1 && !in.prefill);
    prompt_rows_ = prompt_rows_ || !seq_decode_[s];
  }
  // RoPE angles per token, shared by every layer's rotations.
  const int half = impl_.rope.n_rot / 2;
  b.cos.resize(T * half);
  b.sin.resize(T * half);
  for (int64_t t = 0; t < T; ++t) {
    cpu::RopeAngles(impl_.rope, b.pos[t], &b.cos[t * half], &b.sin[t * half]);
  }
  b.dsa_keep.assign(T, {});
  // The head's rows: every new token of an all_logits sequence, else the last.
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const int64_t n = static_cast<int64_t>(b.seqs[s].tokens.size());
    for (int64_t i = b.seqs[s].all_logits ? 0 : n - 1; i < n; ++i) {
      head_row_index_.push_back(b.seq_begin[s] + i);
      head_row_seq_.push_back(static_cast<int>(s));
    }
  }
  head_rows_.count = head_row_index_.size();
  head_rows_.seq = &head_row_seq_;
}

CpuOps::~CpuOps() = default;

CpuOps::PhaseScope::PhaseScope(CpuOps& ops, const char* name) : ops_(ops) {
  const auto now = std::chrono::steady_clock::now();
  if (!ops_.phases_.empty()) {
    auto& [outer, since] = ops_.phases_.back();
    ops_.impl_.profile[outer] += std::chrono::duration<double>(now - since).count();
  }
  ops_.phases_.emplace_back(name, now);
}

CpuOps::PhaseScope::~PhaseScope() {
  const auto now = std::chrono::steady_clock::now();
  auto& [name, since] = ops_.phases_.back();
  ops_.impl_.profile[name] += std::chrono::duration<double>(now - since).count();
  ops_.phases_.pop_back();
  if (!ops_.phases_.empty()) ops_.phases_.back().second = now;
}

StepBuffer::~StepBuffer() {
  if (mapped_bytes_ > 0) {
    munmap(data_, mapped_bytes_);
  } else {
    delete[] data_;
  }
}

float* StepBuffer::Reserve(size_t n) {
  if (n <= capacity_) return data_;
  this->~StepBuffer();
  data_ = nullptr;
  capacity_ = mapped_bytes_ = 0;
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t bytes = std::max<size_t>(n, 1) * sizeof(float);
  if (bytes >= kHugePage) {
    const size_t mapped = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      madvise(p, mapped, MADV_HUGEPAGE);  // a hint: without THP, 4 KiB pages
      data_ = static_cast<float*>(p);
      mapped_bytes_ = mapped;
      capacity_ = mapped / sizeof(float);
      return data_;
    }
  }
  data_ = new float[std::max<size_t>(n, 1)];
  capacity_ = std::max<size_t>(n, 1);
  return data_;
}

Act CpuOps::Tensor(Buf role, int64_t rows, int64_t cols, Prec prec) {
  Act a;
  a.data =
      impl_.buffers.by_role[static_cast<size_t>(role)].Reserve(static_cast<size_t>(rows * cols));
  a.rows = rows;
  a.cols = cols;
  a.ld = cols;
  a.prec = prec;
  a.elem = sizeof(float);
  return a;
}

Act CpuOps::AsF32(Act a, Buf) const {
  // Float32 in memory already: the values of a kAct tensor are its rounded ones.
  a.prec = Prec::kF32;
  return a;
}

void CpuOps::Round(const Act& a) const {
  if (a.prec != Prec::kAct) return;
  for (int64_t i = 0; i < a.rows; ++i) RoundValues(Row(a, i), a.cols);
}

absl::Status CpuOps::Embed(Act x) {
  const int64_t d = x.cols;
  const gguf::GgmlTypeInfo* et = gguf::LookupGgmlType(impl_.weights.embd_type);
  if (et == nullptr) return absl::InvalidArgumentError("token_embd.weight: unknown type");
  const uint64_t embd_row = static_cast<uint64_t>(d) / et->block_elems * et->block_bytes;
  for (int64_t t = 0; t < x.rows; ++t) {
    float* row = Row(x, t);
    const int64_t id = b_.tok[t];
    if (id < impl_.weights.vocab_begin || id >= impl_.weights.vocab_end) {
      std::fill(row, row + d, 0.0f);
      continue;
    }
    TESSERA_RETURN_IF_ERROR(quant::DequantizeToFloat(
        impl_.weights.embd_type,
        impl_.weights.embd_data.subspan((id - impl_.weights.vocab_begin) * embd_row, embd_row), d,
        row));
  }
  Round(x);
  return absl::OkStatus();
}

absl::Status CpuOps::Products(std::initializer_list<Product> products) {
  std::vector<MatMulProduct> many;
  int64_t batch = 0;
  for (const Product& p : products) {
    TESSERA_RETURN_IF_ERROR(NeedContiguous(p.x, "a product's input"));
    TESSERA_RETURN_IF_ERROR(NeedContiguous(p.y, "a product's output"));
    const float* x = static_cast<const float*>(p.x.data);
    float* y = static_cast<float*>(p.y.data);
    const int64_t n = p.x.rows;
    if (p.per_vector) {
      TESSERA_RETURN_IF_ERROR(MatMulPerVector(*p.w, x, n, y));
    } else if (p.row_seq != nullptr && impl_.options.batch_invariant && !impl_.options.exact) {
      // Rows that are not the step's tokens (the head's, one per sampled position): under
      // batch invariance per-vector kernels, the ones a single row takes, so that a row's
      // logits depend neither on how many sequences sample in the step nor on its chunk.
      // Otherwise they are a product like any other.
      TESSERA_RETURN_IF_ERROR(MatMulPerVector(*p.w, x, n, y));
    } else {
      many.push_back({p.w, x, y, n});
      batch = std::max(batch, n);
    }
  }
  if (!many.empty()) TESSERA_RETURN_IF_ERROR(MatMulMany(many, batch));
  for (const Product& p : products) Round(p.y);
  return absl::OkStatus();
}

absl::Status CpuOps::HeadProducts(const Mat& stack, int64_t heads, Act x, Act y) {
  const int64_t T = x.rows / heads, m = y.cols;
  std::vector<float> xg(T * x.cols);
  for (int64_t hh = 0; hh < heads; ++hh) {
    for (int64_t t = 0; t < T; ++t) std::copy_n(Row(x, t * heads + hh), x.cols, &xg[t * x.cols]);
    // Head hh's rows of y: row t · heads + hh.
    TESSERA_RETURN_IF_ERROR(
        MatMulRows(stack, hh * m, (hh + 1) * m, xg.data(), T, Row(y, hh), heads * y.ld));
  }
  Round(y);
  return absl::OkStatus();
}

absl::Status CpuOps::RmsNorm(Act in, const Vec& w, float eps, Act out) {
  for (int64_t i = 0; i < in.rows; ++i) {
    cpu::RmsNorm(Row(in, i), w.data(), in.cols, eps, Row(out, i));
  }
  Round(out);
  return absl::OkStatus();
}

absl::Status CpuOps::LayerNorm(Act x, const Vec& w, const Vec& b, float eps) {
  for (int64_t i = 0; i < x.rows; ++i) {
    cpu::LayerNorm(Row(x, i), w.data(), b.data(), x.cols, eps, Row(x, i));
  }
  Round(x);
  return absl::OkStatus();
}

absl::Status CpuOps::Rope(Act v, int64_t heads, int64_t head_stride) {
  const int half = impl_.rope.n_rot / 2;
  for (int64_t t = 0; t < v.rows; ++t) {
    for (int64_t hh = 0; hh < heads; ++hh) {
      cpu::ApplyRope(Row(v, t) + hh * head_stride, impl_.rope.n_rot, impl_.config.rope,
                     &b_.cos[t * half], &b_.sin[t * half]);
    }
  }
  Round(v);
  return absl::OkStatus();
}

absl::Status CpuOps::AddBias(Act y, const Vec& bias) {
  if (bias.empty()) return absl::OkStatus();
  for (int64_t t = 0; t < y.rows; ++t) {
    float* row = Row(y, t);
    for (size_t i = 0; i < bias.size(); ++i) row[i] += bias[i];
  }
  Round(y);
  return absl::OkStatus();
}

absl::Status CpuOps::Add(Act x, Act y) {
  for (int64_t t = 0; t < x.rows; ++t) {
    float* xr = Row(x, t);
    const float* yr = Row(y, t);
    for (int64_t i = 0; i < x.cols; ++i) xr[i] += yr[i];
  }
  Round(x);
  return absl::OkStatus();
}

absl::Status CpuOps::SiluMul(Act gate, Act up) {
  TESSERA_RETURN_IF_ERROR(NeedContiguous(gate, "SiluMul"));
  TESSERA_RETURN_IF_ERROR(NeedContiguous(up, "SiluMul"));
  float* g = static_cast<float*>(gate.data);
  cpu::SiluMul(g, static_cast<const float*>(up.data), gate.rows * gate.cols, g);
  Round(gate);
  return absl::OkStatus();
}

absl::Status CpuOps::Scale(Act x, float s) {
  for (int64_t t = 0; t < x.rows; ++t) {
    float* row = Row(x, t);
    for (int64_t i = 0; i < x.cols; ++i) row[i] *= s;
  }
  Round(x);
  return absl::OkStatus();
}

absl::Status CpuOps::Copy(Act src, Act dst) {
  for (int64_t t = 0; t < src.rows; ++t) std::copy_n(Row(src, t), src.cols, Row(dst, t));
  Round(dst);
  return absl::OkStatus();
}

absl::Status CpuOps::Zero(Act x) {
  for (int64_t t = 0; t < x.rows; ++t) std::fill_n(Row(x, t), x.cols, 0.0f);
  return absl::OkStatus();
}

absl::Status CpuOps::RoundToAct(Act x) {
  x.prec = Prec::kAct;
  Round(x);
  return absl::OkStatus();
}

absl::Status CpuOps::GatherHeadRows(Act x, Act hr) {
  for (size_t r = 0; r < head_row_index_.size(); ++r) {
    std::copy_n(Row(x, head_row_index_[r]), x.cols, Row(hr, static_cast<int64_t>(r)));
  }
  Round(hr);
  return absl::OkStatus();
}

absl::Status CpuOps::InputHidden(Act g) {
  const int64_t d = g.cols;
  if (static_cast<int64_t>(b_.mtp_hidden.size()) != g.rows * d) {
    return absl::InternalError(absl::StrCat("cpu ops: InputHidden: ", g.rows, " x ", d,
                                            " rows asked, the step holds ", b_.mtp_hidden.size(),
                                            " values"));
  }
  for (int64_t t = 0; t < g.rows; ++t) std::copy_n(&b_.mtp_hidden[t * d], d, Row(g, t));
  Round(g);
  return absl::OkStatus();
}

absl::Status CpuOps::TakeHidden(Act hr) {
  if (b_.hidden_out == nullptr) return absl::OkStatus();
  std::vector<float>& out = *b_.hidden_out;
  out.resize(static_cast<size_t>(hr.rows * hr.cols));
  for (int64_t r = 0; r < hr.rows; ++r) std::copy_n(Row(hr, r), hr.cols, &out[r * hr.cols]);
  return absl::OkStatus();
}

absl::Status CpuOps::AllReduce(Act x) {
  if (impl_.options.tp_size == 1) return absl::OkStatus();
  TESSERA_RETURN_IF_ERROR(NeedContiguous(x, "AllReduce"));
  TESSERA_RETURN_IF_ERROR(
      impl_.options.comm->AllReduceSum(static_cast<float*>(x.data), x.rows * x.cols));
  Round(x);
  return absl::OkStatus();
}

absl::Status CpuOps::GatherVocab(Act logits) {
  const int64_t R = logits.rows, Vl = logits.cols, V = impl_.hp.n_vocab;
  const int tp = impl_.options.tp_size;
  if (tp == 1) {
    logits_.resize(R * V);
    for (int64_t r = 0; r < R; ++r) std::copy_n(Row(logits, r), V, &logits_[r * V]);
    return absl::OkStatus();
  }
  // Vocab-parallel head: every rank's columns, padded to the widest rank's, then rows laid
  // out whole.
  const int64_t width = VocabWidth(V, tp);
  std::vector<float> mine(R * width, 0.0f), parts(R * width * tp);
  for (int64_t r = 0; r < R; ++r) std::copy_n(Row(logits, r), Vl, &mine[r * width]);
  TESSERA_RETURN_IF_ERROR(impl_.options.comm->AllGather(mine.data(), mine.size(), parts.data()));
  UnpadVocab(parts, tp, R, R, V, logits_);
  return absl::OkStatus();
}

bool CpuOps::PrefillRowsTakeOtherKernels(const QuantMatrix& w) const {
  return prompt_rows_ && impl_.options.batch_invariant && !impl_.options.exact &&
         !cpu::DotsMatchAnyBatch(w.type, impl_.matmul);
}

absl::Status CpuOps::MatMulRows(const QuantMatrix& w, int64_t row_begin, int64_t row_end,
                                const float* x, int64_t batch, float* y, int64_t ldy,
                                const std::vector<int>* row_seq) {
  if (row_seq == nullptr && seq_of_ != nullptr && static_cast<int64_t>(seq_of_->size()) == batch) {
    row_seq = seq_of_;
  }
  if (impl_.options.exact || !impl_.options.batch_invariant || row_seq == nullptr) {
    return cpu::Matmul(w, row_begin, row_end, x, batch, y, ldy, impl_.pool.get(), impl_.matmul);
  }
  if (cpu::DotsMatchAnyBatch(w.type, impl_.matmul)) {
    // Every row gets the bits of its own sequence's product from one product of all: the
    // weight panels are unpacked once per step, not once per sequence.
    cpu::MatmulOptions o = impl_.matmul;
    o.path = cpu::MatmulPath::kDots;
    return cpu::Matmul(w, row_begin, row_end, x, batch, y, ldy, impl_.pool.get(), o);
  }
  // Float weights (F32, F16, BF16) and, without the int8 GEMM, quantized ones: decode rows
  // take the dot-product kernels, whose bits depend on the row alone, and a prefill
  // sequence's rows the kernels of a prefill batch whatever their count (outer-product or
  // int8 ones, again per (row, token) bits), so that neither the number of decodes in a
  // step nor where a prompt's chunks fall changes a row.
  auto decode = [&](int64_t i) { return seq_decode_[(*row_seq)[i]] != 0; };
  for (int64_t i = 0; i < batch;) {
    int64_t j = i + 1;
    cpu::MatmulOptions o = impl_.matmul;
    if (decode(i)) {
      while (j < batch && decode(j)) ++j;
      o.path = cpu::MatmulPath::kDots;
    } else {
      while (j < batch && !decode(j)) ++j;
      // The kernels of a prefill batch, also for a part of a chunk's rows (an expert's
      // tokens) or a chunk of fewer rows: a row's bits then depend neither on its chunk's
      // length nor on its neighbours' routing, and the prefill rows of several sequences
      // share one product.
      o.kernel_batch = cpu::kPrefillBatch;
    }
    if (auto s = cpu::Matmul(w, row_begin, row_end, x + i * w.cols, j - i, y + i * ldy, ldy,
                             impl_.pool.get(), o);
        !s.ok()) {
      return s;
    }
    i = j;
  }
  return absl::OkStatus();
}

absl::Status CpuOps::MatMulPerVector(const QuantMatrix& w, const float* x, int64_t batch,
                                     float* y) {
  cpu::MatmulOptions o = impl_.matmul;
  // kDots: float32 weights take the per-vector float kernel (never the panel GEMM); quantized
  // ones the integer dots, except on the exact path, whose float kernel is per-vector anyway.
  if (w.type == gguf::GgmlType::kF32 || !impl_.options.exact) o.path = cpu::MatmulPath::kDots;
  return cpu::Matmul(w, 0, w.rows, x, batch, y, w.rows, impl_.pool.get(), o);
}

absl::Status CpuOps::MatMulMany(absl::Span<const MatMulProduct> products, int64_t batch) {
  auto batch_of = [batch](const MatMulProduct& p) { return p.batch >= 0 ? p.batch : batch; };
  int64_t largest = 0;
  for (const MatMulProduct& p : products) largest = std::max(largest, batch_of(p));
  // Under batch invariance a prompt's rows take a prefill batch's kernels however few they
  // are, where those differ from the per-vector ones (float weights): MatMulRows picks them.
  const bool prefill_kernels =
      std::any_of(products.begin(), products.end(),
                  [&](const MatMulProduct& p) { return PrefillRowsTakeOtherKernels(*p.w); });
  if (largest >= cpu::kPrefillBatch || impl_.pool->size() == 1 || prefill_kernels) {
    for (const MatMulProduct& p : products) {
      if (batch_of(p) == 0) continue;
      if (auto s = MatMul(*p.w, p.x, batch_of(p), p.y); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  struct Chunk {
    const MatMulProduct* p;
    int64_t r0, r1;
    const cpu::QuantizedActivations* xq;  // x quantized once for the product's integer dots
  };
  // Each input is quantized once per activation format, not once per chunk (the chunks of
  // a product, and products over the same x such as Q/K/V, gate/up or the experts of a
  // decode token, share it).
  struct Quantized {
    const float* x;
    int64_t batch;
    gguf::GgmlType format;
  };
  std::vector<Quantized> quantized;
  std::vector<int>
      xq_of;  // index into impl_.buffers.act_scratch, -1: Matmul quantizes (or not) itself
  for (const MatMulProduct& p : products) {
    const int64_t n = batch_of(p);
    int xq = -1;
    if (n > 0 && cpu::UsesIntegerDots(*p.w, n, impl_.matmul)) {
      const gguf::GgmlType format = cpu::ActivationFormat(p.w->type);
      size_t i = 0;
      while (i < quantized.size() &&
             (quantized[i].x != p.x || quantized[i].batch != n || quantized[i].format != format)) {
        ++i;
      }
      if (i == quantized.size()) {
        if (impl_.buffers.act_scratch.size() <= i) impl_.buffers.act_scratch.resize(i + 1);
        cpu::QuantizeActivations(format, p.x, n, p.w->cols, &impl_.buffers.act_scratch[i]);
        quantized.push_back({p.x, n, format});
      }
      xq = static_cast<int>(i);
    }
    xq_of.push_back(xq);
  }
  std::vector<Chunk> chunks;
  size_t product_index = 0;
  for (const MatMulProduct& p : products) {
    const int i = xq_of[product_index++];
    if (batch_of(p) == 0) continue;
    const cpu::QuantizedActivations* xq = i < 0 ? nullptr : &impl_.buffers.act_scratch[i];
    // About four chunks per thread per product keeps the threads busy to the end; chunks
    // start on panel boundaries (16 rows), where the int8 GEMM can read packed panels (a
    // packed product of a few vectors takes it, quantizing its few rows per chunk: cheaper
    // than a hand-off of its own).
    const int64_t rows = p.w->rows;
    const int64_t per_thread = (rows + 4 * impl_.pool->size() - 1) / (4 * impl_.pool->size());
    const int64_t step = std::max<int64_t>(16, (per_thread + 15) / 16 * 16);
    for (int64_t r = 0; r < rows; r += step) {
      chunks.push_back({&p, r, std::min(rows, r + step), xq});
    }
  }
  // Products too small to repay a hand-off to the threads run on the caller, as cpu::Matmul
  // runs them (the same kernels on the same chunks: the same bits).
  int64_t macs = 0;
  for (const MatMulProduct& p : products) macs += p.w->rows * p.w->cols * batch_of(p);
  std::vector<absl::Status> status(impl_.pool->size());
  auto run = [&](int64_t t, int thread) {
    const Chunk& c = chunks[t];
    absl::Status s = c.xq != nullptr
                         ? cpu::MatmulQuantized(*c.p->w, c.r0, c.r1, *c.xq, c.p->y + c.r0,
                                                c.p->w->rows, nullptr, impl_.matmul)
                         : cpu::Matmul(*c.p->w, c.r0, c.r1, c.p->x, batch_of(*c.p), c.p->y + c.r0,
                                       c.p->w->rows, nullptr, impl_.matmul);
    if (!s.ok()) status[thread] = s;
  };
  if (macs < impl_.matmul.min_parallel_macs) {
    for (size_t t = 0; t < chunks.size(); ++t) run(static_cast<int64_t>(t), 0);
  } else {
    impl_.pool->ParallelFor(static_cast<int64_t>(chunks.size()), run);
  }
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void CpuOps::RoundValues(float* x, int64_t n) const {
  if (impl_.act_dtype == ComputeDtype::kBFloat16) {
    for (int64_t i = 0; i < n; ++i) x[i] = Bf16ToFloat(FloatToBf16(x[i]));
  } else if (impl_.act_dtype == ComputeDtype::kFloat16) {
    for (int64_t i = 0; i < n; ++i) x[i] = Fp16ToFloat(FloatToFp16(x[i]));
  }
}

std::vector<std::vector<float>> CpuOps::TakeLogits() {
  return LogitsBySequence(b_.seqs, logits_, impl_.hp.n_vocab);
}

}  // namespace tessera::executor
