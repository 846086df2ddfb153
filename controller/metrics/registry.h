// The set of metric families one process exposes at GET /metrics.
//
//   metrics::Registry registry;                       // one per daemon
//   auto& requests = registry.AddCounter("tessera_x_total", "What it counts.", {"route"});
//   metrics::Counter& ok = requests.WithLabels({"/v1/completions"});  // keep this
//   ok.Increment();                                    // one relaxed atomic add
//   std::string body = registry.Expose();              // text format 0.0.4
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "controller/metrics/family.h"

namespace tessera::metrics {

class Registry {
 public:
  // A disabled registry (the daemon's --disable-metrics) hands out metrics whose updates
  // are no-ops and exposes nothing, so the cost of metrics can be measured against it.
  explicit Registry(bool enabled = true) : enabled_(enabled) {}
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  bool enabled() const { return enabled_; }

  // Each Add* returns the family registered under `name`. Registering the same name again
  // with the same type, labels (and buckets) returns the existing family, so two owners
  // (two models' ServingMetrics) share it. An invalid metric or label name, a reused name
  // with a different shape, a histogram label named `le`, or bucket bounds that are not
  // finite and strictly increasing are program bugs and abort with a message naming the
  // metric. References stay valid for the registry's lifetime.
  CounterFamily& AddCounter(const std::string& name, const std::string& help,
                            std::vector<std::string> label_names = {});
  GaugeFamily& AddGauge(const std::string& name, const std::string& help,
                        std::vector<std::string> label_names = {});
  CallbackGaugeFamily& AddCallbackGauge(const std::string& name, const std::string& help,
                                        std::vector<std::string> label_names = {});
  // `upper_bounds` are the finite bucket bounds; a trailing +Inf may be given and is
  // dropped (that bucket always exists).
  HistogramFamily& AddHistogram(const std::string& name, const std::string& help,
                                std::vector<std::string> label_names,
                                std::vector<double> upper_bounds);

  // Every family in the text exposition format 0.0.4 (serve it with kTextContentType),
  // families ordered by name. Empty when disabled.
  std::string Expose() const;

 private:
  template <typename F>
  F& Add(std::unique_ptr<F> family);
  // Counters and gauges: families whose children take only the enabled flag.
  template <typename Metric>
  MetricFamily<Metric>& AddUnbucketed(const std::string& name, const std::string& help,
                                      std::vector<std::string> label_names);

  const bool enabled_;
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Family>> families_;
};

}  // namespace tessera::metrics
