// Feeds Prometheus from the engine's observer hooks (request latencies, tokens, steps,
// preemptions) and logs each finished request.
#pragma once

#include "absl/strings/str_format.h"
#include "controller/daemon/log.h"
#include "controller/metrics/serving_metrics.h"
#include "controller/serving/engine_observer.h"

namespace tessera::daemon {

class MetricsBridge : public serving::EngineObserver {
 public:
  explicit MetricsBridge(metrics::ServingMetrics& m) : m_(m) {}

  void OnRequestFinished(const serving::RequestTimings& t, const std::string& finish_reason,
                         const std::string& failure_reason) override {
    m_.e2e_latency.Observe(t.e2e);
    m_.queue_time.Observe(t.queue);
    if (t.has_first_token) {
      m_.prefill_time.Observe(t.prefill);
      m_.decode_time.Observe(t.decode);
    }
    m_.prompt_tokens_hist.Observe(t.prompt_tokens);
    m_.generation_tokens_hist.Observe(t.generation_tokens);
    m_.prompt_tokens_total.Increment(t.prompt_tokens);
    if (failure_reason.empty()) {
      m_.RequestSuccess(finish_reason).Increment();
    } else {
      m_.RequestFailure(failure_reason).Increment();
    }
    LogFields f = {{"request_id", t.request_id},
                   {"finish_reason", finish_reason},
                   {"prompt_tokens", std::to_string(t.prompt_tokens)},
                   {"generation_tokens", std::to_string(t.generation_tokens)},
                   {"queue_s", absl::StrFormat("%.4f", t.queue)},
                   {"ttft_s", absl::StrFormat("%.4f", t.ttft)},
                   {"e2e_s", absl::StrFormat("%.4f", t.e2e)}};
    if (t.spec_drafts >= 0) {
      // Mean acceptance length: tokens per decode that carried drafts.
      f.push_back({"spec_drafted_tokens", std::to_string(t.spec_draft_tokens)});
      f.push_back({"spec_accepted_tokens", std::to_string(t.spec_accepted_tokens)});
      f.push_back(
          {"spec_acceptance_length",
           absl::StrFormat("%.2f", t.spec_drafts > 0
                                       ? 1.0 + double(t.spec_accepted_tokens) / t.spec_drafts
                                       : 1.0)});
    }
    if (!failure_reason.empty()) {
      f.push_back({"failure", failure_reason});
      f.push_back({"error", t.error});
      Log(LogLevel::kWarning, "request failed", f);
    } else {
      Log(LogLevel::kInfo, "request finished", f);
    }
  }
  void OnFirstToken(double ttft) override {
    m_.ttft.Observe(ttft);
    m_.generation_tokens_total.Increment();
  }
  void OnToken(double itl) override {
    m_.inter_token_latency.Observe(itl);
    m_.generation_tokens_total.Increment();
  }
  void OnStep(const std::string& phase, double seconds, int) override {
    m_.StepDuration(phase).Observe(seconds);
  }
  void OnStepGap(double seconds) override { m_.step_gap.Observe(seconds); }
  void OnPreemption() override { m_.preemptions.Increment(); }
  void OnSpeculation(int drafted, int accepted) override {
    m_.spec_drafts.Increment();
    m_.spec_draft_tokens.Increment(drafted);
    m_.spec_accepted_tokens.Increment(accepted);
    for (int k = 0; k < accepted; ++k) m_.SpecAcceptedAt(k).Increment();
  }
  void OnPrefixCache(int64_t queried_tokens, int64_t hit_tokens) override {
    m_.prefix_cache_queries.Increment(static_cast<double>(queried_tokens));
    m_.prefix_cache_hits.Increment(static_cast<double>(hit_tokens));
  }

 private:
  metrics::ServingMetrics& m_;
};

}  // namespace tessera::daemon
