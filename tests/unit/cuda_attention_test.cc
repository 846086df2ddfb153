// GPU paged attention (GQA, MLA latent, DSA selection) and the DSA indexer scores against
// float64 computations of spec 5.4 / 10.3 / 12.4 written out below. Label `gpu`.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/launcher_checks.h"
#include "tests/unit/cuda_test_util.h"

namespace tessera::cuda {
namespace {

using testing::Decode;
using testing::DeviceBuffer;
using testing::Encode;
using testing::Epsilon;
using testing::kSimtEmulator;
using testing::RandomVector;
using testing::Round;

// A paged cache laid out [block][slot][kv_head][width] with a shuffled block table.
struct Layout {
  int sequences, max_blocks, block_size, kv_heads, width;
  std::vector<int32_t> table;  // [sequences, max_blocks]
  int64_t Offset(int seq, int pos, int head) const {
    const int64_t block = table[seq * max_blocks + pos / block_size];
    return ((block * block_size + pos % block_size) * kv_heads + head) * width;
  }
};

Layout MakeLayout(int sequences, int max_blocks, int block_size, int kv_heads, int width,
                  std::mt19937_64& rng) {
  Layout l{sequences, max_blocks, block_size, kv_heads, width, {}};
  l.table.resize(sequences * max_blocks);
  std::iota(l.table.begin(), l.table.end(), 0);
  std::shuffle(l.table.begin(), l.table.end(), rng);
  return l;
}

struct Query {
  int seq, kv_len;
  std::vector<int32_t> selected;  // empty: all visible keys
};

// o_h = Σ_t softmax(scale q_h·k_t) v_t over the visible (and selected) keys, float64. Query
// head h uses KV head h / (heads / kv_heads), or for a rank's heads from head0 in groups of
// `group`, (head0 + h) / group − head0 / group.
std::vector<double> Reference(const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, const Layout& kl, const Layout& vl,
                              const std::vector<Query>& queries, int heads, int d_k, int d_v,
                              float scale, int head0 = 0, int group = 0) {
  std::vector<double> out;
  for (size_t qi = 0; qi < queries.size(); ++qi) {
    const Query& query = queries[qi];
    std::vector<int> keys;
    if (query.selected.empty()) {
      for (int p = 0; p < query.kv_len; ++p) keys.push_back(p);
    } else {
      for (int p : query.selected) {
        if (p >= 0 && p < query.kv_len) keys.push_back(p);
      }
    }
    for (int h = 0; h < heads; ++h) {
      const int g = group > 0 ? (head0 + h) / group - head0 / group : h / (heads / kl.kv_heads);
      std::vector<double> s;
      for (int p : keys) {
        double dot = 0;
        for (int i = 0; i < d_k; ++i) {
          dot += static_cast<double>(q[(qi * heads + h) * d_k + i]) *
                 k[kl.Offset(query.seq, p, g) + i];
        }
        s.push_back(dot * scale);
      }
      const double m = s.empty() ? 0 : *std::max_element(s.begin(), s.end());
      double z = 0;
      for (double& x : s) z += (x = std::exp(x - m));
      for (int i = 0; i < d_v; ++i) {
        double o = 0;
        for (size_t t = 0; t < keys.size(); ++t)
          o += s[t] / z * v[vl.Offset(query.seq, keys[t], g) + i];
        out.push_back(keys.empty() ? 0.0 : o);
      }
    }
  }
  return out;
}

void Upload(const std::vector<Query>& queries, std::vector<int32_t>* seq, std::vector<int32_t>* len,
            std::vector<int32_t>* selected, int per_query) {
  for (const Query& q : queries) {
    seq->push_back(q.seq);
    len->push_back(q.kv_len);
    for (int i = 0; i < per_query; ++i) {
      selected->push_back(i < static_cast<int>(q.selected.size()) ? q.selected[i] : -1);
    }
  }
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, DType dt) {
  ASSERT_EQ(got.size(), want.size());
  int failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = Epsilon(dt) * std::fabs(want[i]) + 2e-5;
    if (!(std::fabs(got[i] - want[i]) <= bound) && failures++ < 5) {
      ADD_FAILURE() << "output " << i << ": gpu " << got[i] << ", float64 " << want[i];
    }
  }
  EXPECT_EQ(failures, 0);
}

class CudaAttention : public testing::GpuTest {};

TEST_F(CudaAttention, GqaOverAPagedCache) {
  std::mt19937_64 rng(20);
  const int heads = 8, kv_heads = 2, d = 128, block_size = 16;
  const Layout l = MakeLayout(2, 6, block_size, kv_heads, d, rng);
  // Decode queries (all keys visible), a prefill-style causal query, and an empty one.
  const std::vector<Query> queries = {{0, 37, {}}, {1, 96, {}}, {1, 5, {}}, {0, 0, {}}};
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dt));
    const size_t cache = static_cast<size_t>(2 * 6) * block_size * kv_heads * d;
    const std::vector<float> k = Round(RandomVector(cache, rng), dt);
    const std::vector<float> v = Round(RandomVector(cache, rng), dt);
    const std::vector<float> q = Round(RandomVector(queries.size() * heads * d, rng), dt);
    std::vector<int32_t> seq, len, sel;
    Upload(queries, &seq, &len, &sel, 0);
    DeviceBuffer dq(Encode(q, dt)), dk(Encode(k, dt)), dv(Encode(v, dt)), dtable(l.table),
        dseq(seq), dlen(len), dout(queries.size() * heads * d * DTypeBytes(dt));
    PagedAttentionArgs a;
    a.queries = static_cast<int64_t>(queries.size());
    a.heads = heads;
    a.kv_heads = kv_heads;
    a.d_k = a.d_v = d;
    a.block_size = block_size;
    a.scale = scale;
    a.q = dq.get();
    a.q_token_stride = heads * d;
    a.out = dout.get();
    a.out_token_stride = heads * d;
    a.k = {dk.get(), static_cast<int64_t>(block_size) * kv_heads * d, kv_heads * d, d};
    a.v = {dv.get(), static_cast<int64_t>(block_size) * kv_heads * d, kv_heads * d, d};
    a.block_table = dtable.as<int32_t>();
    a.max_blocks = 6;
    a.query_seq = dseq.as<int32_t>();
    a.query_kv_len = dlen.as<int32_t>();
    ASSERT_TRUE(PagedAttention(a, dt, nullptr).ok());
    Sync();
    ExpectClose(Decode(dout.Download<uint8_t>(queries.size() * heads * d * DTypeBytes(dt)), dt),
                Reference(q, k, v, l, l, queries, heads, d, d, scale), dt);
  }
}

