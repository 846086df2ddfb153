#include "worker/sampling/speculative.h"

#include <algorithm>

namespace tessera::sampling {
namespace {

// u in [0, 1) from one output of the generator, as Sampler draws.
double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// The first index whose running sum of `weights` exceeds u times their total (the last
// positive one when rounding leaves the sum short).
int32_t Draw(const std::vector<double>& weights, std::mt19937_64& rng) {
  double total = 0;
  for (double w : weights) total += w;
  const double target = Uniform(rng) * total;
  double sum = 0;
  int32_t last = -1;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0) continue;
    sum += weights[i];
    last = static_cast<int32_t>(i);
    if (sum > target) return last;
  }
  return last;
}

}  // namespace

std::vector<int32_t> NgramDraft(absl::Span<const int32_t> history, const NgramOptions& options) {
  const int size = static_cast<int>(history.size());
  for (int n = std::min(options.max_n, size - 1); n >= std::max(options.min_n, 1); --n) {
    const absl::Span<const int32_t> suffix = history.subspan(size - n);
    // The most recent earlier occurrence: start positions from the latest down.
    for (int start = size - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), history.begin() + start)) continue;
      const int from = start + n;
      const int count = std::min(options.max_draft, size - from);
      return std::vector<int32_t>(history.begin() + from, history.begin() + from + count);
    }
  }
  return {};
}

VerifyResult VerifyGreedy(absl::Span<const int32_t> drafts,
                          absl::Span<const int32_t> target_argmax) {
  VerifyResult r;
  while (r.accepted < static_cast<int>(drafts.size()) &&
         drafts[r.accepted] == target_argmax[r.accepted]) {
    ++r.accepted;
  }
  r.next = target_argmax[r.accepted];
  return r;
}

VerifyResult VerifySampled(absl::Span<const int32_t> drafts,
                           absl::Span<const std::vector<double>> p,
                           absl::Span<const std::vector<double>> q, std::mt19937_64& rng) {
  VerifyResult r;
  for (; r.accepted < static_cast<int>(drafts.size()); ++r.accepted) {
    const int i = r.accepted;
    const int32_t d = drafts[i];
    const std::vector<double>& pi = p[i];
    const double qd = q.empty() ? 1.0 : q[i][d];
    // Accept with probability min(1, p(d) / q(d)): u * q(d) < p(d), u in [0, 1).
    if (Uniform(rng) * qd < pi[d]) continue;
    // Rejected: the residual max(0, p - q), normalized.
    std::vector<double> residual = pi;
    if (q.empty()) {
      residual[d] = 0;
    } else {
      for (size_t t = 0; t < residual.size(); ++t) residual[t] = std::max(0.0, pi[t] - q[i][t]);
    }
    r.next = Draw(residual, rng);
    if (r.next < 0) r.next = Draw(pi, rng);  // p == q where p > 0: nothing is left over
    return r;
  }
  r.next = Draw(p[drafts.size()], rng);
  return r;
}

}  // namespace tessera::sampling
