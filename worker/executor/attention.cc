// Attention on the CPU (CpuOps): the paged cache's writes, GQA heads (llama, qwen*, glm4moe)
// and the MLA latent (deepseek2, glm-dsa) attended over it, and the DSA lightning
// indexer's cache and selection (glm-dsa). Decode tokens read the cache in place
// (cpu::PagedAttention); prefill chunks gather their keys and values and multiply them as
// matrices, one sequence and one KV head (or the single latent) at a time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "worker/executor/cpu_ops.h"

namespace tessera::executor {
bool CpuOps::AttendInPlace(const SequenceInput& seq, int64_t new_tokens) const {
  return ((new_tokens == 1 && !seq.prefill) || seq.rows_as_decodes) && !impl_.options.exact;
}

cpu::PagedAttentionArgs CpuOps::PagedArgs(int layer, const SequenceInput& seq,
                                          int64_t n_keys) const {
  const KvCacheShape& cs = impl_.cache->shape();
  cpu::PagedAttentionArgs a;
  const cpu::KvElem elem = cs.dtype == CacheDtype::kF16    ? cpu::KvElem::kF16
                           : cs.dtype == CacheDtype::kBF16 ? cpu::KvElem::kBF16
                                                           : cpu::KvElem::kF32;
  a.k = {impl_.cache->KData(layer), elem, cs.k_width, 0};
  a.v = {impl_.cache->VData(layer), elem, cs.v_width, 0};
  a.block_table = seq.block_table.data();
  a.block_size = cs.block_size;
  a.n_keys = n_keys;
  a.scale = impl_.attn_scale;
  return a;
}

void CpuOps::RunPaged(const std::vector<cpu::PagedAttentionArgs>& calls) {
  if (calls.empty()) return;
  impl_.buffers.attn_scratch.resize(impl_.pool->size());
  int64_t work = 0;
  for (const cpu::PagedAttentionArgs& a : calls) work += a.n_keys * a.nq * (a.dk + a.dv);
  auto run = [&](int64_t t, int thread) {
    cpu::PagedAttention(calls[t], &impl_.buffers.attn_scratch[thread]);
  };
  // Short contexts are cheaper than a hand-off to the threads.
  if (calls.size() == 1 || work < impl_.matmul.min_parallel_macs / 4) {
    for (size_t t = 0; t < calls.size(); ++t) run(static_cast<int64_t>(t), 0);
    return;
  }
  impl_.pool->ParallelFor(static_cast<int64_t>(calls.size()), run);
}

cpu::MatmulOptions CpuOps::ActivationProductOptions() const {
  // Float path whatever the options: these are activations, not weights.
  cpu::MatmulOptions o = impl_.matmul;
  o.path = cpu::MatmulPath::kFloat;
  o.kernel_batch = cpu::kPrefillBatch;
  return o;
}

absl::Status CpuOps::AttendRows(const float* q, int64_t nq, int64_t dk, const float* k,
                                const float* v_t, int64_t dv, int64_t n_keys, float scale,
                                const std::vector<int64_t>& last,
                                const std::vector<const char*>* mask, float* out, int64_t ld_out,
                                cpu::ThreadPool* threads) {
  std::vector<float> scores(nq * n_keys);
  const cpu::MatmulOptions float_opts = ActivationProductOptions();
  if (auto s = cpu::Matmul(FloatMatrix(k, n_keys, dk), 0, n_keys, q, nq, scores.data(), n_keys,
                           threads, float_opts);
      !s.ok()) {
    return s;
  }
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < nq; ++r) {
    float* row = &scores[r * n_keys];
    const int64_t n = last[r] + 1;
    for (int64_t j = 0; j < n; ++j) row[j] *= scale;
    if (mask != nullptr) {
      const char* m = (*mask)[r];
      for (int64_t j = 0; j < n; ++j) {
        if (!m[j]) row[j] = neg_inf;
      }
    }
    cpu::Softmax(row, n);
    std::fill(row + n, row + n_keys, 0.0f);
  }
  return cpu::Matmul(FloatMatrix(v_t, dv, n_keys), 0, dv, scores.data(), nq, out, ld_out, threads,
                     float_opts);
}

