#include "worker/sampling/ranking.h"

#include <algorithm>
#include <array>
#include <limits>

#include "worker/sampling/vocab_math.h"

namespace tessera::sampling::internal {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Keeps the best k in a heap whose front, with Better as "less", is the worst kept.
void Offer(const Candidate& c, std::vector<Candidate>& heap) {
  std::pop_heap(heap.begin(), heap.end(), Better);
  heap.back() = c;
  std::push_heap(heap.begin(), heap.end(), Better);
}

void SortById(std::vector<Candidate>& tokens) {
  std::sort(tokens.begin(), tokens.end(),
            [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
}

// The tokens within a factor `floor` of the best (weights >= floor): a prefix of the
// ranking. False when there are more than `limit` of them or they hold less than `target`.
bool CollectAbove(absl::Span<const float> logits, absl::Span<const float> weights, float floor,
                  double target, size_t limit, std::vector<Candidate>& out) {
  out.clear();
  double mass = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (weights[i] < floor) continue;
    if (out.size() == limit) return false;
    out.push_back({logits[i], static_cast<int32_t>(i)});
    mass += weights[i];
  }
  return mass >= target;
}

// Top-p by buckets of logit: find the bucket where the cumulative weight crosses the
// target; every better bucket is kept whole and only the crossing one is ranked.
void TopPBucketed(absl::Span<const float> logits, absl::Span<const float> weights, double target,
                  std::vector<Candidate>& kept, std::vector<Candidate>& scratch) {
  float max = -kInf;
  float min = kInf;
  for (float l : logits) {
    max = std::max(max, l);
    if (l > -kInf) min = std::min(min, l);
  }
  constexpr int kBuckets = 1024;
  const float scale = max > min ? (kBuckets - 1) / (max - min) : 0.0f;
  // -inf lands in the last bucket (the comparison fails for inf and NaN).
  auto bucket_of = [&](float l) {
    const float d = (max - l) * scale;
    return d < kBuckets - 1 ? static_cast<int>(d) : kBuckets - 1;
  };
  std::array<double, kBuckets> mass{};
  for (size_t i = 0; i < logits.size(); ++i) mass[bucket_of(logits[i])] += weights[i];
  int cut = 0;
  double cum = 0;
  while (cut < kBuckets - 1 && cum + mass[cut] < target) cum += mass[cut++];
  scratch.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (bucket_of(logits[i]) == cut) scratch.push_back({logits[i], static_cast<int32_t>(i)});
  }
  kept.clear();
  if (scratch.empty()) return;  // Unreachable: the crossing bucket holds weight.
  const size_t taken = TakeBestUntil(scratch, weights, target, cum);
  // The last token taken decides the cut: every token ranking at least as well is kept.
  const Candidate last = scratch[taken - 1];
  for (size_t i = 0; i < logits.size(); ++i) {
    const Candidate c{logits[i], static_cast<int32_t>(i)};
    if (!Better(last, c)) kept.push_back(c);
  }
}

}  // namespace

void SelectBest(absl::Span<const Candidate> tokens, size_t k, std::vector<Candidate>& out) {
  out.clear();
  k = std::min(k, tokens.size());
  if (k == 0) return;
  out.assign(tokens.begin(), tokens.begin() + k);
  std::make_heap(out.begin(), out.end(), Better);
  for (size_t j = k; j < tokens.size(); ++j) {
    if (Better(tokens[j], out.front())) Offer(tokens[j], out);
  }
  std::sort_heap(out.begin(), out.end(), Better);
}

void SelectBestDense(absl::Span<const float> logits, size_t k, std::vector<Candidate>& out) {
  const size_t n = logits.size();
  const float* v = logits.data();
  out.clear();
  k = std::min(k, n);
  if (k == 0) return;
  for (size_t i = 0; i < k; ++i) out.push_back({v[i], static_cast<int32_t>(i)});
  std::make_heap(out.begin(), out.end(), Better);
  // Scanning in id order, a token equal to the worst kept one never displaces it, and a
  // block no better than it is skipped after one vectorized max: once the first blocks
  // have filled the heap, almost every block is.
  constexpr size_t kBlock = 64;
  size_t i = k;
  while (i < n) {
    if (i % kBlock == 0 && i + kBlock <= n && MaxOfBlock<kBlock>(v + i) <= out.front().logit) {
      i += kBlock;
      continue;
    }
    if (v[i] > out.front().logit) Offer({v[i], static_cast<int32_t>(i)}, out);
    ++i;
  }
  std::sort_heap(out.begin(), out.end(), Better);
}

size_t TakeBestUntil(std::vector<Candidate>& tokens, absl::Span<const float> weights, double target,
                     double& cum) {
  // Rank a growing front: 256 tokens, then 1024 more, ... (nth_element is linear).
  size_t done = 0;
  size_t chunk = 256;
  while (done < tokens.size()) {
    const size_t next = std::min(tokens.size(), done + chunk);
    if (next < tokens.size()) {
      std::nth_element(tokens.begin() + done, tokens.begin() + next, tokens.end(), Better);
    }
    std::sort(tokens.begin() + done, tokens.begin() + next, Better);
    for (; done < next; ++done) {
      cum += weights[tokens[done].id];
      if (cum >= target) return done + 1;
    }
    chunk *= 4;
  }
  return tokens.size();
}

void TopPOverVocabulary(absl::Span<const float> logits, absl::Span<const float> weights,
                        double target, std::vector<Candidate>& kept,
                        std::vector<Candidate>& scratch) {
  // With a trained model's peaked logits, the few tokens within a factor 1e3 (else 1e6)
  // of the best already hold p of the mass: rank only those.
  constexpr size_t kMaxPrefiltered = 8192;
  for (float floor : {1e-3f, 1e-6f}) {
    if (!CollectAbove(logits, weights, floor, target, kMaxPrefiltered, scratch)) continue;
    double cum = 0;
    scratch.resize(TakeBestUntil(scratch, weights, target, cum));
    SortById(scratch);
    kept.swap(scratch);
    return;
  }
  TopPBucketed(logits, weights, target, kept, scratch);
}

}  // namespace tessera::sampling::internal