TEST_F(CudaAttention, MlaLatentCacheWithDsaSelection) {
  std::mt19937_64 rng(21);
  const int heads = 16, c = 512, r = 64, block_size = 64;
  const Layout l = MakeLayout(1, 4, block_size, 1, c + r, rng);
  std::vector<int32_t> chosen(200);
  std::iota(chosen.begin(), chosen.end(), 0);
  std::shuffle(chosen.begin(), chosen.end(), rng);
  chosen.resize(48);
  chosen[3] = -1;   // unused slot
  chosen[7] = 250;  // beyond the query's visible keys: ignored
  const std::vector<Query> dense = {{0, 200, {}}, {0, 130, {}}};
  const std::vector<Query> sparse = {{0, 200, chosen}, {0, 130, chosen}};
  const float scale = 0.13524f;  // DeepSeek-V3's (spec 10.6)
  const size_t cache = static_cast<size_t>(4) * block_size * (c + r);
  const std::vector<float> kv = RandomVector(cache, rng);
  const std::vector<float> q = RandomVector(2 * heads * (c + r), rng);
  for (const std::vector<Query>* queries : {&dense, &sparse}) {
    const int per_query = queries == &sparse ? 48 : 0;
    SCOPED_TRACE(per_query ? "DSA selection" : "dense");
    std::vector<int32_t> seq, len, sel;
    Upload(*queries, &seq, &len, &sel, per_query);
    DeviceBuffer dq(q), dkv(kv), dtable(l.table), dseq(seq), dlen(len), dsel(sel),
        dout(2 * heads * c * 4);
    PagedAttentionArgs a;
    a.queries = 2;
    a.heads = heads;
    a.kv_heads = 1;
    a.d_k = c + r;
    a.d_v = c;
    a.block_size = block_size;
    a.scale = scale;
    a.q = dq.get();
    a.q_token_stride = heads * (c + r);
    a.out = dout.get();
    a.out_token_stride = heads * c;
    a.k = a.v = {dkv.get(), static_cast<int64_t>(block_size) * (c + r), c + r, 0};
    a.block_table = dtable.as<int32_t>();
    a.max_blocks = 4;
    a.query_seq = dseq.as<int32_t>();
    a.query_kv_len = dlen.as<int32_t>();
    if (per_query) {
      a.selected = dsel.as<int32_t>();
      a.selected_per_query = per_query;
    }
    ASSERT_TRUE(PagedAttention(a, DType::kF32, nullptr).ok());
    Sync();
    // The value is the first c entries of the cached latent key.
    ExpectClose(dout.Download<float>(2 * heads * c),
                Reference(q, kv, kv, l, l, *queries, heads, c + r, c, scale), DType::kF32);
  }
}