absl::Status CpuOps::WriteKv(int layer, const AttentionShape&, Act k, Act v) {
  for (int64_t t = 0; t < k.rows; ++t) {
    impl_.cache->Write(layer, b_.slot[t], Row(k, t), v.empty() ? nullptr : Row(v, t),
                       static_cast<int>(k.cols), v.empty() ? 0 : static_cast<int>(v.cols));
  }
  return absl::OkStatus();
}

absl::Status CpuOps::Attend(int layer, const AttentionShape& shape, Act q, Act out) {
  TESSERA_RETURN_IF_ERROR(shape.latent ? AttendLatent(layer, shape, q, out)
                                       : AttendGqa(layer, shape, q, out));
  Round(out);
  return absl::OkStatus();
}

absl::Status CpuOps::AttendGqa(int layer, const AttentionShape& shape, Act q_act, Act out) {
  const Batch& b = b_;
  const int64_t dk = shape.d_k, dv = shape.d_v, H = shape.heads, Hkv = shape.kv_heads;
  const float* q = static_cast<const float*>(q_act.data);
  float* attn = static_cast<float*>(out.data);
  PagedKvCache& cache = *impl_.cache;
  std::vector<cpu::PagedAttentionArgs> paged;
  std::vector<std::pair<size_t, int64_t>> gathered;  // (sequence, KV head)
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const int64_t t0 = b.seq_begin[s], t1 = b.seq_begin[s + 1], nt = t1 - t0;
    if (AttendInPlace(b.seqs[s], nt)) {
      // Decode tokens: each KV head's query group reads the cache where it lies, up to the
      // token's own position (below, all such heads as tasks of the pool).
      for (int64_t t = t0; t < t1; ++t) {
        for (int64_t g = 0; g < Hkv; ++g) {
          // KV head g's query heads (a whole group, unless the rank's heads cut one).
          const auto [h0, h1] = shape.QueryHeadsOf(g);
          if (h1 <= h0) continue;
          cpu::PagedAttentionArgs a = PagedArgs(layer, b.seqs[s], b.pos[t] + 1);
          a.q = &q[(t * H + h0) * dk];
          a.nq = static_cast<int>(h1 - h0);
          a.ldq = a.dk = static_cast<int>(dk);
          a.k.offset = g * dk;
          a.v.offset = g * dv;
          a.dv = static_cast<int>(dv);
          a.out = &attn[(t * H + h0) * dv];
          a.ld_out = dv;
          paged.push_back(a);
        }
      }
      continue;
    }
    for (int64_t g = 0; g < Hkv; ++g) gathered.push_back({s, g});
  }
  // Prefill chunks (and every sequence on the exact path): one task per (sequence, KV head)
  // gathers that head's keys and values in position order and attends its query group, on
  // one thread each, so the gathers, softmaxes and products of the heads run side by side.
  cpu::ThreadPool& pool = *impl_.pool;
  std::vector<absl::Status> task_status(pool.size());
  auto attend_group = [&](int64_t task, int thread) {
    const auto [s, g] = gathered[task];
    const auto [h0, h1] = shape.QueryHeadsOf(g);
    const int64_t group = h1 - h0;
    if (group <= 0) return;
    const int64_t t0 = b.seq_begin[s], t1 = b.seq_begin[s + 1], nt = t1 - t0;
    const int64_t n_keys = b.pos[t1 - 1] + 1;
    std::vector<float> kg(n_keys * dk), vg_t(dv * n_keys), vrow(dv), qg(nt * group * dk),
        og(nt * group * dv);
    for (int64_t p = 0; p < n_keys; ++p) {
      const int64_t slot = cache.Slot(b.seqs[s].block_table, p);
      cache.ReadKPart(layer, slot, static_cast<int>(g * dk), static_cast<int>(dk), &kg[p * dk]);
      cache.ReadVPart(layer, slot, static_cast<int>(g * dv), static_cast<int>(dv), vrow.data());
      for (int64_t i = 0; i < dv; ++i) vg_t[i * n_keys + p] = vrow[i];
    }
    for (int64_t t = 0; t < nt; ++t) {
      for (int64_t j = 0; j < group; ++j) {
        std::copy_n(&q[((t0 + t) * H + h0 + j) * dk], dk, &qg[(t * group + j) * dk]);
      }
    }
    std::vector<int64_t> last(nt * group);
    for (int64_t row = 0; row < nt * group; ++row) last[row] = b.pos[t0 + row / group];
    if (auto st = AttendRows(qg.data(), nt * group, dk, kg.data(), vg_t.data(), dv, n_keys,
                             impl_.attn_scale, last, nullptr, og.data(), dv, nullptr);
        !st.ok()) {
      task_status[thread] = st;
      return;
    }
    for (int64_t t = 0; t < nt; ++t) {
      for (int64_t j = 0; j < group; ++j) {
        std::copy_n(&og[(t * group + j) * dv], dv, &attn[((t0 + t) * H + h0 + j) * dv]);
      }
    }
  };
  pool.ParallelFor(static_cast<int64_t>(gathered.size()), attend_group);
  for (const absl::Status& st : task_status) {
    if (!st.ok()) return st;
  }
  RunPaged(paged);
  return absl::OkStatus();
}

