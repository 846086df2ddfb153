#include "controller/metrics/registry.h"

#include "prometheus/text_serializer.h"

namespace tessera::metrics {

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  if (metric_ == nullptr) return s;
  const prometheus::ClientMetric m = metric_->Collect();
  for (const prometheus::ClientMetric::Bucket& b : m.histogram.bucket) {
    s.cumulative.push_back(b.cumulative_count);
  }
  s.sum = m.histogram.sample_sum;
  s.count = m.histogram.sample_count;
  return s;
}

Registry::Registry(bool enabled)
    : registry_(enabled ? std::make_shared<prometheus::Registry>() : nullptr) {}

CounterFamily Registry::AddCounter(const std::string& name, const std::string& help) {
  if (!enabled()) return {};
  return CounterFamily(&prometheus::BuildCounter().Name(name).Help(help).Register(*registry_));
}

GaugeFamily Registry::AddGauge(const std::string& name, const std::string& help) {
  if (!enabled()) return {};
  return GaugeFamily(&prometheus::BuildGauge().Name(name).Help(help).Register(*registry_));
}

HistogramFamily Registry::AddHistogram(const std::string& name, const std::string& help,
                                       std::vector<double> bounds) {
  if (!enabled()) return {};
  return HistogramFamily(&prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_),
                         std::move(bounds));
}

void Registry::OnScrape(std::function<void()> refresh) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  on_scrape_.push_back(std::move(refresh));
}

std::string Registry::Expose() const {
  if (!enabled()) return "";
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hooks = on_scrape_;
  }
  for (const std::function<void()>& refresh : hooks) refresh();
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace tessera::metrics
