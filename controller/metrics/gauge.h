// Values that go up and down (Prometheus type `gauge`): set by the owner, or read from a
// callback at scrape time.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>

namespace tessera::metrics {

// A lock-free settable value. Set is one atomic store; Increment/Decrement one atomic add.
class Gauge {
 public:
  static constexpr const char* kType = "gauge";

  // `enabled == false` makes every update a no-op (the daemon's --disable-metrics).
  explicit Gauge(bool enabled = true) : enabled_(enabled) {}
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value) {
    if (enabled_) value_.store(value, std::memory_order_relaxed);
  }
  void Increment(double amount = 1) {
    if (enabled_) value_.fetch_add(amount, std::memory_order_relaxed);
  }
  void Decrement(double amount = 1) { Increment(-amount); }

  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  const bool enabled_;
  std::atomic<double> value_{0};
};

// A gauge whose value is computed when Prometheus scrapes (queue lengths, free blocks owned
// by another object). The callback runs on the scraping thread with no registry lock held;
// it must be thread-safe and quick. Without a callback the gauge exposes no sample.
class CallbackGauge {
 public:
  static constexpr const char* kType = "gauge";

  explicit CallbackGauge(bool enabled = true) : enabled_(enabled) {}
  CallbackGauge(const CallbackGauge&) = delete;
  CallbackGauge& operator=(const CallbackGauge&) = delete;

  // Replaces the callback; an empty function clears it (do that before the object the
  // callback reads is destroyed).
  void SetCallback(std::function<double()> callback) {
    if (!enabled_) return;
    std::lock_guard<std::mutex> lock(mu_);
    callback_ = std::move(callback);
  }

  // The callback's current value, or nullopt when none is set.
  std::optional<double> Value() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (!callback_) return std::nullopt;
    return callback_();
  }

 private:
  const bool enabled_;
  mutable std::mutex mu_;  // Guards callback_ against replacement during a scrape.
  std::function<double()> callback_;
};

}  // namespace tessera::metrics