absl::Status CpuOps::AttendLatent(int layer, const AttentionShape& shape, Act q_act, Act out) {
  Batch& b = b_;
  const int64_t H = shape.heads, c = shape.d_v, dk = shape.d_k;  // dk = c + r
  const bool dsa = shape.sparse;
  const float* qa = static_cast<const float*>(q_act.data);
  float* a = static_cast<float*>(out.data);
  PagedKvCache& cache = *impl_.cache;
  const KvCacheShape& cs = cache.shape();
  cpu::ThreadPool& pool = *impl_.pool;
  std::vector<cpu::PagedAttentionArgs> paged;
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const int64_t t0 = b.seq_begin[s], t1 = b.seq_begin[s + 1], nt = t1 - t0;
    const int64_t n_keys = b.pos[t1 - 1] + 1;
    if (!dsa && AttendInPlace(b.seqs[s], nt)) {
      // Decode tokens: every head against the latent rows where they lie, up to the token's
      // own position (V = the first c values of each K row).
      for (int64_t t = t0; t < t1; ++t) {
        cpu::PagedAttentionArgs pa = PagedArgs(layer, b.seqs[s], b.pos[t] + 1);
        pa.q = &qa[t * H * dk];
        pa.nq = static_cast<int>(H);
        pa.ldq = pa.dk = static_cast<int>(dk);
        pa.v = pa.k;
        pa.dv = static_cast<int>(c);
        pa.out = &a[t * H * c];
        pa.ld_out = c;
        paged.push_back(pa);
      }
      continue;
    }
    std::vector<float> krows(n_keys * cs.k_width), c_t(c * n_keys);
    for (int64_t p = 0; p < n_keys; ++p) {
      cache.ReadK(layer, cache.Slot(b.seqs[s].block_table, p), &krows[p * cs.k_width]);
      for (int64_t i = 0; i < c; ++i) c_t[i * n_keys + p] = krows[p * cs.k_width + i];
    }
    // Visibility: causal, and for DSA only the kept keys.
    std::vector<std::vector<char>> keep_mask;
    std::vector<const char*> row_mask;
    std::vector<int64_t> last(nt * H);
    for (int64_t row = 0; row < nt * H; ++row) last[row] = b.pos[t0 + row / H];
    if (dsa) {
      keep_mask.assign(nt, std::vector<char>(n_keys, 0));
      for (int64_t t = 0; t < nt; ++t) {
        for (int32_t j : b.dsa_keep[t0 + t]) keep_mask[t][j] = 1;
      }
      for (int64_t row = 0; row < nt * H; ++row) row_mask.push_back(keep_mask[row / H].data());
    }
    // The query rows (tokens x heads) in pieces over the threads, against the one latent.
    const int64_t rows = nt * H;
    const int64_t pieces = std::min<int64_t>(rows, 4 * pool.size());
    std::vector<absl::Status> piece_status(pool.size());
    pool.ParallelFor(pieces, [&](int64_t piece, int thread) {
      const int64_t r0 = rows * piece / pieces, r1 = rows * (piece + 1) / pieces;
      const std::vector<int64_t> piece_last(last.begin() + r0, last.begin() + r1);
      std::vector<const char*> piece_mask;
      if (dsa) piece_mask.assign(row_mask.begin() + r0, row_mask.begin() + r1);
      absl::Status st = AttendRows(&qa[(t0 * H + r0) * dk], r1 - r0, dk, krows.data(), c_t.data(),
                                   c, n_keys, impl_.attn_scale, piece_last,
                                   dsa ? &piece_mask : nullptr, &a[(t0 * H + r0) * c], c, nullptr);
      if (!st.ok()) piece_status[thread] = st;
    });
    for (const absl::Status& st : piece_status) {
      if (!st.ok()) return st;
    }
  }
  RunPaged(paged);
  return absl::OkStatus();
}

