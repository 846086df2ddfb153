#include "bench/gpu_traffic.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/gguf/split.h"
#include "common/model/arch.h"
#include "common/model/hparams.h"
#include "kernels/cuda/launch_config.h"

namespace tessera::bench {
namespace {

constexpr int64_t kGemvRows = 64;                    // worker/executor/cuda_forward.cc
constexpr int64_t kGroupedPass = 32;                 // kernels/cuda/launch_config.h
constexpr int64_t kGemmTileTokens = 128;             // kernels/cuda/launch_config.h
constexpr int64_t kSortedChoicesPerMember = 2;       // worker/executor/cuda_forward.cc
constexpr int64_t kTiledAttentionMin = 64;           // worker/executor/cuda_forward.cc
constexpr int64_t kTiledQueries = 16;                // kernels/cuda/launch_config.h
constexpr int64_t kMmaRows = 32;                     // kernels/cuda/launch_config.h
constexpr int64_t kDecodeHeads = 16;                 // kernels/cuda/launch_config.h
constexpr int64_t kQueryTile = 64;                   // the ideal's query tile
constexpr double kLogitBytes = 4, kSampleBytes = 8;  // float logit; id + log-probability

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Whether prompts of these head dims attend on tensor cores on an H100 (16-bit, 227 KiB of
// opt-in shared memory): kernels/cuda/launch_config.h's MmaAttentionLaunch.
bool MmaFits(int d_k, int d_v, bool values_in_keys) {
  cuda::AttentionShape shape{
      .queries = 1, .heads = 1, .kv_heads = 1, .d_k = d_k, .d_v = d_v, .block_size = 16};
  cuda::DeviceLimits h100;
  h100.max_shared_optin = 227 * 1024;
  return cuda::MmaAttentionLaunch(shape, values_in_keys, 2, h100).ok();
}

// Weight passes of a GEMV over `tokens` tokens (kernels/cuda/launch_config.h's kGemvMaxBatch:
// 8 before, 64 now).
int64_t Passes(int64_t tokens, Kernels k) {
  return CeilDiv(tokens, k == Kernels::kBefore ? 8 : 64);
}

// Expected distinct experts among `tokens` tokens' choices spread evenly.
double DistinctExperts(const TrafficShape& s, int64_t tokens) {
  if (s.n_expert == 0) return 0;
  const double p = static_cast<double>(s.n_expert_used) / static_cast<double>(s.n_expert);
  return static_cast<double>(s.n_expert) * (1 - std::pow(1 - p, static_cast<double>(tokens)));
}

double PerExpert(const TrafficShape& s) {
  return s.n_expert == 0 ? 0 : s.expert_bytes / static_cast<double>(s.n_expert);
}

// Keys a query at position q (1-based count of visible keys) reads.
int64_t Visible(const TrafficShape& s, int64_t q) {
  return s.dsa_top_k > 0 ? std::min(q, s.dsa_top_k) : q;
}

// How many times a query's keys are read: once per query head (kBefore), once per block of
// up to kDecodeHeads heads of one KV head (kNow's decode kernel).
double HeadReads(const TrafficShape& s, Kernels k) {
  if (k == Kernels::kBefore || s.kv_heads <= 0) return static_cast<double>(s.heads);
  const int64_t group = std::max<int64_t>(1, s.heads / s.kv_heads);
  return static_cast<double>(s.kv_heads * CeilDiv(group, kDecodeHeads));
}

// Reads of member matrices by a grouped product of `choices` choices spread evenly over
// `distinct` members of `members` (kNow sorts them when there are at least two choices per
// member: each member once per `pass` of its choices — kGroupedPass for the GEMV,
// kGemmTileTokens for the tensor-core tiles, which always sort).
double MemberReads(int64_t choices, double distinct, int64_t members, Kernels k,
                   int64_t pass = kGroupedPass) {
  const bool sorted = pass == kGemmTileTokens || choices >= kSortedChoicesPerMember * members;
  if (k == Kernels::kBefore || !sorted || distinct <= 0) return static_cast<double>(choices);
  return distinct * std::ceil(static_cast<double>(choices) / distinct / static_cast<double>(pass));
}

}  // namespace

absl::StatusOr<TrafficShape> TrafficShapeOf(const std::string& gguf_path) {
  auto model = gguf::GgufModel::Open(gguf_path);
  if (!model.ok()) return model.status();
  const std::string arch = model->metadata().GetString("general.architecture").value_or("");
  const model::ArchSpec* spec = model::FindArch(arch);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(gguf_path, ": unknown architecture '", arch, "'"));
  }
  std::vector<model::KeyProblem> problems;
  const model::HyperParams hp =
      model::LoadHyperParams(*spec, arch, model->metadata(), nullptr, &problems);
  for (const auto& p : problems) {
    if (p.error) return absl::InvalidArgumentError(absl::StrCat(gguf_path, ": ", p.message));
  }
  TrafficShape s;
  double embedding = 0;
  bool has_output = false;
  for (const gguf::TensorInfo& t : model->tensors()) {
    if (t.name == "token_embd.weight") {
      embedding = static_cast<double>(t.n_bytes);
      continue;
    }
    if (t.name == "output.weight") {
      s.head_bytes = static_cast<double>(t.n_bytes);
      has_output = true;
      continue;
    }
    if (!absl::StartsWith(t.name, "blk.") || t.dims.size() < 2) continue;  // norms, biases
    const std::vector<std::string> parts = absl::StrSplit(t.name, '.');
    int64_t block = 0;
    if (parts.size() < 3 || !absl::SimpleAtoi(parts[1], &block) || block >= hp.n_layer) {
      continue;  // the MTP block is not in a trunk step
    }
    if (absl::StrContains(t.name, "attn_k_b") || absl::StrContains(t.name, "attn_v_b") ||
        absl::StrContains(t.name, "attn_kv_b")) {
      s.head_product_bytes += static_cast<double>(t.n_bytes);
      s.dense_bytes += static_cast<double>(t.n_bytes);  // never dequantized for cuBLAS
    } else if (absl::StrContains(t.name, "_exps")) {
      s.expert_bytes += static_cast<double>(t.n_bytes);
    } else {
      s.dense_bytes += static_cast<double>(t.n_bytes);
      s.dense_elements += static_cast<double>(t.n_elements);
    }
  }
  if (!has_output) s.head_bytes = embedding;  // tied: the embedding is the head
  s.n_expert = hp.n_expert;
  s.n_expert_used = hp.n_expert_used;
  s.layers = hp.n_layer;
  s.heads = hp.n_head.empty() ? 0 : hp.n_head[0];
  constexpr int64_t kCacheElementBytes = 2;  // the GPU's auto KV dtype (f16)
  if (hp.is_mla()) {
    s.kv_heads = 1;
    s.kv_row_bytes = (static_cast<int64_t>(hp.kv_lora_rank) + hp.n_rot) * kCacheElementBytes;
    s.dsa_top_k = hp.indexer_top_k;
    s.mma_attention = MmaFits(static_cast<int>(hp.kv_lora_rank + hp.n_rot),
                              static_cast<int>(hp.kv_lora_rank), true);
  } else {
    s.kv_heads = hp.n_head_kv.empty() ? 0 : hp.n_head_kv[0];
    s.kv_row_bytes = (static_cast<int64_t>(hp.head_dim_k) + hp.head_dim_v) * kCacheElementBytes;
    s.mma_attention =
        MmaFits(static_cast<int>(hp.head_dim_k), static_cast<int>(hp.head_dim_v), false);
  }
  s.vocab = hp.n_vocab;
  return s;
}

