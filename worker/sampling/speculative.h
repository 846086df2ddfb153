// Speculative decoding's two model-independent pieces: drafts made by prompt lookup (n-gram
// matching, as vLLM's `ngram` proposer and llama.cpp's lookup decoding), and the verification
// of K drafted tokens against the target model's distributions at the K + 1 positions it
// scored in one step.
//
//   std::vector<int32_t> drafts = NgramDraft(history, {.max_draft = 4});
//   ... the trunk scores history + drafts; p[i] = its distribution after drafts[0..i) ...
//   VerifyResult r = VerifySampled(drafts, p, /*q=*/{}, rng);
//   emit drafts[0 .. r.accepted) then r.next
//
// Verification is lossless. Greedy keeps the longest prefix of drafts equal to the target's
// argmax and then the target's own token. Sampled verification is the standard rejection
// scheme (Leviathan et al. 2023; Chen et al. 2023): draft i is accepted with probability
// min(1, p_i(d) / q_i(d)); at the first rejection the token is drawn from the residual
// max(0, p_i - q_i), normalized; when every draft is accepted, from p_K. The tokens emitted
// are then distributed exactly as tokens drawn one at a time from p. A deterministic draft
// (n-gram) has q_i one-hot on d_i: accepted with probability p_i(d_i), the residual is p_i
// without d_i.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace tessera::sampling {

struct NgramOptions {
  // The suffix of the history that is looked up: its longest match of at most max_n tokens
  // (and at least min_n) wins.
  int min_n = 1;
  int max_n = 4;
  // Most tokens drafted.
  int max_draft = 4;
};

// The tokens that followed the most recent earlier occurrence of the history's longest
// suffix n-gram (max_n down to min_n tokens), at most max_draft of them; empty when the
// suffix occurs nowhere else. Linear in the history per n.
std::vector<int32_t> NgramDraft(absl::Span<const int32_t> history, const NgramOptions& options);

// NgramDraft for a history that only grows (a sequence's prompt and output), at a cost that
// does not grow with it: the latest start of every n-gram (min_n ≤ n ≤ max_n) is kept in a
// hash map as tokens arrive, so a decode's lookup is a few probes instead of a scan of the
// whole history (the scheduler drafts on the serving thread, between steps). The drafts
// are NgramDraft's exactly: where a hash collides, that n falls back to the scan.
// Memory: about (max_n − min_n + 1) × 16 bytes per history token.
class NgramIndex {
 public:
  // NgramDraft(history, options). `history` should extend the previous call's (a shorter
  // one, one whose last indexed token changed, or other n bounds rebuild the index).
  std::vector<int32_t> Draft(absl::Span<const int32_t> history, const NgramOptions& options);

 private:
  int min_n_ = 0, max_n_ = 0;
  // Per n − min_n_: hash of an n-gram -> the latest start of an n-gram with that hash.
  std::vector<absl::flat_hash_map<uint64_t, int32_t>> latest_;
  // The n-grams whose last token is before end_ are indexed: all but the ones ending at
  // the history's last token (the suffix looked up must not find itself).
  int64_t end_ = 0;
  int32_t last_indexed_ = -1;  // history[end_ - 1]
};

struct VerifyResult {
  // Drafts kept (a prefix of them).
  int accepted = 0;
  // The token after them: the target's own at the first rejected position, or after the
  // last draft when all were kept.
  int32_t next = -1;
};

// `target_argmax[i]` (K + 1 of them): the target's greedy token after drafts[0..i).
VerifyResult VerifyGreedy(absl::Span<const int32_t> drafts,
                          absl::Span<const int32_t> target_argmax);

// `p[i]` (K + 1 rows over the vocabulary, each summing to 1): the target's distribution after
// drafts[0..i), as its sampler would draw from it (penalties, truncation and temperature
// applied). `q[i]` (K rows, or none for a deterministic draft): the drafter's distribution
// that drafts[i] was drawn from. Each draw takes one output of `rng`, as Sampler does.
VerifyResult VerifySampled(absl::Span<const int32_t> drafts,
                           absl::Span<const std::vector<double>> p,
                           absl::Span<const std::vector<double>> q, std::mt19937_64& rng);

}  // namespace tessera::sampling