// The heads and widths of an attention case: GQA over kv_heads (a rank's range from head0 in
// groups of `group`, or 0: whole groups), or MLA's latent (values = the keys' first d_v).
struct HeadShape {
  int heads, kv_heads, d_k, d_v, head0, group;
  bool latent;
};

// Arguments for queries in dq over caches laid out as MakeLayout's ([block][slot][kv head]
// [width]; the latent: one head of d_k), scale 1/√d_k; `out` and any selection left to set.
PagedAttentionArgs CacheArgs(const HeadShape& s, int64_t queries, int block_size, int max_blocks,
                             const DeviceBuffer& dq, const DeviceBuffer& dk, const DeviceBuffer& dv,
                             const DeviceBuffer& dtable, const DeviceBuffer& dseq,
                             const DeviceBuffer& dlen) {
  PagedAttentionArgs a;
  a.queries = queries;
  a.heads = s.heads;
  a.kv_heads = s.kv_heads;
  a.d_k = s.d_k;
  a.d_v = s.d_v;
  a.head0 = s.head0;
  a.group = s.group;
  a.block_size = block_size;
  a.scale = 1.0f / std::sqrt(static_cast<float>(s.d_k));
  a.q = dq.get();
  a.q_token_stride = static_cast<int64_t>(s.heads) * s.d_k;
  a.out_token_stride = static_cast<int64_t>(s.heads) * s.d_v;
  if (s.latent) {
    a.k = a.v = {dk.get(), static_cast<int64_t>(block_size) * s.d_k, s.d_k, 0};
  } else {
    const int64_t k_width = static_cast<int64_t>(s.kv_heads) * s.d_k;
    const int64_t v_width = static_cast<int64_t>(s.kv_heads) * s.d_v;
    a.k = {dk.get(), block_size * k_width, k_width, s.d_k};
    a.v = {dv.get(), block_size * v_width, v_width, s.d_v};
  }
  a.block_table = dtable.as<int32_t>();
  a.max_blocks = max_blocks;
  a.query_seq = dseq.as<int32_t>();
  a.query_kv_len = dlen.as<int32_t>();
  return a;
}

// A causal prompt of T queries of one sequence after `past` cached tokens (as a later prompt
// chunk sees them) over a shuffled block table: random queries, keys and values rounded to
// dt, on the device, and the arguments over them (`out` left to set).
struct Prompt {
  Prompt(const HeadShape& s, int T, int past, int block_size, DType dt, std::mt19937_64& rng)
      : max_blocks((past + T + block_size - 1) / block_size + 1),
        kl(MakeLayout(1, max_blocks, block_size, s.kv_heads, s.d_k, rng)),
        vl(WithWidth(kl, s.d_v)),
        k(Round(RandomVector(Slots(s, block_size) * s.d_k, rng), dt)),
        v(s.latent ? k : Round(RandomVector(Slots(s, block_size) * s.d_v, rng), dt)),
        q(Round(RandomVector(int64_t{T} * s.heads * s.d_k, rng), dt)),
        queries(Causal(T, past)),
        out_bytes(static_cast<size_t>(T) * s.heads * s.d_v * DTypeBytes(dt)),
        dq(Encode(q, dt)),
        dk(Encode(k, dt)),
        dv(Encode(v, dt)),
        dtable(kl.table),
        dseq(std::vector<int32_t>(T, 0)),
        dlen(Lengths(queries)),
        args(CacheArgs(s, T, block_size, max_blocks, dq, dk, dv, dtable, dseq, dlen)) {}

  static Layout WithWidth(Layout l, int width) {
    l.width = width;
    return l;
  }
  size_t Slots(const HeadShape& s, int block_size) const {
    return static_cast<size_t>(max_blocks) * block_size * s.kv_heads;
  }
  static std::vector<Query> Causal(int T, int past) {
    std::vector<Query> out;
    for (int i = 0; i < T; ++i) out.push_back({0, past + i + 1, {}});
    return out;
  }
  static std::vector<int32_t> Lengths(const std::vector<Query>& queries) {
    std::vector<int32_t> out;
    for (const Query& q : queries) out.push_back(q.kv_len);
    return out;
  }