const char* KernelsName(Kernels k) {
  return k == Kernels::kBefore ? "issue 27's starting kernels" : "current kernels";
}

StepTraffic DecodeTraffic(const TrafficShape& s, int64_t batch, int64_t context, Kernels k) {
  StepTraffic t;
  const auto b = static_cast<double>(batch);
  // MLA's per-head products: every head's matrix is a member used by every token.
  const double heads = static_cast<double>(s.heads);
  const double per_head = s.heads > 0 ? s.head_product_bytes / heads : 0;
  const double head_products = MemberReads(batch * s.heads, heads, s.heads, k) * per_head;
  t.dense = {static_cast<double>(Passes(batch, k)) * (s.dense_bytes - s.head_product_bytes) +
                 head_products,
             s.dense_bytes};
  const double distinct = DistinctExperts(s, batch);
  t.experts = {MemberReads(batch * s.n_expert_used, distinct, s.n_expert, k) * PerExpert(s),
               distinct * PerExpert(s)};
  const double keys = static_cast<double>(Visible(s, context));
  const double per_kv = static_cast<double>(s.layers) * b * keys * s.kv_row_bytes;
  t.attention = {per_kv * HeadReads(s, k), per_kv * static_cast<double>(s.kv_heads)};
  t.head = {static_cast<double>(Passes(batch, k)) * s.head_bytes, s.head_bytes};
  // kNow samples on the device (sequences without penalties, grammar or alternatives).
  t.logits = {
      (k == Kernels::kBefore ? static_cast<double>(s.vocab) * kLogitBytes : kSampleBytes) * b,
      b * kSampleBytes};
  return t;
}

