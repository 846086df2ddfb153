// The daemon's metrics on prometheus-cpp (Debian's prometheus-cpp-dev): a registry that
// can be disabled, handles that are no-ops when it is, values set at scrape time, and the
// text exposition for GET /metrics.
//
//   metrics::Registry registry;                      // one per daemon (false: disabled)
//   metrics::CounterFamily requests =
//       registry.AddCounter("tessera_x_total", "What it counts.");
//   metrics::Counter ok = requests.WithLabels({{"route", "/v1/completions"}});  // keep it
//   ok.Increment();                                  // prometheus::Counter::Increment
//   registry.OnScrape([&] { queue_gauge.Set(queue.size()); });  // read on demand
//   std::string body = registry.Expose();            // text format 0.0.4
//
// prometheus-cpp does the metric types, the families and the exposition. What is ours:
// --disable-metrics (a disabled registry registers nothing, its handles ignore updates and
// it exposes nothing, so the cost of metrics can be measured against it), guards against
// values that would poison a series for the life of the process (NaN observations,
// negative or non-finite counter increments), and the scrape hooks.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/labels.h"
#include "prometheus/registry.h"

namespace tessera::metrics {

// The content type to serve Expose()'s text under.
inline constexpr const char* kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

using Labels = prometheus::Labels;

// Handles are pointers to prometheus-cpp metrics owned by the registry: copy them freely;
// updating through a const handle is allowed, as through a const pointer.

template <typename M>
class Handle {
 public:
  using Metric = M;
  Handle() = default;  // a disabled metric: updates do nothing, values read 0
  explicit Handle(Metric* metric) : metric_(metric) {}

 protected:
  Metric* metric_ = nullptr;
};

// A monotonically increasing count. Increment is lock-free (prometheus-cpp's atomic double).
class Counter : public Handle<prometheus::Counter> {
 public:
  using Handle::Handle;

  // Negative, NaN and infinite amounts are ignored: a counter never goes down, and one bad
  // reading must not poison it.
  void Increment(double amount = 1) const {
    if (metric_ != nullptr && std::isfinite(amount) && amount > 0) metric_->Increment(amount);
  }
  double Value() const { return metric_ != nullptr ? metric_->Value() : 0; }
};

// A value that goes up and down; Set is one atomic store.
class Gauge : public Handle<prometheus::Gauge> {
 public:
  using Handle::Handle;

  void Set(double value) const {
    if (metric_ != nullptr) metric_->Set(value);
  }
  void Increment(double amount = 1) const {
    if (metric_ != nullptr) metric_->Increment(amount);
  }
  void Decrement(double amount = 1) const {
    if (metric_ != nullptr) metric_->Decrement(amount);
  }
  double Value() const { return metric_ != nullptr ? metric_->Value() : 0; }
};

// Observations counted in fixed buckets ("less than or equal" bounds, +Inf implicit).
class Histogram : public Handle<prometheus::Histogram> {
 public:
  using Handle::Handle;

  // NaN is ignored: it has no bucket and would make the sum NaN for good.
  void Observe(double value) const {
    if (metric_ != nullptr && !std::isnan(value)) metric_->Observe(value);
  }

  struct Snapshot {
    // cumulative[i] counts observations <= the i-th bound; the last entry is +Inf (= count).
    std::vector<uint64_t> cumulative;
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;
};

// A family (one name and help text; one child per set of label values) handing out handles.
template <typename Handle>
class Family {
 public:
  using Metric = typename Handle::Metric;
  Family() = default;  // a disabled family
  explicit Family(prometheus::Family<Metric>* family, std::vector<double> bounds = {})
      : family_(family), bounds_(std::move(bounds)) {}

  // The child for `labels`, created on first use (prometheus::Family::Add takes a lock: on
  // hot paths keep the handle, which stays valid for the registry's lifetime).
  Handle WithLabels(const Labels& labels) const {
    if (family_ == nullptr) return Handle();
    if constexpr (std::is_same_v<Metric, prometheus::Histogram>) {
      return Handle(&family_->Add(labels, bounds_));
    } else {
      return Handle(&family_->Add(labels));
    }
  }

 private:
  prometheus::Family<Metric>* family_ = nullptr;
  std::vector<double> bounds_;  // histograms only
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

class Registry {
 public:
  explicit Registry(bool enabled = true);
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  bool enabled() const { return registry_ != nullptr; }

  // The family registered under `name`; registering a name again with the same help text
  // returns the same family (prometheus-cpp's Merge), so two owners can share one. A bad
  // name, or a name reused with another type, throws std::invalid_argument (a bug: names
  // are constants in the code).
  CounterFamily AddCounter(const std::string& name, const std::string& help);
  GaugeFamily AddGauge(const std::string& name, const std::string& help);
  // `bounds`: the finite bucket bounds, increasing.
  HistogramFamily AddHistogram(const std::string& name, const std::string& help,
                               std::vector<double> bounds);

  // `refresh` runs at the start of every Expose(), on the scraping thread: it sets the
  // gauges whose values are read on demand (queue lengths, cache blocks, worker states).
  // It must be quick and thread-safe, and whatever it reads must outlive the scrapes.
  void OnScrape(std::function<void()> refresh);

  // Every family in the text exposition format 0.0.4 (prometheus::TextSerializer), after
  // the scrape hooks ran. Empty when disabled.
  std::string Expose() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;  // null when disabled
  mutable std::mutex mu_;                           // guards on_scrape_
  std::vector<std::function<void()>> on_scrape_;
};

}  // namespace tessera::metrics