  int max_blocks;
  Layout kl, vl;
  std::vector<float> k, v, q;
  std::vector<Query> queries;
  size_t out_bytes;
  DeviceBuffer dq, dk, dv, dtable, dseq, dlen;
  PagedAttentionArgs args;
};

// The tiled prefill kernel: a causal prompt of T queries of one sequence (after `past` cached
// tokens, as a later prompt chunk sees them) over a paged cache with a shuffled block table,
// against the float64 attention and against the per-query kernel (float32 reassociation
// apart, the same), for GQA (whole groups, and a tensor-parallel rank's heads 2..4 in groups
// of 4) and MLA's latent (values inside the keys), at lengths around the tiles' 16 and up to
// 4,096 (that one against the per-query kernel only).
struct PromptCase {
  const char* name;
  HeadShape shape;
  std::vector<int> lengths;
};

TEST_F(CudaAttention, TiledPrefillEqualsPerQueryAndFloat64) {
  std::mt19937_64 rng(23);
  // A long prompt against the per-query kernel only (float64 would take minutes): 4,096
  // tokens, or 1,029 (not a multiple of the tile) on the SIMT emulator.
  const int kLong = kSimtEmulator ? 1029 : 4096;
  const std::vector<PromptCase> cases = {
      {"gqa 8/2 x 128", {8, 2, 128, 128, 0, 0, false}, {1, 15, 16, 17, 100}},
      {"gqa tp heads 2..4 of groups of 4", {3, 2, 64, 64, 2, 4, false}, {33, 70}},
      {"mla 576/512", {4, 1, 576, 512, 0, 0, true}, {17, 130}},
      {"gqa 1/1 x 32, long", {1, 1, 32, 32, 0, 0, false}, {kLong}},
  };
  const int block_size = 16, past = 5;
  for (const PromptCase& pc : cases) {
    const HeadShape& tc = pc.shape;
    for (int T : pc.lengths) {
      for (DType dt : {DType::kF32, DType::kBF16}) {
        if (T == kLong && dt != DType::kF32) continue;
        SCOPED_TRACE(::testing::Message() << pc.name << " T " << T << " " << DTypeName(dt));
        const Prompt pr(tc, T, past, block_size, dt, rng);
        const int k_width = tc.latent ? tc.d_k : tc.kv_heads * tc.d_k;
        const size_t cache = static_cast<size_t>(pr.max_blocks) * block_size * k_width;
        const std::vector<float>&q = pr.q, &k = pr.k, &v = pr.v;
        const std::vector<Query>& queries = pr.queries;
        const Layout &kl = pr.kl, &vl = pr.vl;
        const size_t out_bytes = pr.out_bytes;
        DeviceBuffer dtiled(out_bytes), dplain(out_bytes);
        PagedAttentionArgs a = pr.args;
        a.out = dtiled.get();
        ASSERT_TRUE(PagedAttentionTiled(a, dt, nullptr).ok());
        a.out = dplain.get();
        ASSERT_TRUE(PagedAttention(a, dt, nullptr).ok());
        Sync();
        const std::vector<float> tiled = Decode(dtiled.Download<uint8_t>(out_bytes), dt);
        const std::vector<float> plain = Decode(dplain.Download<uint8_t>(out_bytes), dt);
        int failures = 0;
        for (size_t i = 0; i < tiled.size(); ++i) {
          // Both round to dt once; float32 reassociation is far below that.
          const double bound = 2 * Epsilon(dt) * std::fabs(plain[i]) + 1e-5;
          if (!(std::fabs(tiled[i] - plain[i]) <= bound) && failures++ < 5) {
            ADD_FAILURE() << "output " << i << ": tiled " << tiled[i] << ", per query " << plain[i];
          }
        }
        EXPECT_EQ(failures, 0);
        if (T == kLong) continue;
        if (tc.group > 0) {
          // The reference maps h to h / (heads / kv_heads); a rank's range maps
          // (head0 + h) / group − head0 / group: heads 2, 3 → KV head 0, head 4 → 1. Compare
          // head by head against a one-head reference on that KV head's cache.
          for (int h = 0; h < tc.heads; ++h) {
            const int g = (tc.head0 + h) / tc.group - tc.head0 / tc.group;
            std::vector<float> qh, kh, vh;
            for (int t = 0; t < T; ++t) {
              const auto* row = q.data() + (int64_t{t} * tc.heads + h) * tc.d_k;
              qh.insert(qh.end(), row, row + tc.d_k);
            }
            for (size_t slot = 0; slot < cache / k_width; ++slot) {
              kh.insert(kh.end(), k.begin() + slot * k_width + g * tc.d_k,
                        k.begin() + slot * k_width + (g + 1) * tc.d_k);
              vh.insert(vh.end(), v.begin() + slot * tc.kv_heads * tc.d_v + g * tc.d_v,
                        v.begin() + slot * tc.kv_heads * tc.d_v + (g + 1) * tc.d_v);
            }
            Layout one = kl;
            one.kv_heads = 1;
            Layout one_v = one;
            one_v.width = tc.d_v;
            const std::vector<double> want =
                Reference(qh, kh, vh, one, one_v, queries, 1, tc.d_k, tc.d_v, a.scale);
            std::vector<float> got;
            for (int t = 0; t < T; ++t) {
              const auto* row = tiled.data() + (int64_t{t} * tc.heads + h) * tc.d_v;
              got.insert(got.end(), row, row + tc.d_v);
            }
            ExpectClose(got, want, dt);
          }
          continue;
        }
        ExpectClose(tiled,
                    Reference(q, k, v, tc.latent ? kl : kl, tc.latent ? kl : vl, queries, tc.heads,
                              tc.d_k, tc.d_v, a.scale),
                    dt);
      }
    }
  }
}

