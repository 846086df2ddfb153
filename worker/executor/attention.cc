// Attention: GQA (llama, qwen*, glm4moe), MLA in the absorbed form (deepseek2, glm-dsa) and
// the DSA lightning indexer (glm-dsa). Scores and weighted sums run through the matmul
// kernels, one sequence and one KV head (or the single MLA latent) at a time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "worker/executor/executor_impl.h"

namespace tessera::executor {
namespace {

void AddBias(std::vector<float>& y, const std::vector<float>& bias, int64_t rows) {
  if (bias.empty()) return;
  const size_t n = bias.size();
  for (int64_t t = 0; t < rows; ++t) {
    for (size_t i = 0; i < n; ++i) y[t * n + i] += bias[i];
  }
}

}  // namespace

bool Executor::Impl::AttendInPlace(int64_t new_tokens) const {
  return new_tokens == 1 && !options.exact;
}

cpu::PagedAttentionArgs Executor::Impl::PagedArgs(int layer, const SequenceInput& seq,
                                                  int64_t n_keys) const {
  const KvCacheShape& cs = cache->shape();
  cpu::PagedAttentionArgs a;
  const cpu::KvElem elem = cs.dtype == CacheDtype::kF16    ? cpu::KvElem::kF16
                           : cs.dtype == CacheDtype::kBF16 ? cpu::KvElem::kBF16
                                                           : cpu::KvElem::kF32;
  a.k = {cache->KData(layer), elem, cs.k_width, 0};
  a.v = {cache->VData(layer), elem, cs.v_width, 0};
  a.block_table = seq.block_table.data();
  a.block_size = cs.block_size;
  a.n_keys = n_keys;
  a.scale = attn_scale;
  return a;
}

void Executor::Impl::RunPaged(const std::vector<cpu::PagedAttentionArgs>& calls) {
  if (calls.empty()) return;
  attn_scratch.resize(pool->size());
  int64_t work = 0;
  for (const cpu::PagedAttentionArgs& a : calls) work += a.n_keys * a.nq * (a.dk + a.dv);
  auto run = [&](int64_t t, int thread) { cpu::PagedAttention(calls[t], &attn_scratch[thread]); };
  // Short contexts are cheaper than a hand-off to the threads.
  if (calls.size() == 1 || work < matmul.min_parallel_macs / 4) {
    for (size_t t = 0; t < calls.size(); ++t) run(static_cast<int64_t>(t), 0);
    return;
  }
  pool->ParallelFor(static_cast<int64_t>(calls.size()), run);
}

absl::Status Executor::Impl::AttendRows(const float* q, int64_t nq, int64_t dk, const float* k,
                                        const float* v_t, int64_t dv, int64_t n_keys, float scale,
                                        const std::vector<int64_t>& last,
                                        const std::vector<const char*>* mask, float* out,
                                        int64_t ld_out, cpu::ThreadPool* threads) {
  std::vector<float> scores(nq * n_keys);
  // Float path whatever the options: these are activations, not weights.
  auto float_opts = matmul;
  float_opts.path = cpu::MatmulPath::kFloat;
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

absl::Status Executor::Impl::GqaAttention(int layer, const Batch& b, const std::vector<float>& h,
                                          std::vector<float>& out) {
  const LayerWeights& L = layers[layer];
  const int64_t T = b.size(), d = hp.n_embd;
  // This rank's heads (all of them at tp 1).
  const int64_t dk = hp.head_dim_k, dv = hp.head_dim_v;
  const int64_t H = L.wq.rows / dk, Hkv = L.wk.rows / dk, group = H / Hkv;
  const int half = rope.n_rot / 2;
  std::vector<float> q(T * H * dk), k(T * Hkv * dk), v(T * Hkv * dv);
  if (auto s = MatMulMany(
          {{&L.wq, h.data(), q.data()}, {&L.wk, h.data(), k.data()}, {&L.wv, h.data(), v.data()}},
          T);
      !s.ok()) {
    return s;
  }
  AddBias(q, L.q_bias, T);
  AddBias(k, L.k_bias, T);
  AddBias(v, L.v_bias, T);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t hh = 0; hh < H; ++hh) {
      float* head = &q[(t * H + hh) * dk];
      if (!L.q_norm.empty()) cpu::RmsNorm(head, L.q_norm.data(), dk, hp.rms_eps, head);
      cpu::ApplyRope(head, rope.n_rot, config.rope, &b.cos[t * half], &b.sin[t * half]);
    }
    for (int64_t hh = 0; hh < Hkv; ++hh) {
      float* head = &k[(t * Hkv + hh) * dk];
      if (!L.k_norm.empty()) cpu::RmsNorm(head, L.k_norm.data(), dk, hp.rms_eps, head);
      cpu::ApplyRope(head, rope.n_rot, config.rope, &b.cos[t * half], &b.sin[t * half]);
    }
    cache->Write(layer, b.slot[t], &k[t * Hkv * dk], &v[t * Hkv * dv]);
  }

