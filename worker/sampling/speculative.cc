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

uint64_t HashNgram(const int32_t* tokens, int n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(n);
  for (int i = 0; i < n; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  return h;
}

// The drafts after the latest start < size − n of the history's n-token suffix, by scan.
bool ScanNgram(absl::Span<const int32_t> history, int n, int max_draft, std::vector<int32_t>* out) {
  const int size = static_cast<int>(history.size());
  const absl::Span<const int32_t> suffix = history.subspan(size - n);
  // The most recent earlier occurrence: start positions from the latest down.
  for (int start = size - n - 1; start >= 0; --start) {
    if (!std::equal(suffix.begin(), suffix.end(), history.begin() + start)) continue;
    const int from = start + n;
    const int count = std::min(max_draft, size - from);
    out->assign(history.begin() + from, history.begin() + from + count);
    return true;
  }
  return false;
}

}  // namespace

std::vector<int32_t> NgramDraft(absl::Span<const int32_t> history, const NgramOptions& options) {
  const int size = static_cast<int>(history.size());
  std::vector<int32_t> out;
  for (int n = std::min(options.max_n, size - 1); n >= std::max(options.min_n, 1); --n) {
    if (ScanNgram(history, n, options.max_draft, &out)) return out;
  }
  return out;
}

std::vector<int32_t> NgramIndex::Draft(absl::Span<const int32_t> history,
                                       const NgramOptions& options) {
  const int min_n = std::max(options.min_n, 1), max_n = options.max_n;
  const auto size = static_cast<int64_t>(history.size());
  // The index must hold no n-gram ending at the last token or after it.
  if (min_n != min_n_ || max_n != max_n_ || size <= end_ ||
      (end_ > 0 && history[end_ - 1] != last_indexed_)) {
    min_n_ = min_n;
    max_n_ = max_n;
    latest_.assign(std::max(max_n - min_n + 1, 0), {});
    end_ = 0;
  }
  // Index the n-grams that end before the last token, in order (a later start overwrites);
  // a prompt's are many at once: room for them first.
  if (size - end_ > 1024) {
    for (auto& map : latest_) map.reserve(map.size() + static_cast<size_t>(size - end_));
  }
  for (int64_t e = end_; e + 1 < size; ++e) {
    for (int n = min_n; n <= max_n && n <= e + 1; ++n) {
      const int64_t start = e - n + 1;
      latest_[n - min_n][HashNgram(&history[start], n)] = static_cast<int32_t>(start);
    }
  }
  if (size > end_ + 1) {
    end_ = size - 1;
    last_indexed_ = history[end_ - 1];
  }
  std::vector<int32_t> out;
  for (int n = std::min<int64_t>(max_n, size - 1); n >= min_n; --n) {
    const int32_t* suffix = &history[size - n];
    const auto& map = latest_[n - min_n];
    const auto it = map.find(HashNgram(suffix, n));
    if (it == map.end()) continue;  // no earlier n-gram hashes alike: none is equal
    const int32_t start = it->second;
    if (std::equal(suffix, suffix + n, &history[start])) {
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(options.max_draft, size - from);
      out.assign(history.begin() + from, history.begin() + from + count);
      return out;
    }
    if (ScanNgram(history, n, options.max_draft, &out)) return out;  // a hash collision
  }
  return out;
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