// Two queries of `heads` query heads over `kv_heads` KV heads of 64, separate values, every
// pointer into `d` (for the refusals: nothing runs).
PagedAttentionArgs RefusalArgs(const DeviceBuffer& d, int heads, int kv_heads) {
  PagedAttentionArgs a;
  a.queries = 2;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.d_k = a.d_v = 64;
  a.block_size = 16;
  a.q = a.out = d.get();
  a.k = a.v = {d.get(), 16 * 64 * kv_heads, 64 * kv_heads, 64};
  a.v.base = static_cast<uint8_t*>(d.get()) + 4;  // separate values
  a.block_table = a.query_seq = a.query_kv_len = d.as<int32_t>();
  a.max_blocks = 1;
  return a;
}

TEST_F(CudaAttention, TiledPrefillRefusesSelectionsAndOversizedTiles) {
  DeviceBuffer d(1 << 16);
  PagedAttentionArgs a = RefusalArgs(d, 1, 1);
  a.selected = d.as<int32_t>();
  a.selected_per_query = 4;
  const absl::Status selected = PagedAttentionTiled(a, DType::kF32, nullptr);
  EXPECT_FALSE(selected.ok());
  EXPECT_NE(selected.message().find("selection"), std::string::npos) << selected;
  a.selected = nullptr;
  a.selected_per_query = 0;
  a.d_k = a.d_v = 512;  // 16 keys x (512 + 512) floats: 64 KiB
  const absl::Status wide = PagedAttentionTiled(a, DType::kF32, nullptr);
  EXPECT_FALSE(wide.ok());
  EXPECT_NE(wide.message().find("shared memory"), std::string::npos) << wide;
}