absl::Status CpuOps::WriteIndexKeys(int layer, Act k) {
  for (int64_t t = 0; t < k.rows; ++t)
    impl_.indexer_cache->Write(layer, b_.slot[t], Row(k, t), nullptr);
  return absl::OkStatus();
}

absl::Status CpuOps::SelectKeys(int layer, Act q, Act w) {
  Batch& b = b_;
  const model::HyperParams& hp = impl_.hp;
  const int64_t HI = hp.indexer_heads, DI = hp.indexer_head_dim;
  const float* qi = static_cast<const float*>(q.data);
  const float* wi = static_cast<const float*>(w.data);
  PagedKvCache& index = *impl_.indexer_cache;
  const cpu::MatmulOptions float_opts = ActivationProductOptions();
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const int64_t t0 = b.seq_begin[s], t1 = b.seq_begin[s + 1], nt = t1 - t0;
    const int64_t n_keys = b.pos[t1 - 1] + 1;
    std::vector<float> keys(n_keys * DI), dots(nt * HI * n_keys);
    for (int64_t p = 0; p < n_keys; ++p) {
      index.ReadK(layer, index.Slot(b.seqs[s].block_table, p), &keys[p * DI]);
    }
    TESSERA_RETURN_IF_ERROR(cpu::Matmul(FloatMatrix(keys.data(), n_keys, DI), 0, n_keys,
                                        &qi[t0 * HI * DI], nt * HI, dots.data(), n_keys,
                                        impl_.pool.get(), float_opts));
    for (int64_t t = 0; t < nt; ++t) {
      const int64_t visible = b.pos[t0 + t] + 1;
      const int64_t k = std::min<int64_t>(hp.indexer_top_k, visible);
      std::vector<std::pair<float, int32_t>> score(visible);
      for (int64_t j = 0; j < visible; ++j) {
        double acc = 0;
        for (int64_t hh = 0; hh < HI; ++hh) {
          acc += wi[(t0 + t) * HI + hh] * std::max(0.0f, dots[(t * HI + hh) * n_keys + j]);
        }
        score[j] = {static_cast<float>(acc), static_cast<int32_t>(j)};
      }
      std::partial_sort(score.begin(), score.begin() + k, score.end(), [](auto& x, auto& y) {
        return x.first != y.first ? x.first > y.first : x.second < y.second;
      });
      std::vector<int32_t>& keep = b.dsa_keep[t0 + t];
      keep.clear();
      for (int64_t i = 0; i < k; ++i) keep.push_back(score[i].second);
      std::sort(keep.begin(), keep.end());
    }
  }
  return absl::OkStatus();
}

absl::Status CpuOps::TraceSelection(int layer) {
  if (b_.trace != nullptr) b_.trace->dsa_keys[layer] = b_.dsa_keep;
  return absl::OkStatus();
}

}  // namespace tessera::executor
