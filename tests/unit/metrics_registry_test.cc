// controller/metrics/registry.h: exposition of each metric type (expected text written from
// the format's specification), escaping in context, histogram invariants, exact totals
// under contention, re-registration and misuse.
#include "controller/metrics/registry.h"

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/metrics_exposition_parser.h"

namespace tessera::metrics {
namespace {

using testing::Exposition;
using testing::ParseExposition;
using testing::Sample;

TEST(MetricsRegistry, CounterFamilyWithLabels) {
  Registry r;
  CounterFamily& f = r.AddCounter("test_requests_total", "Requests handled.", {"route", "code"});
  f.WithLabels({"/a", "200"}).Increment(3);
  f.WithLabels({"/a", "500"}).Increment();
  EXPECT_EQ(r.Expose(),
            "# HELP test_requests_total Requests handled.\n"
            "# TYPE test_requests_total counter\n"
            "test_requests_total{route=\"/a\",code=\"200\"} 3\n"
            "test_requests_total{route=\"/a\",code=\"500\"} 1\n");
}

TEST(MetricsRegistry, UnlabelledMetricsExistAtZeroBeforeAnyUpdate) {
  Registry r;
  r.AddCounter("a_total", "A.");
  r.AddGauge("b", "B.");
  EXPECT_EQ(r.Expose(),
            "# HELP a_total A.\n# TYPE a_total counter\na_total 0\n"
            "# HELP b B.\n# TYPE b gauge\nb 0\n");
}

TEST(MetricsRegistry, LabelledFamilyWithoutChildrenExposesNothing) {
  Registry r;
  r.AddCounter("a_total", "A.", {"x"});
  EXPECT_EQ(r.Expose(), "");
}

TEST(MetricsRegistry, CounterAddsFractionsAndIgnoresNegativeOrNonFinite) {
  Registry r;
  Counter& c = r.AddCounter("seconds_total", "S.").Get();
  c.Increment(2);
  c.Add(0.5);
  c.Add(0.25);
  c.Add(-1);
  c.Add(std::nan(""));
  c.Add(HUGE_VAL);
  EXPECT_EQ(c.Value(), 2.75);
  EXPECT_EQ(r.Expose(),
            "# HELP seconds_total S.\n# TYPE seconds_total counter\nseconds_total 2.75\n");
}

TEST(MetricsRegistry, GaugeSetIncrementDecrementAndSpecialValues) {
  Registry r;
  GaugeFamily& f = r.AddGauge("g", "G.", {"k"});
  Gauge& a = f.WithLabels({"a"});
  a.Set(10);
  a.Increment(2.5);
  a.Decrement();
  f.WithLabels({"b"}).Set(-HUGE_VAL);
  f.WithLabels({"c"}).Set(std::nan(""));
  f.WithLabels({"d"}).Set(HUGE_VAL);
  EXPECT_EQ(r.Expose(),
            "# HELP g G.\n# TYPE g gauge\n"
            "g{k=\"a\"} 11.5\n"
            "g{k=\"b\"} -Inf\n"
            "g{k=\"c\"} NaN\n"
            "g{k=\"d\"} +Inf\n");
}

TEST(MetricsRegistry, CallbackGaugeIsReadAtScrapeTime) {
  Registry r;
  std::atomic<int> queue{3};
  CallbackGaugeFamily& f = r.AddCallbackGauge("queue_length", "Queue.", {"q"});
  f.WithLabels({"main"}).SetCallback([&] { return static_cast<double>(queue.load()); });
  f.WithLabels({"unset"});  // no callback: no sample
  EXPECT_EQ(r.Expose(),
            "# HELP queue_length Queue.\n# TYPE queue_length gauge\n"
            "queue_length{q=\"main\"} 3\n");
  queue = 9;
  EXPECT_NE(r.Expose().find("queue_length{q=\"main\"} 9\n"), std::string::npos);
  f.WithLabels({"main"}).SetCallback(nullptr);
  EXPECT_EQ(r.Expose(), "# HELP queue_length Queue.\n# TYPE queue_length gauge\n");
}

// Bounds {0.25, 1, 2.5}; observations 0.25 (bounds are inclusive), 0.75, 1, 3, 100:
// per bucket 1, 2, 0, 2 -> cumulative 1, 3, 3, 5; sum 105 (exact in binary).
TEST(MetricsRegistry, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry r;
  Histogram& h =
      r.AddHistogram("latency_seconds", "Latency.", {"m"}, {0.25, 1, 2.5}).WithLabels({"x"});
  for (double v : {0.25, 0.75, 1.0, 3.0, 100.0}) h.Observe(v);
  h.Observe(std::nan(""));  // ignored
  EXPECT_EQ(r.Expose(),
            "# HELP latency_seconds Latency.\n"
            "# TYPE latency_seconds histogram\n"
            "latency_seconds_bucket{m=\"x\",le=\"0.25\"} 1\n"
            "latency_seconds_bucket{m=\"x\",le=\"1\"} 3\n"
            "latency_seconds_bucket{m=\"x\",le=\"2.5\"} 3\n"
            "latency_seconds_bucket{m=\"x\",le=\"+Inf\"} 5\n"
            "latency_seconds_sum{m=\"x\"} 105\n"
            "latency_seconds_count{m=\"x\"} 5\n");
}

TEST(MetricsRegistry, HistogramWithoutLabelsAndExplicitInfBound) {
  Registry r;
  Histogram& h = r.AddHistogram("size_bytes", "Size.", {}, {1e-5, HUGE_VAL}).Get();
  h.Observe(-HUGE_VAL);
  h.Observe(HUGE_VAL);
  EXPECT_EQ(r.Expose(),
            "# HELP size_bytes Size.\n"
            "# TYPE size_bytes histogram\n"
            "size_bytes_bucket{le=\"1e-05\"} 1\n"
            "size_bytes_bucket{le=\"+Inf\"} 2\n"
            "size_bytes_sum NaN\n"
            "size_bytes_count 2\n");
}

TEST(MetricsRegistry, EscapingInContext) {
  Registry r;
  r.AddGauge("esc", "Line one\nC:\\dir \"q\"", {"v"}).WithLabels({"a\\b\"c\nd"}).Set(1);
  EXPECT_EQ(r.Expose(),
            "# HELP esc Line one\\nC:\\\\dir \"q\"\n"
            "# TYPE esc gauge\n"
            "esc{v=\"a\\\\b\\\"c\\nd\"} 1\n");
  const Exposition e = ParseExposition(r.Expose());
  ASSERT_TRUE(e.errors.empty());
  EXPECT_EQ(e.help.at("esc"), "Line one\nC:\\dir \"q\"");
  ASSERT_EQ(e.samples.size(), 1u);
  EXPECT_EQ(e.samples[0].labels.at("v"), "a\\b\"c\nd");
}

TEST(MetricsRegistry, FamiliesAreOrderedByName) {
  Registry r;
  r.AddGauge("zz", "Z.");
  r.AddGauge("aa", "A.");
  const std::string text = r.Expose();
  EXPECT_LT(text.find("# HELP aa"), text.find("# HELP zz"));
}

TEST(MetricsRegistry, SameShapeRegistersOnceAndSharesChildren) {
  Registry r;
  CounterFamily& a = r.AddCounter("x_total", "X.", {"k"});
  CounterFamily& b = r.AddCounter("x_total", "X.", {"k"});
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(&a.WithLabels({"1"}), &b.WithLabels({"1"}));
}

TEST(MetricsRegistry, DisabledRegistryIgnoresUpdatesAndExposesNothing) {
  Registry r(/*enabled=*/false);
  Counter& c = r.AddCounter("x_total", "X.").Get();
  Gauge& g = r.AddGauge("g", "G.").Get();
  Histogram& h = r.AddHistogram("h", "H.", {}, {1}).Get();
  c.Increment();
  c.Add(1.5);
  g.Set(4);
  h.Observe(0.5);
  EXPECT_EQ(c.Value(), 0);
  EXPECT_EQ(g.Value(), 0);
  EXPECT_EQ(h.Read().count, 0u);
  EXPECT_EQ(r.Expose(), "");
}

using MetricsRegistryDeathTest = ::testing::Test;

TEST(MetricsRegistryDeathTest, MisuseAbortsNamingTheMetric) {
  EXPECT_DEATH(Registry().AddCounter("bad-name", "B."), "bad-name");
  EXPECT_DEATH(Registry().AddCounter("x_total", "X.", {"__x"}), "__x");
  EXPECT_DEATH(Registry().AddCounter("x_total", "X.", {"a", "a"}), "appears twice");
  EXPECT_DEATH(Registry().AddHistogram("h", "H.", {"le"}, {1}), "reserve the label 'le'");
  EXPECT_DEATH(Registry().AddHistogram("h", "H.", {}, {2, 1}), "strictly increasing");
  EXPECT_DEATH(Registry().AddHistogram("h", "H.", {}, {1, std::nan("")}), "strictly increasing");
  EXPECT_DEATH(
      {
        Registry r;
        r.AddCounter("x_total", "X.");
        r.AddGauge("x_total", "X.");
      },
      "already registered");
  EXPECT_DEATH(
      {
        Registry r;
        r.AddCounter("x_total", "X.", {"a", "b"}).WithLabels({"only one"});
      },
      "1 label values given, the family has 2 labels");
}

constexpr int kThreads = 8;
constexpr int kPerThread = 200000;

TEST(MetricsRegistry, CounterHammeredFromEightThreadsTotalsExactly) {
  Registry r;
  CounterFamily& f = r.AddCounter("hits_total", "Hits.", {"k"});
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&f] {
      // Each thread looks the child up itself, racing on its creation.
      Counter& c = f.WithLabels({"shared"});
      for (int i = 0; i < kPerThread; ++i) {
        c.Increment();
        c.Add(0.5);  // exact in binary, so the total is exact whatever the order
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(f.WithLabels({"shared"}).Value(), kThreads * kPerThread * 1.5);
}

TEST(MetricsRegistry, GaugeAndHistogramUnderContention) {
  Registry r;
  Gauge& g = r.AddGauge("inflight", "In flight.").Get();
  Histogram& h = r.AddHistogram("obs", "Obs.", {}, {1, 2, 3}).Get();
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