// The tensor-core prefill kernel: causal prompts after `past` cached tokens over a shuffled
// block table, f16 and bf16, against float64 within its documented bound — one rounding of
// the output, the probabilities' rounding to 16 bits (≤ 2u/(1 − u) of the largest |value|, u
// the type's unit roundoff; f16's subnormal probabilities below 2⁻¹⁴ add 2⁻²⁵ each) and
// float32 work — for GQA groups of 4 (8 queries per 32-row tile), a tensor-parallel rank's
// heads 2..4 in groups of 4 (runs of 2 and 1 heads), one head per KV head at d 16, a group of
// 48 heads (one query spans two tiles), and MLA's latent (576-wide keys whose first 512 values
// are the value; 4 and 48 heads: where the device's opt-in shared memory holds the tile, else
// logged and skipped), at lengths around the tiles. Each case's later queries, run again as a
// prompt chunk of their own, give the same bits (a row depends on its own query and keys only).
TEST_F(CudaAttention, MmaPrefillAgainstFloat64) {
  std::mt19937_64 rng(29);
  const int kLong = kSimtEmulator ? 1029 : 4096;
  const std::vector<PromptCase> cases = {
      {"gqa 8/2 x 128", {8, 2, 128, 128, 0, 0, false}, {1, 7, 8, 9, 33, 100}},
      {"gqa tp heads 2..4 of groups of 4", {3, 2, 64, 64, 2, 4, false}, {33, 70}},
      {"one head per kv head x 16", {4, 4, 16, 16, 0, 0, false}, {31, 32, 33}},
      {"group of 48 x 32, d_v 16", {48, 1, 32, 16, 0, 0, false}, {5, 40}},
      {"mla 576/512, 4 heads", {4, 1, 576, 512, 0, 0, true}, {17, 130}},
      {"mla 576/512, 48 heads", {48, 1, 576, 512, 0, 0, true}, {3}},
      {"gqa 2/1 x 64, long", {2, 1, 64, 64, 0, 0, false}, {kLong}},
  };
  const int block_size = 16, past = 5;
  for (const PromptCase& mc : cases) {
    const HeadShape& hs = mc.shape;
    for (int T : mc.lengths) {
      for (DType dt : {DType::kF16, DType::kBF16}) {
        if (T == kLong && dt != DType::kBF16) continue;
        SCOPED_TRACE(::testing::Message() << mc.name << " T " << T << " " << DTypeName(dt));
        const Prompt pr(hs, T, past, block_size, dt, rng);
        const int keys = past + T;
        const size_t out_bytes = pr.out_bytes;
        DeviceBuffer dout(out_bytes), dchunk(out_bytes);
        PagedAttentionArgs a = pr.args;
        a.out = dout.get();
        if (absl::Status fits = CheckMmaAttention(a, dt, CurrentDeviceLimits()).status();
            !fits.ok()) {
          ASSERT_TRUE(hs.latent) << fits;  // GQA's tiles fit every device
          GTEST_LOG_(INFO) << "MLA's tile does not fit this device: " << fits;
          continue;
        }
        ASSERT_TRUE(PagedAttentionMma(a, dt, nullptr).ok());
        // The last T − T/3 queries as a chunk of their own.
        const int from = T / 3;
        PagedAttentionArgs chunk = QueryRange(a, from, T - from, dt);
        chunk.out = dchunk.get();
        ASSERT_TRUE(PagedAttentionMma(chunk, dt, nullptr).ok());
        Sync();
        const std::vector<float> got = Decode(dout.Download<uint8_t>(out_bytes), dt);
        const std::vector<float> again = Decode(dchunk.Download<uint8_t>(out_bytes), dt);
        const size_t row = static_cast<size_t>(hs.heads) * hs.d_v;
        for (size_t i = 0; i < (T - from) * row; ++i) {
          ASSERT_EQ(again[i], got[from * row + i]) << "query " << from + i / row << ", element "
                                                   << i % row << ": alone vs in its prompt";
        }
        double vmax = 0;
        for (float x : pr.v) vmax = std::max(vmax, static_cast<double>(std::fabs(x)));
        const double u = Epsilon(dt);
        const double rounding =
            (2 * u / (1 - u) + (dt == DType::kF16 ? keys * std::ldexp(1.0, -25) : 0.0)) * vmax;
        const std::vector<double> want =
            Reference(pr.q, pr.k, pr.v, pr.kl, hs.latent ? pr.kl : pr.vl, pr.queries, hs.heads,
                      hs.d_k, hs.d_v, a.scale, hs.head0, hs.group);
        ASSERT_EQ(got.size(), want.size());
        int failures = 0;
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          const double err = std::fabs(got[i] - want[i]);
          worst = std::max(worst, err / vmax);
          if (!(err <= u * std::fabs(want[i]) + rounding + 2e-5) && failures++ < 5) {
            ADD_FAILURE() << "output " << i << ": gpu " << got[i] << ", float64 " << want[i];
          }
        }
        EXPECT_EQ(failures, 0) << "largest error " << worst << " of max |v|";
      }
    }
  }
}

TEST_F(CudaAttention, MmaPrefillRefusesWhatItCannotTake) {
  DeviceBuffer d(1 << 16);
  PagedAttentionArgs a = RefusalArgs(d, 4, 2);
  auto refused = [&](DType dt, const char* why) {
    const absl::Status s = PagedAttentionMma(a, dt, nullptr);
    EXPECT_FALSE(s.ok()) << why;
    EXPECT_NE(s.message().find(why), std::string::npos) << s;
  };
  refused(DType::kF32, "16-bit");
  a.selected = d.as<int32_t>();
  a.selected_per_query = 4;
  refused(DType::kBF16, "selection");
  a.selected = nullptr;
  a.selected_per_query = 0;
  a.d_k = a.d_v = 48 + 8;
  refused(DType::kBF16, "multiples of 16");
}

