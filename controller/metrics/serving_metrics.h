// Every metric tesserad exposes about serving one model (issue "Observability"), named
// after vLLM's with the prefix `tessera_` so vLLM dashboards port by a prefix change.
// Every series carries `model_name`.
//
// Usage (the daemon owns one Registry and one ServingMetrics):
//
//   metrics::Registry registry(/*enabled=*/!flags.disable_metrics);
//   metrics::ServingMetrics m(registry, model_name, {.world_size = tp, .backend = "cpu"});
//   registry.OnScrape([&] { m.requests_waiting.Set(queue.size()); });  // read on demand
//   // GET /metrics: body registry.Expose(), Content-Type metrics::kTextContentType.
//
//   m.queue_time.Observe(seconds);                         // admitted
//   m.ttft.Observe(seconds);                               // first token out
//   m.generation_tokens_total.Increment();                 // each token (lock-free)
//   m.RequestSuccess("stop").Increment();                  // finished
//   m.StepDuration("decode").Observe(seconds);             // each step
//   m.HttpRequest("/v1/completions", 200).Increment();     // each HTTP answer
//   m.kv_cache_usage.Set(used_blocks / double(total_blocks));   // at scrape time
//
// The metrics are prometheus-cpp's (controller/metrics/registry.h); the handles below are
// lock-free for counters and gauges, and take a histogram's own short lock per Observe.
// The labelled accessors (RequestSuccess, StepDuration, WorkerUp, ...) take the family's
// lock for the lookup: fine per request or per step; on a per-token path keep the returned
// handle. With a disabled registry all updates are no-ops; `enabled()` lets callers skip
// clock reads made only for metrics.
#pragma once

#include <cstdint>
#include <string>

#include "controller/metrics/registry.h"

namespace tessera::metrics {

struct ServingMetricsOptions {
  // Ranks 0..world_size-1 get worker_up / restarts / load progress series from the start.
  int world_size = 1;
  // The largest bucket of the prompt / generation token histograms (1-2-5 steps up to it).
  int64_t max_model_len = 131072;
  // tessera_build_info labels; empty version / git_sha mean the values compiled in.
  std::string version = "";
  std::string git_sha = "";
  std::string backend = "cpu";
};

class ServingMetrics {
  // Declared first: the public handles below are initialised from these.
  Registry& registry_;
  const std::string model_name_;
  const CounterFamily success_family_;
  const CounterFamily failure_family_;
  const HistogramFamily step_family_;
  const CounterFamily restarts_family_;
  const GaugeFamily kv_blocks_family_;
  const GaugeFamily worker_up_family_;
  const GaugeFamily load_progress_family_;
  const CounterFamily http_family_;
  const CounterFamily grpc_family_;
  const HistogramFamily handoff_family_;
  const CounterFamily spec_per_pos_family_;

 public:
  ServingMetrics(Registry& registry, std::string model_name,
                 const ServingMetricsOptions& options = {});
  ServingMetrics(const ServingMetrics&) = delete;
  ServingMetrics& operator=(const ServingMetrics&) = delete;

  bool enabled() const { return registry_.enabled(); }
  const std::string& model_name() const { return model_name_; }

  // Labelled children, created on first use. Values the dashboards rely on exist from
  // the first scrape: finished_reason stop / length / abort; failure reasons
  // kFailureReasons; phases prefill / decode; states used / free; ranks 0..world_size-1;
  // each REST route with status 200 and each gRPC method with code OK.
  Counter RequestSuccess(const std::string& finished_reason) const;
  Counter RequestFailure(const std::string& reason) const;
  Histogram StepDuration(const std::string& phase) const;  // "prefill", "decode", "mixed"
  Counter WorkerRestarts(int rank) const;
  Gauge KvBlocks(const std::string& state) const;  // "used" or "free"
  Gauge WorkerUp(int rank) const;                  // 1 up, 0 down
  Gauge LoadProgress(int rank) const;              // 0..1
  Counter HttpRequest(const std::string& route, int status) const;
  // `method` as the gRPC server reports it ("/tessera.v1.Inference/Generate"), `code` as
  // its canonical name ("OK", "INVALID_ARGUMENT").
  Counter GrpcRequest(const std::string& method, const std::string& code) const;

