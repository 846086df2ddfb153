// A metric family: one name, help text, type and label names, with one child metric per
// distinct set of label values.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "controller/metrics/counter.h"
#include "controller/metrics/gauge.h"
#include "controller/metrics/histogram.h"
#include "controller/metrics/text_format.h"

namespace tessera::metrics {

namespace internal {
// Registering or labelling metrics wrongly is a bug in the program, not bad input: metric
// and label names are constants in the code. Prints `message` and aborts.
[[noreturn]] void DieOfMisuse(const std::string& message);
}  // namespace internal

class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names, const char* type,
         std::vector<double> upper_bounds = {})
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        type_(type),
        upper_bounds_(std::move(upper_bounds)) {}
  virtual ~Family() = default;
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  const char* type() const { return type_; }
  // Histogram bucket bounds; empty for other types.
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }

  // Appends HELP, TYPE and every child's samples, children ordered by label values. A
  // family with labels and no child yet appends nothing (as Prometheus's own clients do).
  virtual void AppendTo(std::string* out) const = 0;

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const char* const type_;
  const std::vector<double> upper_bounds_;
};

template <typename Metric>
class MetricFamily final : public Family {
 public:
  using Factory = std::function<std::unique_ptr<Metric>()>;

  MetricFamily(std::string name, std::string help, std::vector<std::string> label_names,
               Factory make, std::vector<double> upper_bounds = {})
      : Family(std::move(name), std::move(help), std::move(label_names), Metric::kType,
               std::move(upper_bounds)),
        make_(std::move(make)) {
    // A family without labels has exactly one child; create it now so it is exposed (as
    // zero) from the first scrape.
    if (Family::label_names().empty()) WithLabels({});
  }

  // The child for `label_values` (one per label name, in declared order), created on first
  // use. Takes a lock: on hot paths look the child up once and keep the reference, which
  // stays valid for the family's (the registry's) lifetime. A wrong number of values is a
  // program bug and aborts.
  Metric& WithLabels(const std::vector<std::string>& label_values) {
    if (label_values.size() != label_names().size()) {
      internal::DieOfMisuse("metric " + name() + ": " + std::to_string(label_values.size()) +
                            " label values given, the family has " +
                            std::to_string(label_names().size()) + " labels");
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<Metric>& child = children_[label_values];
    if (child == nullptr) child = make_();
    return *child;
  }

  // The only child of a family without labels.
  Metric& Get() { return WithLabels({}); }

  void AppendTo(std::string* out) const override {
    // Children are never removed, so pointers taken under the lock stay valid; values
    // (and gauge callbacks) are read without holding it.
    std::vector<std::pair<const std::vector<std::string>*, const Metric*>> children;
    {
      std::lock_guard<std::mutex> lock(mu_);
      children.reserve(children_.size());
      for (const auto& [values, metric] : children_) children.emplace_back(&values, metric.get());
    }
    if (children.empty()) return;
    AppendHeader(name(), help(), type(), out);
    for (const auto& [values, metric] : children) {
      AppendSamples(name(), label_names(), *values, *metric, out);
    }
  }

 private:
  const Factory make_;
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> children_;
};

using CounterFamily = MetricFamily<Counter>;
using GaugeFamily = MetricFamily<Gauge>;
using CallbackGaugeFamily = MetricFamily<CallbackGauge>;
using HistogramFamily = MetricFamily<Histogram>;

}  // namespace tessera::metrics