// Decode attention by KV head with split keys (flash-decoding) against the per-query kernel
// (float32 reassociation apart) and float64: decode queries of 0 to 5,000 keys (1 to 16 splits,
// lengths off the 16-key tiles), two sequences over a shuffled block table, GQA in whole groups
// and a tensor-parallel rank's heads 2..4 in groups of 4, MLA's latent with 40 heads (three head
// blocks) and with a DSA selection (unused and invisible slots), a workspace of one query (the
// queries in passes) and of all.
TEST_F(CudaAttention, DecodeByKvHeadWithSplitKeysEqualsPerQuery) {
  std::mt19937_64 rng(24);
  struct DecodeCase {
    const char* name;
    int heads, kv_heads, d_k, d_v, head0, group;
    bool latent, dsa;
  };
  const std::vector<DecodeCase> cases = {
      {"gqa 8/2 x 128", 8, 2, 128, 128, 0, 0, false, false},
      {"gqa tp heads 2..4 of groups of 4", 3, 2, 64, 64, 2, 4, false, false},
      {"mla 40 x 576/512", 40, 1, 576, 512, 0, 0, true, false},
      {"mla 16 x 576/512, dsa", 16, 1, 576, 512, 0, 0, true, true},
  };
  const int block_size = 16, max_blocks = 320;
  const std::vector<int> lengths = {0, 1, 15, 16, 17, 300, 1000, 5000};
  for (const DecodeCase& tc : cases) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(::testing::Message() << tc.name << " " << DTypeName(dt));
      const int k_width = tc.latent ? tc.d_k : tc.kv_heads * tc.d_k;
      const Layout kl = MakeLayout(2, max_blocks, block_size, tc.kv_heads, tc.d_k, rng);
      Layout vl = kl;
      vl.width = tc.d_v;
      const size_t slots = static_cast<size_t>(2 * max_blocks) * block_size;
      const std::vector<float> k = Round(RandomVector(slots * k_width, rng), dt);
      const std::vector<float> v =
          tc.latent ? k : Round(RandomVector(slots * tc.kv_heads * tc.d_v, rng), dt);
      std::vector<Query> queries;
      for (size_t i = 0; i < lengths.size(); ++i) {
        Query qu{static_cast<int>(i % 2), lengths[i], {}};
        if (tc.dsa) {
          for (int j = 0; j < 48; ++j) qu.selected.push_back(static_cast<int>(rng() % 6000) - 500);
        }
        queries.push_back(qu);
      }
      const int per_query = tc.dsa ? 48 : 0;
      const std::vector<float> q = Round(RandomVector(queries.size() * tc.heads * tc.d_k, rng), dt);
      std::vector<int32_t> seq, len, sel;
      Upload(queries, &seq, &len, &sel, per_query);
      const size_t out_bytes = queries.size() * tc.heads * tc.d_v * DTypeBytes(dt);
      DeviceBuffer dq(Encode(q, dt)), dk(Encode(k, dt)), dv(Encode(v, dt)), dtable(kl.table),
          dseq(seq), dlen(len), dsel(sel.empty() ? std::vector<int32_t>{0} : sel),
          dplain(out_bytes), ddecode(out_bytes);
      PagedAttentionArgs a =
          CacheArgs({tc.heads, tc.kv_heads, tc.d_k, tc.d_v, tc.head0, tc.group, tc.latent},
                    static_cast<int64_t>(queries.size()), block_size, max_blocks, dq, dk, dv,
                    dtable, dseq, dlen);
      if (tc.dsa) {
        a.selected = dsel.as<int32_t>();
        a.selected_per_query = per_query;
      }
      a.out = dplain.get();
      ASSERT_TRUE(PagedAttention(a, dt, nullptr).ok());
      const int64_t one_query = static_cast<int64_t>(tc.heads) * DecodePartialFloats(tc.d_v);
      Sync();
      const std::vector<float> plain = Decode(dplain.Download<uint8_t>(out_bytes), dt);
      for (int64_t ws : {one_query, one_query * static_cast<int64_t>(queries.size())}) {
        SCOPED_TRACE(::testing::Message() << "workspace of " << ws / one_query << " queries");
        DeviceBuffer dws(ws * 4);
        a.out = ddecode.get();
        ASSERT_TRUE(PagedAttentionDecode(a, dws.as<float>(), ws, dt, nullptr).ok());
        Sync();
        const std::vector<float> got = Decode(ddecode.Download<uint8_t>(out_bytes), dt);
        int failures = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          const double bound = 2 * Epsilon(dt) * std::fabs(plain[i]) + 1e-5;
          if (!(std::fabs(got[i] - plain[i]) <= bound) && failures++ < 5) {
            ADD_FAILURE() << "output " << i << ": by KV head " << got[i] << ", per query "
                          << plain[i];
          }
        }
        EXPECT_EQ(failures, 0);
      }
      if (tc.group == 0) {
        ExpectClose(
            plain,
            Reference(q, k, v, kl, tc.latent ? kl : vl, queries, tc.heads, tc.d_k, tc.d_v, a.scale),
            dt);
      }
      DeviceBuffer small(4);
      EXPECT_FALSE(PagedAttentionDecode(a, small.as<float>(), one_query - 1, dt, nullptr).ok())
          << "a workspace smaller than one query's partials";
    }
  }
}