  std::vector<float> attn(T * H * dv);
  std::vector<cpu::PagedAttentionArgs> paged;
  std::vector<std::pair<size_t, int64_t>> gathered;  // (sequence, KV head)
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const int64_t t0 = b.seq_begin[s], t1 = b.seq_begin[s + 1], nt = t1 - t0;
    const int64_t n_keys = b.pos[t1 - 1] + 1;
    if (AttendInPlace(nt)) {
      // A decode token: each KV head's query group reads the cache where it lies (below,
      // all decode tokens' heads as tasks of the pool).
      for (int64_t g = 0; g < Hkv; ++g) {
        cpu::PagedAttentionArgs a = PagedArgs(layer, b.seqs[s], n_keys);
        a.q = &q[(t0 * H + g * group) * dk];
        a.nq = static_cast<int>(group);
        a.ldq = a.dk = static_cast<int>(dk);
        a.k.offset = g * dk;
        a.v.offset = g * dv;
        a.dv = static_cast<int>(dv);
        a.out = &attn[(t0 * H + g * group) * dv];
        a.ld_out = dv;
        paged.push_back(a);
      }
      continue;
    }
    for (int64_t g = 0; g < Hkv; ++g) gathered.push_back({s, g});
  }
  // Prefill chunks (and every sequence on the exact path): one task per (sequence, KV head)
  // gathers that head's keys and values in position order and attends its query group, on
  // one thread each, so the gathers, softmaxes and products of the heads run side by side.
  std::vector<absl::Status> task_status(pool->size());
  auto attend_group = [&](int64_t task, int thread) {
    const auto [s, g] = gathered[task];
    const int64_t t0 = b.seq_begin[s], t1 = b.seq_begin[s + 1], nt = t1 - t0;
    const int64_t n_keys = b.pos[t1 - 1] + 1;
    std::vector<float> kg(n_keys * dk), vg_t(dv * n_keys), vrow(dv), qg(nt * group * dk),
        og(nt * group * dv);
    for (int64_t p = 0; p < n_keys; ++p) {
      const int64_t slot = cache->Slot(b.seqs[s].block_table, p);
      cache->ReadKPart(layer, slot, static_cast<int>(g * dk), static_cast<int>(dk), &kg[p * dk]);
      cache->ReadVPart(layer, slot, static_cast<int>(g * dv), static_cast<int>(dv), vrow.data());
      for (int64_t i = 0; i < dv; ++i) vg_t[i * n_keys + p] = vrow[i];
    }
    for (int64_t t = 0; t < nt; ++t) {
      for (int64_t j = 0; j < group; ++j) {
        std::copy_n(&q[((t0 + t) * H + g * group + j) * dk], dk, &qg[(t * group + j) * dk]);
      }
    }
    std::vector<int64_t> last(nt * group);
    for (int64_t row = 0; row < nt * group; ++row) last[row] = b.pos[t0 + row / group];
    if (auto st = AttendRows(qg.data(), nt * group, dk, kg.data(), vg_t.data(), dv, n_keys,
                             attn_scale, last, nullptr, og.data(), dv, nullptr);
        !st.ok()) {
      task_status[thread] = st;
      return;
    }
    for (int64_t t = 0; t < nt; ++t) {
      for (int64_t j = 0; j < group; ++j) {
        std::copy_n(&og[(t * group + j) * dv], dv, &attn[((t0 + t) * H + g * group + j) * dv]);
      }
    }
  };
  pool->ParallelFor(static_cast<int64_t>(gathered.size()), attend_group);
  for (const absl::Status& st : task_status) {
    if (!st.ok()) return st;
  }
  RunPaged(paged);
  Round(attn.data(), T * H * dv);
  out.resize(T * d);
  if (auto s = MatMulMany({{&L.wo, attn.data(), out.data()}}, T); !s.ok()) return s;
  if (options.tp_rank == 0) AddBias(out, L.o_bias, T);  // once, before the sum over ranks
  return AllReduce(out);
}

