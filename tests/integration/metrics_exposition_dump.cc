// Prints the exposition of a ServingMetrics that has seen some traffic (every histogram
// observed, every gauge set). fake_tesserad.py serves it so prometheus_scrape_test.py can
// be checked against real Prometheus before the daemon exists.
#include <cstdio>

#include "controller/metrics/serving_metrics.h"

int main() {
  tessera::metrics::Registry registry;
  tessera::metrics::ServingMetrics m(registry, "fake-model", {.world_size = 2});
  for (const tessera::metrics::Histogram& h :
       {m.ttft, m.inter_token_latency, m.e2e_latency, m.queue_time, m.prefill_time, m.decode_time,
        m.allreduce}) {
    for (double v : {0.001, 0.01, 0.2}) h.Observe(v);
  }
  m.prompt_tokens_hist.Observe(2);
  m.generation_tokens_hist.Observe(8);
  m.StepDuration("prefill").Observe(0.01);
  m.StepDuration("decode").Observe(0.004);
  m.prompt_tokens_total.Increment(2);
  m.generation_tokens_total.Increment(8);
  m.RequestSuccess("length").Increment();
  m.requests_running.Set(1);
  m.kv_cache_usage.Set(0.25);
  m.KvBlocks("used").Set(4);
  m.KvBlocks("free").Set(12);
  for (int rank = 0; rank < 2; ++rank) {
    m.WorkerUp(rank).Set(1);
    m.LoadProgress(rank).Set(1);
  }
  m.model_load_seconds.Set(1.5);
  m.ready.Set(1);
  m.HttpRequest("/v1/completions", 200).Increment();
  std::fputs(registry.Expose().c_str(), stdout);
  return 0;
}