TEST_F(CudaAttention, KvWriteLandsInTheMappedSlots) {
  std::mt19937_64 rng(23);
  const int kv_heads = 2, width = 80, block_size = 16, blocks = 4, tokens = 5;
  const std::vector<int64_t> slots = {17, 0, -1, 63, 40};  // -1: padding, skipped
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dt));
    const std::vector<float> src = Round(RandomVector(tokens * kv_heads * width, rng), dt);
    const size_t cache_values = static_cast<size_t>(blocks) * block_size * kv_heads * width;
    std::vector<float> cache(cache_values, 5.0f);
    DeviceBuffer dsrc(Encode(src, dt)), dcache(Encode(cache, dt)), dslots(slots);
    KvWriteArgs a;
    a.tokens = tokens;
    a.kv_heads = kv_heads;
    a.width = width;
    a.block_size = block_size;
    a.src = dsrc.get();
    a.src_token_stride = kv_heads * width;
    a.cache = dcache.get();
    a.block_stride = static_cast<int64_t>(block_size) * kv_heads * width;
    a.token_stride = kv_heads * width;
    a.head_stride = width;
    a.slot_mapping = dslots.as<int64_t>();
    ASSERT_TRUE(WriteKvCache(a, dt, nullptr).ok());
    Sync();
    for (int t = 0; t < tokens; ++t) {
      if (slots[t] < 0) continue;
      for (int i = 0; i < kv_heads * width; ++i)
        cache[slots[t] * kv_heads * width + i] = src[t * kv_heads * width + i];
    }
    EXPECT_EQ(Decode(dcache.Download<uint8_t>(cache_values * DTypeBytes(dt)), dt), cache);
  }
}

TEST_F(CudaAttention, IndexerScores) {
  std::mt19937_64 rng(22);
  const int heads = 8, dim = 128, block_size = 16, n_keys = 80;
  const Layout l = MakeLayout(1, 5, block_size, 1, dim, rng);
  const std::vector<int32_t> seq = {0, 0}, len = {80, 33};
  const std::vector<float> keys = RandomVector(static_cast<size_t>(5) * block_size * dim, rng);
  const std::vector<float> q = RandomVector(2 * heads * dim, rng);
  const std::vector<float> w = RandomVector(2 * heads, rng);
  DeviceBuffer dk(keys), dq(q), dw(w), dtable(l.table), dseq(seq), dlen(len),
      dscores(2 * n_keys * 4);
  IndexerScoreArgs a;
  a.queries = 2;
  a.heads = heads;
  a.dim = dim;
  a.n_keys = n_keys;
  a.block_size = block_size;
  a.q = dq.as<float>();
  a.weights = dw.as<float>();
  a.keys = {dk.get(), block_size * dim, dim, 0};
  a.block_table = dtable.as<int32_t>();
  a.max_blocks = 5;
  a.query_seq = dseq.as<int32_t>();
  a.query_kv_len = dlen.as<int32_t>();
  a.scores = dscores.as<float>();
  ASSERT_TRUE(IndexerScores(a, nullptr).ok());
  Sync();
  const std::vector<float> got = dscores.Download<float>(2 * n_keys);
  for (int t = 0; t < 2; ++t) {
    for (int j = 0; j < n_keys; ++j) {
      if (j >= len[t]) {
        EXPECT_EQ(got[t * n_keys + j], -INFINITY);
        continue;
      }
      double want = 0, mag = 0;
      for (int h = 0; h < heads; ++h) {
        double dot = 0, dmag = 0;
        for (int i = 0; i < dim; ++i) {
          dot += static_cast<double>(q[(t * heads + h) * dim + i]) * keys[l.Offset(0, j, 0) + i];
          dmag += std::fabs(q[(t * heads + h) * dim + i] * keys[l.Offset(0, j, 0) + i]);
        }
        want += w[t * heads + h] * std::max(dot, 0.0);
        mag += std::fabs(w[t * heads + h]) * dmag;
      }
      EXPECT_NEAR(got[t * n_keys + j], want, 2e-6 * mag + 1e-6) << t << " " << j;
    }
  }
}

}  // namespace
}  // namespace tessera::cuda
