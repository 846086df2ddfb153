// Launch geometry of every CUDA kernel in this folder, as plain C++ so that it is unit-tested
// on machines without a GPU (tests/unit/cuda_launch_config_test.cc). Each function checks the
// shapes the kernel relies on and returns an InvalidArgument naming the kernel, the value and
// the expectation; the .cu launchers call these and never compute a grid themselves.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/gguf/ggml_type.h"

namespace tessera::cuda {

inline constexpr int kWarpSize = 32;

// What a launch may use on the device at hand (cudaDeviceProp); the defaults are those of
// every device from sm_80 on without the shared-memory opt-in.
struct DeviceLimits {
  int max_threads_per_block = 1024;
  size_t max_shared_bytes = 48 * 1024;
  // What a kernel may use once cudaFuncSetAttribute raised its limit (sharedMemPerBlockOptin;
  // the default: no opt-in). Only kernels that say so opt in.
  size_t max_shared_optin = 48 * 1024;
  int64_t max_grid_x = (int64_t{1} << 31) - 1;
  int64_t max_grid_y = 65535;
  int multiprocessors = 1;
};

struct LaunchConfig {
  int64_t grid_x = 1, grid_y = 1;
  int block = 1;  // threads per block (one-dimensional)
  size_t shared_bytes = 0;
};

// Block geometry of a weight type on the GPU: elements and bytes per block.
struct QuantGeometry {
  int block_elems = 0;
  int block_bytes = 0;
};
// The geometry of `type`, or InvalidArgument when the CUDA kernels do not decode it.
absl::StatusOr<QuantGeometry> CudaQuantGeometry(gguf::GgmlType type);

// Checks that a row of `cols` elements of `type` is a whole number of blocks and occupies
// exactly `row_bytes`; InvalidArgument naming `what`, the type and both sizes otherwise.
absl::Status CheckRowBytes(gguf::GgmlType type, int64_t cols, size_t row_bytes, const char* what);

// OK when `ptr` is a multiple of `alignment`; otherwise InvalidArgument naming `what`.
absl::Status CheckAlignment(const void* ptr, size_t alignment, const char* what);

// Dequantizing `n_elements` of `type`: one thread per output element in blocks of 256.
absl::StatusOr<LaunchConfig> DequantizeLaunch(gguf::GgmlType type, int64_t n_elements,
                                              const DeviceLimits& limits = {});

// Quantized GEMV y[b][r] = W[r]·x[b] for decode: one warp per weight row, kGemvWarps rows per
// block, batch handled kGemvMaxBatch tokens per pass (the weights stay quantized and are
// decoded in registers, once per pass: a decode step of up to 64 sequences reads each weight
// byte once); smaller batches use instances with fewer accumulators: up to kGemvSmallBatch,
// up to kGemvMidBatch, else kGemvMaxBatch (ptxas -v, sm_90, no spills: 48-64 registers per
// thread up to 8 tokens, 119-143 up to 24, 255 up to 64, i.e. 16, 4 and 2 blocks of 128
// threads per SM). x needs cols·batch activations.
inline constexpr int kGemvWarps = 4;
inline constexpr int kGemvSmallBatch = 8;
inline constexpr int kGemvMidBatch = 24;
inline constexpr int kGemvMaxBatch = 64;
// The grouped GEMV over choices sorted by member (SortByMember): a warp decodes its row of a
// member once per kGroupedPass of that member's choices.
inline constexpr int kGroupedPass = 32;
// SortByMember: one block of this many threads; members + 1 buckets of counts and cursors in
// shared memory, within the 48 KiB a launch gets without opting in to more (2 · 6,144 ints).
inline constexpr int kSortThreads = 1024;
inline constexpr int kSortMaxMembers = 6143;
static_assert(2 * (kSortMaxMembers + 1) * sizeof(int) <= 48 * 1024,
              "SortByMember's buckets must fit the default dynamic shared memory");
absl::StatusOr<LaunchConfig> GemvLaunch(gguf::GgmlType type, int64_t rows, int64_t cols,
                                        int64_t batch, const DeviceLimits& limits = {});

// Prefill GEMM through a dequantized scratch buffer: how many weight rows fit in
// `scratch_bytes` at `element_bytes` per value (at least one whole row, else an error that
// says how many bytes one row needs).
absl::StatusOr<int64_t> GemmScratchRows(int64_t rows, int64_t cols, size_t element_bytes,
                                        size_t scratch_bytes);

// Prefill GEMM on tensor cores (gemm_tiles.cu): a block of kGemmTileWarps warps computes
// kGemmTileRows weight rows × kGemmTileTokens tokens, stepping K by kGemmTileK. Each step the
// block decodes its weight tile and copies its activation tile into shared memory as 16-bit
// values (rows padded by kGemmTilePad elements against bank conflicts), then each warp runs
// 16×16×16 WMMA products on its 32 × 32 part with float accumulators, staged through a
// per-warp 16 × 16 float tile on the way out. grid_x covers the tokens and grid_y the weight
// rows, so that neighbouring blocks share a weight tile in L2. The shared memory is static
// (the kernel's arrays, GemmTilesSharedBytes), so shared_bytes is 0.
inline constexpr int kGemmTileRows = 64;
inline constexpr int kGemmTileTokens = 128;
inline constexpr int kGemmTileK = 32;
inline constexpr int kGemmTilePad = 8;
inline constexpr int kGemmTileWarps = (kGemmTileRows / 32) * (kGemmTileTokens / 32);
inline constexpr size_t GemmTilesSharedBytes() {
  return static_cast<size_t>(kGemmTileRows + kGemmTileTokens) * (kGemmTileK + kGemmTilePad) * 2 +
         static_cast<size_t>(kGemmTileWarps) * 16 * 16 * sizeof(float);
}
static_assert(GemmTilesSharedBytes() <= 48 * 1024, "static shared memory is limited to 48 KiB");
absl::StatusOr<LaunchConfig> GemmTilesLaunch(gguf::GgmlType type, int64_t rows, int64_t cols,
                                             int64_t batch, const DeviceLimits& limits = {});
// GroupedGemmTiles over `choices` sorted into `members` buckets and one of the others: the
// same tile, grid_x one token tile per kGemmTileTokens choices plus one per bucket (each
// bucket has at most one partial tile).
absl::StatusOr<LaunchConfig> GroupedGemmTilesLaunch(gguf::GgmlType type, int64_t rows, int64_t cols,
                                                    int64_t choices, int members,
                                                    const DeviceLimits& limits = {});

// Per-row kernels (RMSNorm, softmax): one block per row, threads a power of two covering the
// row up to the device limit, one float per warp of shared memory for the reductions.
absl::StatusOr<LaunchConfig> RowLaunch(const char* kernel, int64_t rows, int64_t n,
                                       const DeviceLimits& limits = {});

// Element-wise kernels (SiLU·mul): 256 threads, grid-stride beyond max_grid_x.
absl::StatusOr<LaunchConfig> ElementwiseLaunch(const char* kernel, int64_t n,
                                               const DeviceLimits& limits = {});

// RoPE over `tokens` × `heads` heads of `head_dim`, rotating the first n_rot (even, ≤
// head_dim): one thread per pair, one block per token (grid_y = heads).
absl::StatusOr<LaunchConfig> RopeLaunch(int64_t tokens, int heads, int head_dim, int n_rot,
                                        const DeviceLimits& limits = {});

// Paged decode attention: one block of kAttentionWarps warps per (query, head); each warp
// walks every kAttentionWarps-th key with an online softmax and each lane owns
// ceil(d/32) dimensions; warps combine through shared memory. `per_lane` receives that
// ceil(max(d_k, d_v)/32), which selects the kernel instance (≤ kAttentionMaxPerLane: head
// dims up to 576, the MLA latent key).
inline constexpr int kAttentionWarps = 4;
inline constexpr int kAttentionMaxPerLane = 18;
struct AttentionShape {
  int64_t queries = 0;  // query tokens (decode: one per sequence)
  int heads = 0;        // query heads
  int kv_heads = 0;     // KV heads (1 for MLA)
  int d_k = 0;          // key (and query) width
  int d_v = 0;          // value width
  int block_size = 0;   // tokens per KV-cache block
  // A rank's range of a GQA model's query heads: the model's index of the first, and its
  // query heads per KV head (0: heads / kv_heads, whole groups).
  int head0 = 0, group = 0;
};
absl::StatusOr<LaunchConfig> AttentionLaunch(const AttentionShape& shape, int* per_lane,
                                             const DeviceLimits& limits = {});
// Prefill attention tiled over keys (PagedAttentionTiled): one block of kTiledWarps warps per
// (tile of kTiledQueries consecutive queries, query head); the block streams the visible keys
// through shared memory kTiledKeys at a time (as float32: keys, then values unless they are
// the keys' first d_v values, MLA's latent) and each warp runs the online softmax of
// kTiledQueries / kTiledWarps queries over them, keys in order. Shared memory:
// kTiledKeys · (d_k + d_v, or d_k) floats, at most the device's 48 KiB.
inline constexpr int kTiledQueries = 16;
inline constexpr int kTiledKeys = 16;
inline constexpr int kTiledWarps = 8;
absl::StatusOr<LaunchConfig> TiledAttentionLaunch(const AttentionShape& shape, bool values_in_keys,
                                                  int* per_lane, const DeviceLimits& limits = {});
// Prefill attention on tensor cores (PagedAttentionMma, 16-bit q, cache and out; GQA, and
// MLA's latent where the device's opt-in shared memory holds its tile): a block of kMmaWarps
// warps takes kMmaRows rows of (query, query head) pairs — a prompt's queries × the local
// query heads of one KV head, query-major — so that one KV head's keys stream through shared
// memory once for all the heads that use them, kMmaKeys at a time. Scores (rows × keys) and
// the value product (rows × d_v) are WMMA 16×16×16 products with float accumulators; the
// probabilities are rounded to the 16-bit type for the value product. Dynamic shared memory
// (MmaAttentionSharedBytes): the q and key tiles, the value tile unless the values are the
// keys' first d_v (MLA), scores, probabilities, the rows' float accumulators and per-row
// state. Head dims 16·n; GQA at 128: 47,616 bytes; MLA 576/512: 145,920 (opt-in: an A100's
// or H100's 163 / 227 KiB hold it, a device with 99 KiB does not).
// grid_x: ⌈queries · heads per KV head / kMmaRows⌉, grid_y: KV heads.
inline constexpr int kMmaRows = 32;
inline constexpr int kMmaKeys = 32;
inline constexpr int kMmaWarps = 4;
inline constexpr size_t MmaAttentionSharedBytes(int d_k, int d_v, bool values_in_keys) {
  return static_cast<size_t>(kMmaRows + kMmaKeys) * d_k * 2 +              // q, k tiles
         (values_in_keys ? 0 : static_cast<size_t>(kMmaKeys) * d_v * 2) +  // v tile
         static_cast<size_t>(kMmaRows) * kMmaKeys * (4 + 2) +              // scores, P
         static_cast<size_t>(kMmaRows) * d_v * 4 +                         // accumulators
         static_cast<size_t>(kMmaRows) * 4 * 4;  // per row: m, l, correction, visible keys
}
// Errors: AttentionLaunch's, elements that are not 2 bytes, head dims that are not multiples
// of 16, a tile beyond the device's (opt-in) shared memory.
absl::StatusOr<LaunchConfig> MmaAttentionLaunch(const AttentionShape& shape, bool values_in_keys,
                                                size_t element_bytes,
                                                const DeviceLimits& limits = {});
// Decode attention by KV head with the keys split (flash-decoding, PagedAttentionDecode): a
// block of kTiledWarps warps takes one query, up to kDecodeHeads query heads that share a KV
// head, and one split of the query's keys, streamed through shared memory kTiledKeys at a time
// (as TiledAttentionLaunch's); a query of n keys has min(kDecodeMaxSplits, ⌈n / kDecodeSplitKeys⌉)
// splits of equal length (a multiple of kTiledKeys): they depend on the query alone, never on
// its batch. Partial results (running max, sum, d_v values per head and split) go to a
// workspace and a merge kernel combines them. grid_x: queries, grid_y: head blocks
// (kv_heads · ⌈group / kDecodeHeads⌉), grid_z (in `splits`): kDecodeMaxSplits.
inline constexpr int kDecodeHeads = 2 * kTiledWarps;
inline constexpr int kDecodeSplitKeys = 256;
inline constexpr int kDecodeMaxSplits = 16;
// A query of `count` keys: its splits, and the keys of each (the last may hold fewer). On the
// host and in the kernels alike (the CUDA emulator computes the same splits).
#if defined(__CUDACC__)
#define TESSERA_HOST_DEVICE __host__ __device__
#else
#define TESSERA_HOST_DEVICE
#endif
TESSERA_HOST_DEVICE inline constexpr int DecodeSplits(int count) {
  const int want = (count + kDecodeSplitKeys - 1) / kDecodeSplitKeys;
  return want < 1 ? 1 : (want > kDecodeMaxSplits ? kDecodeMaxSplits : want);
}
TESSERA_HOST_DEVICE inline constexpr int DecodeSplitLength(int count, int splits) {
  const int len = (count + splits - 1) / splits;
  return (len + kTiledKeys - 1) / kTiledKeys * kTiledKeys;
}
// The local query heads of KV head `kv` (0 .. kv_heads − 1): [*begin, *end). GQA under tensor
// parallelism may cut the first and last group (AttentionShape's head0 and group).
TESSERA_HOST_DEVICE inline void KvHeadRun(int heads, int kv_heads, int head0, int group, int kv,
                                          int* begin, int* end) {
  const int g = group > 0 ? group : heads / kv_heads;
  const int base = group > 0 ? head0 / group : 0;  // the model's KV head of local KV head 0
  const int first = group > 0 ? head0 : 0;         // the model's index of local head 0
  const int b = (base + kv) * g - first, e = (base + kv + 1) * g - first;
  *begin = b < 0 ? 0 : b;
  *end = e > heads ? heads : e;
}
#undef TESSERA_HOST_DEVICE
// Workspace floats per (query, head): the splits' (m, l, d_v values).
inline constexpr int64_t DecodePartialFloats(int d_v) {
  return static_cast<int64_t>(kDecodeMaxSplits) * (d_v + 2);
}
absl::StatusOr<LaunchConfig> DecodeAttentionLaunch(const AttentionShape& shape, bool values_in_keys,
                                                   int* per_lane, const DeviceLimits& limits = {});
// The kernel instance for a per-lane width: the smallest compiled width ≥ per_lane.
int AttentionInstance(int per_lane);

// Top-k over rows of n scores (DSA indexer selection, sampling's top-k): one block of
// kTopKThreads per row, radix selection with a 256-bin histogram in shared memory.
inline constexpr int kTopKThreads = 512;
absl::StatusOr<LaunchConfig> TopKLaunch(int64_t rows, int64_t n, int64_t k,
                                        const DeviceLimits& limits = {});

// MoE routing (spec 5.6): one warp per token; experts live in registers, so E ≤
// kMoeMaxExperts and k ≤ kMoeMaxUsed.
inline constexpr int kMoeMaxExperts = 512;
inline constexpr int kMoeMaxUsed = 32;
struct MoeShape {
  int64_t tokens = 0;
  int experts = 0;
  int used = 0;  // k
  int groups = 1;
  int topk_groups = 1;
};
absl::StatusOr<LaunchConfig> MoeRoutingLaunch(const MoeShape& shape,
                                              const DeviceLimits& limits = {});

// Sampling: one block of kSamplingThreads per sequence over a vocabulary of `vocab`.
inline constexpr int kSamplingThreads = 1024;
absl::StatusOr<LaunchConfig> SamplingLaunch(int64_t sequences, int64_t vocab,
                                            const DeviceLimits& limits = {});

}  // namespace tessera::cuda