absl::Status Executor::Impl::MlaAttention(int layer, Batch& b, const std::vector<float>& h,
                                          std::vector<float>& out) {
  const LayerWeights& L = layers[layer];
  const int64_t c = hp.kv_lora_rank, r = hp.n_rot, dq = hp.key_length_mla, n = dq - r;
  // This rank's heads (all of them at tp 1).
  const int64_t T = b.size(), d = hp.n_embd,
                H = (hp.q_lora_rank > 0 ? L.wq_b.rows : L.wq.rows) / dq;
  const int64_t v = hp.value_length_mla, ql = hp.q_lora_rank;
  const int half = rope.n_rot / 2;
  const float eps = hp.rms_eps;

  // 1. Query: q = W_UQ RMSNorm(W_DQ x) (or W_Q x); per head [nope n | rope r].
  std::vector<float> c_q, q(T * H * dq);
  if (ql > 0) {
    c_q.resize(T * ql);
    if (auto s = MatMul(L.wq_a, h.data(), T, c_q.data()); !s.ok()) return s;
    for (int64_t t = 0; t < T; ++t)
      cpu::RmsNorm(&c_q[t * ql], L.q_a_norm.data(), ql, eps, &c_q[t * ql]);
    Round(c_q.data(), T * ql);
    if (auto s = MatMul(L.wq_b, c_q.data(), T, q.data()); !s.ok()) return s;
  } else {
    if (auto s = MatMul(L.wq, h.data(), T, q.data()); !s.ok()) return s;
  }
  // 2-4. Latent and shared rope key, normed and roped; cached as [c_KV | k_rope].
  std::vector<float> kv(T * (c + r));
  if (auto s = MatMul(L.wkv_a, h.data(), T, kv.data()); !s.ok()) return s;
  for (int64_t t = 0; t < T; ++t) {
    float* row = &kv[t * (c + r)];
    cpu::RmsNorm(row, L.kv_a_norm.data(), c, eps, row);
    cpu::ApplyRope(row + c, static_cast<int>(r), config.rope, &b.cos[t * half], &b.sin[t * half]);
    for (int64_t hh = 0; hh < H; ++hh) {
      cpu::ApplyRope(&q[(t * H + hh) * dq + n], static_cast<int>(r), config.rope, &b.cos[t * half],
                     &b.sin[t * half]);
    }
    cache->Write(layer, b.slot[t], row, nullptr);
  }
  // 5-6. Absorb W_UK into the query: Q_h = [K_b[h] q_h^nope (c) | q_h^rope (r)].
  std::vector<float> qa(T * H * (c + r)), nope(T * n), tilde(T * c);
  for (int64_t hh = 0; hh < H; ++hh) {
    for (int64_t t = 0; t < T; ++t) std::copy_n(&q[(t * H + hh) * dq], n, &nope[t * n]);
    if (auto s = MatMulRows(L.wk_b, hh * c, (hh + 1) * c, nope.data(), T, tilde.data(), c);
        !s.ok()) {
      return s;
    }
    for (int64_t t = 0; t < T; ++t) {
      float* dst = &qa[(t * H + hh) * (c + r)];
      std::copy_n(&tilde[t * c], c, dst);
      std::copy_n(&q[(t * H + hh) * dq + n], r, dst + c);
    }
  }

  // DSA: which keys each query may attend to (spec 12.4).
  const bool dsa = config.dsa;
  if (dsa && layer < static_cast<int>(hp.indexer_full.size()) && hp.indexer_full[layer]) {
    const auto indexer_start = std::chrono::steady_clock::now();
    absl::Status indexer_status = [&]() -> absl::Status {
      const int64_t HI = hp.indexer_heads, DI = hp.indexer_head_dim;
      std::vector<float> qi(T * HI * DI), ki(T * DI), wi(T * HI);
      if (auto st = MatMul(L.idx_q_b, c_q.data(), T, qi.data()); !st.ok()) return st;
      if (auto st = MatMul(L.idx_k, h.data(), T, ki.data()); !st.ok()) return st;
      if (auto st = MatMulPerVector(L.idx_proj, h.data(), T, wi.data()); !st.ok()) return st;
      const float w_scale = 1.0f / std::sqrt(static_cast<float>(DI * HI));
      for (int64_t t = 0; t < T; ++t) {
        float* key = &ki[t * DI];
        // LayerNorm eps 1e-6 (spec 12.4 / 17.2); RoPE on the first n_rot dims.
        cpu::LayerNorm(key, L.idx_k_norm_w.data(), L.idx_k_norm_b.data(), DI, 1e-6f, key);
        cpu::ApplyRope(key, static_cast<int>(r), config.rope, &b.cos[t * half], &b.sin[t * half]);
        for (int64_t hh = 0; hh < HI; ++hh) {
          cpu::ApplyRope(&qi[(t * HI + hh) * DI], static_cast<int>(r), config.rope,
                         &b.cos[t * half], &b.sin[t * half]);
        }
        for (int64_t hh = 0; hh < HI; ++hh) wi[t * HI + hh] *= w_scale;
        indexer_cache->Write(layer, b.slot[t], key, nullptr);
      }
      auto float_opts = matmul;
      float_opts.path = cpu::MatmulPath::kFloat;
      for (size_t s = 0; s < b.seqs.size(); ++s) {
        const int64_t t0 = b.seq_begin[s], t1 = b.seq_begin[s + 1], nt = t1 - t0;
        const int64_t n_keys = b.pos[t1 - 1] + 1;
        std::vector<float> keys(n_keys * DI), dots(nt * HI * n_keys);
        for (int64_t p = 0; p < n_keys; ++p) {
          indexer_cache->ReadK(layer, indexer_cache->Slot(b.seqs[s].block_table, p), &keys[p * DI]);
        }
        if (auto st =
                cpu::Matmul(FloatMatrix(keys.data(), n_keys, DI), 0, n_keys, &qi[t0 * HI * DI],
                            nt * HI, dots.data(), n_keys, pool.get(), float_opts);
            !st.ok()) {
          return st;
        }
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
    }();
    // Reported on its own and taken out of "attention", which times the whole call.
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - indexer_start).count();
    profile["indexer"] += secs;
    profile["attention"] -= secs;
    if (!indexer_status.ok()) return indexer_status;
  }
  if (dsa && b.trace != nullptr) b.trace->dsa_keys[layer] = b.dsa_keep;

  // 7. Attention of every head against the single latent K = [c_KV | k_rope], V = c_KV.
  std::vector<float> a(T * H * c);
  const KvCacheShape& cs = cache->shape();
  std::vector<cpu::PagedAttentionArgs> paged;
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const int64_t t0 = b.seq_begin[s], t1 = b.seq_begin[s + 1], nt = t1 - t0;
    const int64_t n_keys = b.pos[t1 - 1] + 1;
    if (!dsa && AttendInPlace(nt)) {
      // A decode token: every head against the latent rows where they lie (V = the first c
      // values of each K row).
      cpu::PagedAttentionArgs pa = PagedArgs(layer, b.seqs[s], n_keys);
      pa.q = &qa[t0 * H * (c + r)];
      pa.nq = static_cast<int>(H);
      pa.ldq = pa.dk = static_cast<int>(c + r);
      pa.v = pa.k;
      pa.dv = static_cast<int>(c);
      pa.out = &a[t0 * H * c];
      pa.ld_out = c;
      paged.push_back(pa);
      continue;
    }
    std::vector<float> krows(n_keys * cs.k_width), c_t(c * n_keys);
    for (int64_t p = 0; p < n_keys; ++p) {
      cache->ReadK(layer, cache->Slot(b.seqs[s].block_table, p), &krows[p * cs.k_width]);
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
    const int64_t pieces = std::min<int64_t>(rows, 4 * pool->size());
    std::vector<absl::Status> piece_status(pool->size());
    pool->ParallelFor(pieces, [&](int64_t piece, int thread) {
      const int64_t r0 = rows * piece / pieces, r1 = rows * (piece + 1) / pieces;
      const std::vector<int64_t> piece_last(last.begin() + r0, last.begin() + r1);
      std::vector<const char*> piece_mask;
      if (dsa) piece_mask.assign(row_mask.begin() + r0, row_mask.begin() + r1);
      absl::Status st = AttendRows(&qa[(t0 * H + r0) * (c + r)], r1 - r0, c + r, krows.data(),
                                   c_t.data(), c, n_keys, attn_scale, piece_last,
                                   dsa ? &piece_mask : nullptr, &a[(t0 * H + r0) * c], c, nullptr);
      if (!st.ok()) piece_status[thread] = st;
    });
    for (const absl::Status& st : piece_status) {
      if (!st.ok()) return st;
    }
  }
  RunPaged(paged);
  // 8. Decompress per head with W_UV, 9. output projection.
  std::vector<float> o(T * H * v), ah(T * c);
  for (int64_t hh = 0; hh < H; ++hh) {
    for (int64_t t = 0; t < T; ++t) std::copy_n(&a[(t * H + hh) * c], c, &ah[t * c]);
    if (auto s = MatMulRows(L.wv_b, hh * v, (hh + 1) * v, ah.data(), T, &o[hh * v], H * v);
        !s.ok()) {
      return s;
    }
  }
  Round(o.data(), T * H * v);
  out.resize(T * d);
  if (auto s = MatMul(L.wo, o.data(), T, out.data()); !s.ok()) return s;
  return AllReduce(out);
}

}  // namespace tessera::executor
