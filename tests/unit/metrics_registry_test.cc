// controller/metrics/registry.h, the daemon's glue over prometheus-cpp: what each metric
// type exposes (read back by an independent parser of the text format), escaping in
// context, the guards against poisoned series, scrape hooks, a disabled registry, sharing
// by name, and exact totals and consistent scrapes under contention.
#include "controller/metrics/registry.h"

#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/metrics_exposition_parser.h"

namespace tessera::metrics {
namespace {

using testing::Exposition;
using testing::ParseExposition;
using testing::ParsePromFloat;
using testing::Sample;

// The value of the sample `name` whose labels include `labels`; NaN when there is none.
double ValueOf(const Exposition& e, const std::string& name, const Labels& labels = {}) {
  for (const Sample& s : e.samples) {
    bool match = s.name == name;
    for (const auto& [k, v] : labels) match = match && s.labels.count(k) && s.labels.at(k) == v;
    if (match) return s.value;
  }
  return std::nan("");
}

Exposition Scrape(const Registry& r) {
  Exposition e = ParseExposition(r.Expose());
  EXPECT_TRUE(e.errors.empty()) << e.errors.front();
  return e;
}

TEST(MetricsRegistry, CounterFamilyWithLabels) {
  Registry r;
  CounterFamily f = r.AddCounter("test_requests_total", "Requests handled.");
  f.WithLabels({{"route", "/a"}, {"code", "200"}}).Increment(3);
  f.WithLabels({{"route", "/a"}, {"code", "500"}}).Increment();
  const Exposition e = Scrape(r);
  EXPECT_EQ(e.type.at("test_requests_total"), "counter");
  EXPECT_EQ(e.help.at("test_requests_total"), "Requests handled.");
  ASSERT_EQ(e.samples.size(), 2u);
  EXPECT_EQ(ValueOf(e, "test_requests_total", {{"code", "200"}, {"route", "/a"}}), 3);
  EXPECT_EQ(ValueOf(e, "test_requests_total", {{"code", "500"}}), 1);
}

TEST(MetricsRegistry, CounterIgnoresNegativeAndNonFiniteAmounts) {
  Registry r;
  const Counter c = r.AddCounter("seconds_total", "S.").WithLabels({});
  c.Increment(2);
  c.Increment(0.5);
  c.Increment(0.25);
  c.Increment(-1);
  c.Increment(std::nan(""));
  c.Increment(HUGE_VAL);
  EXPECT_EQ(c.Value(), 2.75);
  EXPECT_EQ(ValueOf(Scrape(r), "seconds_total"), 2.75);
}

TEST(MetricsRegistry, GaugeSetIncrementDecrementAndSpecialValues) {
  Registry r;
  GaugeFamily f = r.AddGauge("g", "G.");
  const Gauge a = f.WithLabels({{"k", "a"}});
  a.Set(10);
  a.Increment(2.5);
  a.Decrement();
  f.WithLabels({{"k", "b"}}).Set(-HUGE_VAL);
  f.WithLabels({{"k", "c"}}).Set(std::nan(""));
  f.WithLabels({{"k", "d"}}).Set(HUGE_VAL);
  const Exposition e = Scrape(r);
  EXPECT_EQ(e.type.at("g"), "gauge");
  EXPECT_EQ(ValueOf(e, "g", {{"k", "a"}}), 11.5);
  EXPECT_EQ(ValueOf(e, "g", {{"k", "b"}}), -HUGE_VAL);
  EXPECT_TRUE(std::isnan(ValueOf(e, "g", {{"k", "c"}})));
  EXPECT_EQ(e.samples.size(), 4u);  // c's NaN is a sample, not a missing one
  EXPECT_EQ(ValueOf(e, "g", {{"k", "d"}}), HUGE_VAL);
}

// Bounds {0.25, 1, 2.5}; observations 0.25 (bounds are inclusive), 0.75, 1, 3, 100:
// per bucket 1, 2, 0, 2 -> cumulative 1, 3, 3, 5; sum 105 (exact in binary).
TEST(MetricsRegistry, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry r;
  const Histogram h =
      r.AddHistogram("latency_seconds", "Latency.", {0.25, 1, 2.5}).WithLabels({{"m", "x"}});
  for (double v : {0.25, 0.75, 1.0, 3.0, 100.0}) h.Observe(v);
  h.Observe(std::nan(""));  // ignored: it would make the sum NaN for good
  const Exposition e = Scrape(r);
  EXPECT_EQ(e.type.at("latency_seconds"), "histogram");
  std::vector<std::pair<double, double>> buckets;
  for (const Sample& s : e.samples) {
    if (s.name != "latency_seconds_bucket") continue;
    EXPECT_EQ(s.labels.at("m"), "x");
    buckets.emplace_back(*ParsePromFloat(s.labels.at("le")), s.value);
  }
  EXPECT_EQ(buckets,
            (std::vector<std::pair<double, double>>{{0.25, 1}, {1, 3}, {2.5, 3}, {HUGE_VAL, 5}}));
  EXPECT_EQ(ValueOf(e, "latency_seconds_sum", {{"m", "x"}}), 105);
  EXPECT_EQ(ValueOf(e, "latency_seconds_count", {{"m", "x"}}), 5);
  const Histogram::Snapshot s = h.Read();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{1, 3, 3, 5}));
  EXPECT_EQ(s.sum, 105);
  EXPECT_EQ(s.count, 5u);
}

