#include "controller/metrics/registry.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tessera::metrics {
namespace internal {

void DieOfMisuse(const std::string& message) {
  std::fprintf(stderr, "tessera metrics: %s\n", message.c_str());
  std::abort();
}

}  // namespace internal

namespace {

void CheckNames(const std::string& name, const std::vector<std::string>& label_names,
                bool is_histogram) {
  if (!IsValidMetricName(name)) {
    internal::DieOfMisuse("metric name '" + name + "' is not [a-zA-Z_:][a-zA-Z0-9_:]*");
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string& label = label_names[i];
    if (!IsValidLabelName(label)) {
      internal::DieOfMisuse("metric " + name + ": label name '" + label +
                            "' is not [a-zA-Z_][a-zA-Z0-9_]* without a leading __");
    }
    if (is_histogram && label == "le") {
      internal::DieOfMisuse("metric " + name + ": histograms reserve the label 'le'");
    }
    for (size_t j = 0; j < i; ++j) {
      if (label_names[j] == label) {
        internal::DieOfMisuse("metric " + name + ": label '" + label + "' appears twice");
      }
    }
  }
}

std::vector<double> CheckedBounds(const std::string& name, std::vector<double> bounds) {
  if (!bounds.empty() && bounds.back() == HUGE_VAL) bounds.pop_back();
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i - 1] < bounds[i]))) {
      internal::DieOfMisuse("histogram " + name +
                            ": bucket bounds must be finite and strictly increasing; bound " +
                            std::to_string(i) + " is " + FormatNumber(bounds[i]));
    }
  }
  return bounds;
}

}  // namespace

template <typename F>
F& Registry::Add(std::unique_ptr<F> family) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = families_.try_emplace(family->name(), nullptr);
  if (inserted) {
    it->second = std::move(family);
    return static_cast<F&>(*it->second);
  }
  auto* existing = dynamic_cast<F*>(it->second.get());
  if (existing == nullptr || existing->label_names() != family->label_names() ||
      existing->upper_bounds() != family->upper_bounds()) {
    internal::DieOfMisuse("metric " + family->name() +
                          " is already registered with a different type, labels or buckets");
  }
  return *existing;
}

template <typename Metric>
MetricFamily<Metric>& Registry::AddUnbucketed(const std::string& name, const std::string& help,
                                              std::vector<std::string> label_names) {
  CheckNames(name, label_names, false);
  const bool enabled = enabled_;
  return Add(std::make_unique<MetricFamily<Metric>>(
      name, help, std::move(label_names), [enabled] { return std::make_unique<Metric>(enabled); }));
}

CounterFamily& Registry::AddCounter(const std::string& name, const std::string& help,
                                    std::vector<std::string> label_names) {
  return AddUnbucketed<Counter>(name, help, std::move(label_names));
}

GaugeFamily& Registry::AddGauge(const std::string& name, const std::string& help,
                                std::vector<std::string> label_names) {
  return AddUnbucketed<Gauge>(name, help, std::move(label_names));
}

CallbackGaugeFamily& Registry::AddCallbackGauge(const std::string& name, const std::string& help,
                                                std::vector<std::string> label_names) {
  return AddUnbucketed<CallbackGauge>(name, help, std::move(label_names));
}

HistogramFamily& Registry::AddHistogram(const std::string& name, const std::string& help,
                                        std::vector<std::string> label_names,
                                        std::vector<double> upper_bounds) {
  CheckNames(name, label_names, true);
  std::vector<double> bounds = CheckedBounds(name, std::move(upper_bounds));
  const bool enabled = enabled_;
  return Add(std::make_unique<HistogramFamily>(
      name, help, std::move(label_names),
      [enabled, bounds] { return std::make_unique<Histogram>(bounds, enabled); }, bounds));
}

std::string Registry::Expose() const {
  std::string out;
  if (!enabled_) return out;
  std::vector<const Family*> families;
  {
    std::lock_guard<std::mutex> lock(mu_);
    families.reserve(families_.size());
    for (const auto& [name, family] : families_) families.push_back(family.get());
  }
  for (const Family* family : families) family->AppendTo(&out);
  return out;
}

}  // namespace tessera::metrics
