// A distribution of observed values in fixed buckets (Prometheus type `histogram`).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace tessera::metrics {

// Observe is lock-free: a binary search over the bucket bounds, one atomic add on the
// bucket's count and one on the sum. Counts are stored per bucket (not cumulative) so an
// observation touches one bucket; Read() accumulates them.
class Histogram {
 public:
  static constexpr const char* kType = "histogram";

  // `upper_bounds` are the finite bucket bounds, strictly increasing (the Registry checks
  // this); the +Inf bucket is implicit. `enabled == false` makes Observe a no-op.
  explicit Histogram(std::vector<double> upper_bounds, bool enabled = true);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Counts `value` in the first bucket whose bound is >= value (Prometheus buckets are
  // "less than or equal"). NaN is ignored: it has no bucket and would poison the sum.
  void Observe(double value);

  struct Snapshot {
    // cumulative[i] counts observations <= upper_bounds()[i]; the last entry (one more
    // than the bounds) is the +Inf bucket and equals `count`.
    std::vector<uint64_t> cumulative;
    double sum = 0;
    uint64_t count = 0;
  };
  // A snapshot taken without stopping writers: each bucket is read once, so the buckets
  // are monotone and count equals the +Inf bucket even while others observe; the sum may
  // include an observation whose bucket was read before it landed.
  Snapshot Read() const;

  const std::vector<double>& upper_bounds() const { return upper_bounds_; }

 private:
  const bool enabled_;
  const std::vector<double> upper_bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // upper_bounds_.size() + 1 cells.
  std::atomic<double> sum_{0};
};

}  // namespace tessera::metrics
