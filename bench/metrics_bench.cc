// Cost of metrics (prometheus-cpp behind controller/metrics/registry.h) on hot paths: a
// counter increment and a histogram observation, on one thread and contended by several
// threads updating the same child; against a plain (non-atomic) increment and a disabled
// registry in the same run; plus a label lookup and one full scrape of ServingMetrics.
#include <cstdint>

#include "benchmark/benchmark.h"
#include "controller/metrics/registry.h"
#include "controller/metrics/serving_metrics.h"

namespace tessera::metrics {
namespace {

Registry& Enabled() {
  static Registry* registry = new Registry(true);
  return *registry;
}

Registry& Disabled() {
  static Registry* registry = new Registry(false);
  return *registry;
}

void BM_PlainIncrementBaseline(benchmark::State& state) {
  uint64_t n = 0;
  for (auto _ : state) {
    ++n;
    benchmark::DoNotOptimize(n);
  }
}
BENCHMARK(BM_PlainIncrementBaseline);

void BM_CounterIncrement(benchmark::State& state) {
  const Counter c = Enabled().AddCounter("bench_counter_total", "B.").WithLabels({});
  for (auto _ : state) c.Increment();
}
BENCHMARK(BM_CounterIncrement)->Threads(1)->Threads(2)->Threads(8)->UseRealTime();

void BM_CounterIncrementDisabled(benchmark::State& state) {
  const Counter c = Disabled().AddCounter("bench_counter_total", "B.").WithLabels({});
  for (auto _ : state) c.Increment();
}
BENCHMARK(BM_CounterIncrementDisabled);

void BM_CounterAddFraction(benchmark::State& state) {
  const Counter c = Enabled().AddCounter("bench_seconds_total", "B.").WithLabels({});
  for (auto _ : state) c.Increment(0.001);
}
BENCHMARK(BM_CounterAddFraction)->Threads(1)->Threads(8)->UseRealTime();

void BM_HistogramObserve(benchmark::State& state) {
  Registry& r = Enabled();
  ServingMetrics& m = *new ServingMetrics(r, "bench");  // shared by the threads
  double v = 0.0001 * (state.thread_index() + 1);
  for (auto _ : state) {
    m.inter_token_latency.Observe(v);
    v = v < 10 ? v * 1.7 : 0.0001;  // walk the buckets
  }
}
BENCHMARK(BM_HistogramObserve)->Threads(1)->Threads(2)->Threads(8)->UseRealTime();

void BM_HistogramObserveDisabled(benchmark::State& state) {
  const Histogram h = Disabled().AddHistogram("bench_h", "B.", {0.1, 1, 10}).WithLabels({});
  for (auto _ : state) h.Observe(0.5);
}
BENCHMARK(BM_HistogramObserveDisabled);

void BM_LabelLookup(benchmark::State& state) {
  const CounterFamily f = Enabled().AddCounter("bench_labelled_total", "B.");
  for (auto _ : state) f.WithLabels({{"model_name", "bench"}, {"reason", "stop"}}).Increment();
}
BENCHMARK(BM_LabelLookup);

void BM_ExposeServingMetrics(benchmark::State& state) {
  Registry r;
  ServingMetrics m(r, "bench", {.world_size = 8});
  m.ttft.Observe(0.2);
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = r.Expose();
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ExposeServingMetrics)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera::metrics

BENCHMARK_MAIN();