TEST(MetricsRegistry, EscapingInContext) {
  Registry r;
  r.AddGauge("esc", "Escaped value.").WithLabels({{"v", "a\\b\"c\nd"}}).Set(1);
  const std::string text = r.Expose();
  EXPECT_NE(text.find("esc{v=\"a\\\\b\\\"c\\nd\"} 1"), std::string::npos) << text;
  const Exposition e = Scrape(r);
  ASSERT_EQ(e.samples.size(), 1u);
  EXPECT_EQ(e.samples[0].labels.at("v"), "a\\b\"c\nd");
}

TEST(MetricsRegistry, ScrapeHooksSetGaugesBeforeEachExposition) {
  Registry r;
  const Gauge queue = r.AddGauge("queue_length", "Queue.").WithLabels({});
  std::atomic<int> length{3};
  int scrapes = 0;
  r.OnScrape([&] {
    queue.Set(length.load());
    ++scrapes;
  });
  EXPECT_EQ(scrapes, 0);  // registering does not run it
  EXPECT_EQ(ValueOf(Scrape(r), "queue_length"), 3);
  length = 9;
  EXPECT_EQ(ValueOf(Scrape(r), "queue_length"), 9);
  EXPECT_EQ(scrapes, 2);
}

TEST(MetricsRegistry, SameNameRegistersOnceAndSharesChildren) {
  Registry r;
  r.AddCounter("x_total", "X.").WithLabels({{"k", "1"}}).Increment();
  r.AddCounter("x_total", "X.").WithLabels({{"k", "1"}}).Increment();
  const Exposition e = Scrape(r);
  EXPECT_EQ(e.samples.size(), 1u);
  EXPECT_EQ(ValueOf(e, "x_total", {{"k", "1"}}), 2);
}

TEST(MetricsRegistry, MisuseThrowsNamingTheProblem) {
  Registry r;
  EXPECT_THROW(r.AddCounter("bad-name", "B."), std::invalid_argument);
  r.AddCounter("y_total", "Y.");
  EXPECT_THROW(r.AddGauge("y_total", "Y."), std::invalid_argument);
}

TEST(MetricsRegistry, DisabledRegistryIgnoresUpdatesRunsNoHooksAndExposesNothing) {
  Registry r(/*enabled=*/false);
  EXPECT_FALSE(r.enabled());
  const Counter c = r.AddCounter("x_total", "X.").WithLabels({});
  const Gauge g = r.AddGauge("g", "G.").WithLabels({{"k", "v"}});
  const Histogram h = r.AddHistogram("h", "H.", {1}).WithLabels({});
  bool hooked = false;
  r.OnScrape([&] { hooked = true; });
  c.Increment();
  g.Set(4);
  h.Observe(0.5);
  EXPECT_EQ(c.Value(), 0);
  EXPECT_EQ(g.Value(), 0);
  EXPECT_EQ(h.Read().count, 0u);
  EXPECT_EQ(r.Expose(), "");
  EXPECT_FALSE(hooked);
}

constexpr int kThreads = 8;
constexpr int kPerThread = 200000;

TEST(MetricsRegistry, CounterHammeredFromEightThreadsTotalsExactly) {
  Registry r;
  CounterFamily f = r.AddCounter("hits_total", "Hits.");
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&f] {
      // Each thread looks the child up itself, racing on its creation.
      const Counter c = f.WithLabels({{"k", "shared"}});
      for (int i = 0; i < kPerThread; ++i) {
        c.Increment();
        c.Increment(0.5);  // exact in binary, so the total is exact whatever the order
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(f.WithLabels({{"k", "shared"}}).Value(), kThreads * kPerThread * 1.5);
}

TEST(MetricsRegistry, GaugeAndHistogramUnderContention) {
  Registry r;
  const Gauge g = r.AddGauge("inflight", "In flight.").WithLabels({});
  const Histogram h = r.AddHistogram("obs", "Obs.", {1, 2, 3}).WithLabels({});
  std::atomic<bool> stop{false};
  std::vector<std::string> scrapes;
  std::thread scraper([&] {
    while (!stop.load()) scrapes.push_back(r.Expose());
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread / 4; ++i) {
        g.Increment();
        h.Observe(static_cast<double>((i + t) % 4));  // 0, 1, 2, 3 in turn
        g.Decrement();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  stop = true;
  scraper.join();
  scrapes.push_back(r.Expose());

  EXPECT_EQ(g.Value(), 0);
  const Histogram::Snapshot s = h.Read();
  const uint64_t n = kThreads * (kPerThread / 4);
  EXPECT_EQ(s.count, n);
  // Values 0..3 equally often: buckets le=1 holds 0 and 1, le=2 adds 2, le=3 adds 3.
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{n / 2, 3 * n / 4, n, n}));
  EXPECT_EQ(s.sum, 1.5 * static_cast<double>(n));

  // Every scrape taken while writers ran is itself consistent.
  for (const std::string& text : scrapes) {
    const Exposition e = ParseExposition(text);
    ASSERT_TRUE(e.errors.empty());
    double previous = 0, inf = -1, count = -2;
    for (const Sample& sample : e.samples) {
      if (sample.name == "obs_bucket") {
        EXPECT_GE(sample.value, previous);
        previous = sample.value;
        if (sample.labels.at("le") == "+Inf") inf = sample.value;
      } else if (sample.name == "obs_count") {
        count = sample.value;
      }
    }
    EXPECT_EQ(inf, count);
  }
}

}  // namespace
}  // namespace tessera::metrics