StepTraffic PrefillTraffic(const TrafficShape& s, int64_t tokens, Kernels k) {
  StepTraffic t;
  const double matrices = s.dense_bytes - s.head_product_bytes;
  const double gemv = static_cast<double>(Passes(tokens, k)) * matrices;
  // Dequantized to 16 bits (written once, read once by cuBLAS) above kGemvRows tokens (the
  // per-head products stay grouped GEMVs at every length).
  const double gemm = matrices + 2 * 2 * s.dense_elements;
  const double heads = static_cast<double>(s.heads);
  const double per_head = s.heads > 0 ? s.head_product_bytes / heads : 0;
  t.dense = {(tokens <= kGemvRows ? gemv : gemm) +
                 MemberReads(tokens * s.heads, heads, s.heads, k) * per_head,
             s.dense_bytes};
  // Routed experts above kGemvRows tokens (16-bit activations): GroupedGemmTiles.
  const double distinct = DistinctExperts(s, tokens);
  const int64_t pass = tokens > kGemvRows ? kGemmTileTokens : kGroupedPass;
  t.experts = {MemberReads(tokens * s.n_expert_used, distinct, s.n_expert, k, pass) * PerExpert(s),
               distinct * PerExpert(s)};
  // Keys read by tiles of `tile` consecutive queries: each tile reads those its last sees.
  auto tiled_keys = [&](int64_t tile) {
    double keys = 0;
    for (int64_t end = tile;; end += tile) {
      keys += static_cast<double>(std::min(end, tokens));
      if (end >= tokens) break;
    }
    return keys;
  };
  double per_query = 0;  // every query reads its own visible (selected) keys
  for (int64_t q = 1; q <= tokens; ++q) per_query += static_cast<double>(Visible(s, q));
  // Tiles can share keys unless DSA selects among them (a prompt beyond the top-k).
  const bool shared = s.dsa_top_k == 0 || tokens <= s.dsa_top_k;
  // kNow: prompts above kTiledAttentionMin tokens in query tiles of kTiledQueries per query
  // head, or on tensor cores in tiles of kMmaRows (query, head) rows per KV head.
  const bool tiled = k == Kernels::kNow && tokens > kTiledAttentionMin && shared;
  const bool mma = tiled && s.mma_attention && s.kv_heads > 0;
  double mma_keys = 0;  // per KV head: each row tile reads the keys its last row's query sees
  if (mma) {
    const int64_t per_kv = s.heads / s.kv_heads, rows = tokens * per_kv;
    for (int64_t end = kMmaRows;; end += kMmaRows) {
      mma_keys += static_cast<double>((std::min(end, rows) - 1) / per_kv + 1);
      if (end >= rows) break;
    }
  }
  const double current_keys = mma ? mma_keys : tiled ? tiled_keys(kTiledQueries) : per_query;
  const double ideal_keys = shared ? tiled_keys(kQueryTile) : per_query;
  const double row = static_cast<double>(s.layers) * static_cast<double>(s.kv_row_bytes);
  // Tiled: per query head (tensor cores: per KV head); otherwise the decode kernel's head
  // blocks (kNow).
  const double reads = mma     ? static_cast<double>(s.kv_heads)
                       : tiled ? static_cast<double>(s.heads)
                               : HeadReads(s, k);
  t.attention = {row * current_keys * reads, row * ideal_keys * static_cast<double>(s.kv_heads)};
  t.head = {s.head_bytes, s.head_bytes};
  t.logits = {k == Kernels::kBefore ? static_cast<double>(s.vocab) * kLogitBytes : kSampleBytes,
              kSampleBytes};
  return t;
}

std::string TrafficTable(const TrafficShape& s, int64_t context, Kernels kernels) {
  struct Column {
    std::string name;
    StepTraffic t;
  };
  std::vector<Column> columns;
  for (int64_t b : {1, 8, 32, 64}) {
    columns.push_back({absl::StrCat("decode b", b), DecodeTraffic(s, b, context, kernels)});
  }
  for (int64_t p : {512, 4096}) {
    columns.push_back({absl::StrCat("prefill ", p), PrefillTraffic(s, p, kernels)});
  }
  std::string out = absl::StrFormat(
      "traffic model, %s (MB per step, kernels / ideal (ratio); decode at context %d)\n",
      KernelsName(kernels), context);
  absl::StrAppend(&out, absl::StrFormat("%-10s", "family"));
  for (const Column& c : columns) absl::StrAppend(&out, absl::StrFormat(" | %-23s", c.name));
  absl::StrAppend(&out, "\n");
  const std::vector<std::pair<std::string, Traffic StepTraffic::*>> families = {
      {"dense", &StepTraffic::dense},
      {"experts", &StepTraffic::experts},
      {"attention", &StepTraffic::attention},
      {"head", &StepTraffic::head},
      {"logits", &StepTraffic::logits}};
  for (const auto& [name, member] : families) {
    absl::StrAppend(&out, absl::StrFormat("%-10s", name));
    for (const Column& c : columns) {
      const Traffic& v = c.t.*member;
      const std::string cell = v.ideal > 0 ? absl::StrFormat("%.3g/%.3g (%.1fx)", v.current / 1e6,
                                                             v.ideal / 1e6, v.current / v.ideal)
                                           : std::string("-");
      absl::StrAppend(&out, absl::StrFormat(" | %-23s", cell));
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace tessera::bench
