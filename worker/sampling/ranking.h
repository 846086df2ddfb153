// Ranking tokens for the sampler: the order every step uses, top-n selection and top-p's
// cut over a whole vocabulary, each without sorting more tokens than the answer needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace tessera::sampling::internal {

// A token still in the running, with its (penalized) logit.
struct Candidate {
  float logit;
  int32_t id;
};

// The order every step ranks tokens in: higher logit first, then lower id.
inline bool Better(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// The min(k, tokens.size()) best of `tokens` into `out`, best first.
void SelectBest(absl::Span<const Candidate> tokens, size_t k, std::vector<Candidate>& out);
// The same over logits[0..n) with ids 0..n-1.
void SelectBestDense(absl::Span<const float> logits, size_t k, std::vector<Candidate>& out);

// Takes tokens best first, adding weights[id] to `cum`, until `cum` >= target (at least
// one token; all when the target is never reached). Returns how many were taken and
// leaves them best first at the front of `tokens`; only that front gets sorted.
size_t TakeBestUntil(std::vector<Candidate>& tokens, absl::Span<const float> weights, double target,
                     double& cum);

// Top-p over a whole vocabulary: `weights` are exp(logit - max logit), `target` is p times
// their sum. `kept` receives, in id order, the shortest best-first prefix of the ranking
// whose weights reach the target. `scratch` is working space.
void TopPOverVocabulary(absl::Span<const float> logits, absl::Span<const float> weights,
                        double target, std::vector<Candidate>& kept,
                        std::vector<Candidate>& scratch);

}  // namespace tessera::sampling::internal