  static constexpr const char* kFinishedReasons[] = {"stop", "length", "abort"};
  static constexpr const char* kFailureReasons[] = {"worker_error", "deadline_exceeded", "rejected",
                                                    "invalid_request", "internal"};
  static constexpr const char* kStepPhases[] = {"prefill", "decode"};
  static constexpr const char* kHttpRoutes[] = {
      "/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/ready", "/metrics"};
  static constexpr const char* kGrpcMethods[] = {
      "/tessera.v1.Inference/Generate",   "/tessera.v1.Inference/Chat",
      "/tessera.v1.Inference/Tokenize",   "/tessera.v1.Inference/Detokenize",
      "/tessera.v1.Inference/ListModels", "/tessera.v1.Inference/GetModelInfo"};

  // Per-request histograms (seconds unless the name says tokens).
  const Histogram ttft;                    // tessera_time_to_first_token_seconds
  const Histogram inter_token_latency;     // tessera_inter_token_latency_seconds
  const Histogram e2e_latency;             // tessera_e2e_request_latency_seconds
  const Histogram queue_time;              // tessera_request_queue_time_seconds
  const Histogram prefill_time;            // tessera_request_prefill_time_seconds
  const Histogram decode_time;             // tessera_request_decode_time_seconds
  const Histogram prompt_tokens_hist;      // tessera_request_prompt_tokens
  const Histogram generation_tokens_hist;  // tessera_request_generation_tokens
  const Histogram allreduce;               // tessera_allreduce_seconds (per all-reduce call)
  const Histogram worker_compute;          // tessera_worker_compute_seconds (rank 0, per step)
  const Histogram step_gap;                // tessera_step_gap_seconds (scheduler, between steps)
  // tessera_step_handoff_seconds{direction}: the control plane's two halves of a step.
  const Histogram handoff_to_workers;     // direction="to_workers"
  const Histogram handoff_to_controller;  // direction="to_controller"
  const Histogram step_control;           // tessera_step_control_seconds

  // tessera_spec_decode_num_accepted_tokens_per_pos_total{position} (0: the first draft).
  Counter SpecAcceptedAt(int position) const;

  const Counter prompt_tokens_total;      // tessera_prompt_tokens_total
  const Counter generation_tokens_total;  // tessera_generation_tokens_total
  const Counter preemptions;              // tessera_num_preemptions_total
  const Counter prefix_cache_queries;     // tessera_prefix_cache_queries_total (tokens)
  const Counter prefix_cache_hits;        // tessera_prefix_cache_hits_total (tokens)
  // Speculative decoding (vLLM's names): decodes that carried drafts, drafted tokens, and
  // drafts accepted (in all, and by their position in the draft: SpecAcceptedAt).
  const Counter spec_drafts;           // tessera_spec_decode_num_drafts_total
  const Counter spec_draft_tokens;     // tessera_spec_decode_num_draft_tokens_total
  const Counter spec_accepted_tokens;  // tessera_spec_decode_num_accepted_tokens_total

  const Gauge requests_running;    // tessera_num_requests_running
  const Gauge requests_waiting;    // tessera_num_requests_waiting
  const Gauge kv_cache_usage;      // tessera_kv_cache_usage_perc, 0..1
  const Gauge model_load_seconds;  // tessera_model_load_seconds
  const Gauge ready;               // tessera_ready: 1 while serving (model loaded, workers up)
  const Gauge build_info;          // tessera_build_info{version,git_sha,backend}, always 1
};

}  // namespace tessera::metrics
