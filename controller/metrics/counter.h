// A monotonically increasing count (Prometheus type `counter`).
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>

namespace tessera::metrics {

// Increments must never fall back to a lock inside std::atomic.
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<double>::is_always_lock_free);

// Thread-safe without locks: an increment is one relaxed atomic add, so it is cheap enough
// for per-token paths. Whole increments (tokens, requests) go to an integer cell and stay
// exact however many threads add; fractional amounts (seconds) go to a separate double cell.
class Counter {
 public:
  static constexpr const char* kType = "counter";

  // `enabled == false` makes every update a no-op (the daemon's --disable-metrics).
  explicit Counter(bool enabled = true) : enabled_(enabled) {}
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  void Increment() { Increment(uint64_t{1}); }
  void Increment(uint64_t n) {
    if (enabled_) whole_.fetch_add(n, std::memory_order_relaxed);
  }
  // Adds a fractional amount. Negative, NaN and infinite amounts are ignored: a counter
  // never goes down, and one bad reading must not poison it for the life of the process.
  void Add(double amount) {
    if (enabled_ && std::isfinite(amount) && amount > 0) {
      fraction_.fetch_add(amount, std::memory_order_relaxed);
    }
  }

  double Value() const {
    return static_cast<double>(whole_.load(std::memory_order_relaxed)) +
           fraction_.load(std::memory_order_relaxed);
  }

 private:
  const bool enabled_;
  std::atomic<uint64_t> whole_{0};
  std::atomic<double> fraction_{0};
};

}  // namespace tessera::metrics
