#include "controller/metrics/serving_metrics.h"

#include <utility>
#include <vector>

#ifndef TESSERA_VERSION
#define TESSERA_VERSION "unknown"
#endif
#ifndef TESSERA_GIT_SHA
#define TESSERA_GIT_SHA "unknown"
#endif

namespace tessera::metrics {
namespace {

// Bucket bounds follow vLLM's (vllm/engine/metrics.py), extended downwards where a small
// model on CPUs is faster than the GPU servers vLLM's were chosen for.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                          20.0,  40.0,  80.0, 160., 640., 2560.};
const std::vector<double> kInterTokenBuckets = {
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2, 0.3,
    0.4,   0.5,    0.75,  1.0,    2.5,  5.0,   7.5,  10.0,  20.0, 40.0, 80.0};
const std::vector<double> kRequestBuckets = {
    0.005, 0.01, 0.025, 0.05, 0.1,  0.3,  0.5,  0.8,   1.0,   1.5,   2.0,   2.5,    5.0,
    10.0,  15.0, 20.0,  30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kStepBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05,
                                          0.075,  0.1,   0.25,   0.5,   1.0,    2.5,  5.0,   10.0};
const std::vector<double> kAllReduceBuckets = {
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 1.0};
const std::vector<double> kComputeBuckets = {1e-4,   2.5e-4, 5e-4,  1e-3, 2.5e-3, 5e-3,
                                             7.5e-3, 0.01,   0.025, 0.05, 0.1,    0.25,
                                             0.5,    1.0,    2.5,   5.0,  10.0};
// Fine around the control plane's 100 µs budget, so that its median and p90 are readable.
const std::vector<double> kGapBuckets = {5e-6,   1e-5,   2e-5,   3e-5, 4e-5,   5e-5,
                                         7.5e-5, 1e-4,   1.5e-4, 2e-4, 2.5e-4, 5e-4,
                                         1e-3,   2.5e-3, 5e-3,   1e-2, 0.1,    1.0};

// 1, 2, 5, 10, 20, 50, ... up to `max_value` (vLLM's build_1_2_5_buckets).
std::vector<double> OneTwoFiveBuckets(int64_t max_value) {
  std::vector<double> bounds;
  for (int64_t decade = 1;; decade *= 10) {
    for (int64_t m : {1, 2, 5}) {
      if (m * decade > max_value) return bounds;
      bounds.push_back(static_cast<double>(m * decade));
    }
  }
}

// The one child of a family whose only label is model_name.
Histogram ModelHistogram(Registry& r, const std::string& model, const std::string& name,
                         const std::string& help, std::vector<double> bounds) {
  return r.AddHistogram(name, help, std::move(bounds)).WithLabels({{"model_name", model}});
}
Counter ModelCounter(Registry& r, const std::string& model, const std::string& name,
                     const std::string& help) {
  return r.AddCounter(name, help).WithLabels({{"model_name", model}});
}
Gauge ModelGauge(Registry& r, const std::string& model, const std::string& name,
                 const std::string& help) {
  return r.AddGauge(name, help).WithLabels({{"model_name", model}});
}

}  // namespace

ServingMetrics::ServingMetrics(Registry& registry, std::string model_name,
                               const ServingMetricsOptions& options)
    : registry_(registry),
      model_name_(std::move(model_name)),
      success_family_(registry.AddCounter("tessera_request_success_total",
                                          "Requests finished, by finish reason.")),
      failure_family_(
          registry.AddCounter("tessera_request_failure_total",
                              "Requests that ended in an error (no complete answer), by reason.")),
      step_family_(registry.AddHistogram("tessera_step_duration_seconds",
                                         "Duration of one engine step (forward pass of a batch), "
                                         "by phase.",
                                         kStepBuckets)),
      restarts_family_(registry.AddCounter("tessera_worker_restarts_total",
                                           "Times the supervisor restarted a worker, by rank.")),
      kv_blocks_family_(
          registry.AddGauge("tessera_kv_cache_blocks", "KV cache blocks, by state (used, free).")),
      worker_up_family_(
          registry.AddGauge("tessera_worker_up", "1 when the worker of this rank is up, else 0.")),
      load_progress_family_(registry.AddGauge(
          "tessera_model_load_progress",
          "Fraction (0-1) of its shard's bytes the worker of this rank has loaded.")),
      http_family_(registry.AddCounter("tessera_http_requests_total",
                                       "REST requests answered, by route and HTTP status.")),
      grpc_family_(registry.AddCounter("tessera_grpc_requests_total",
                                       "gRPC calls finished, by method and status code.")),
      handoff_family_(registry.AddHistogram(
          "tessera_step_handoff_seconds",
          "The control plane's share of a step: from the controller's hand-off to the last "
          "worker taking the step (direction to_workers), and from the last worker finishing "
          "it to the controller holding every result (to_controller).",
          kGapBuckets)),
      spec_per_pos_family_(registry.AddCounter(
          "tessera_spec_decode_num_accepted_tokens_per_pos_total",
          "Speculative decoding: drafted tokens accepted, by their position in the draft.")),
      ttft(ModelHistogram(registry, model_name_, "tessera_time_to_first_token_seconds",
                          "Time from request arrival to its first generated token.", kTtftBuckets)),
      inter_token_latency(ModelHistogram(registry, model_name_,
                                         "tessera_inter_token_latency_seconds",
                                         "Time between consecutive generated tokens of a "
                                         "request.",
                                         kInterTokenBuckets)),
      e2e_latency(ModelHistogram(registry, model_name_, "tessera_e2e_request_latency_seconds",
                                 "Time from request arrival to its last token.", kRequestBuckets)),
      queue_time(ModelHistogram(registry, model_name_, "tessera_request_queue_time_seconds",
                                "Time a request waited before its first step.", kRequestBuckets)),
      prefill_time(ModelHistogram(registry, model_name_, "tessera_request_prefill_time_seconds",
                                  "Time from a request's first step to its first token.",
                                  kRequestBuckets)),
      decode_time(ModelHistogram(registry, model_name_, "tessera_request_decode_time_seconds",
                                 "Time from a request's first token to its last.",
                                 kRequestBuckets)),
      prompt_tokens_hist(ModelHistogram(registry, model_name_, "tessera_request_prompt_tokens",
                                        "Prompt length of finished requests, in tokens.",
                                        OneTwoFiveBuckets(options.max_model_len))),
      generation_tokens_hist(ModelHistogram(registry, model_name_,
                                            "tessera_request_generation_tokens",
                                            "Generated length of finished requests, in tokens.",
                                            OneTwoFiveBuckets(options.max_model_len))),
      allreduce(ModelHistogram(registry, model_name_, "tessera_allreduce_seconds",
                               "Duration of one all-reduce across the tensor-parallel ranks.",
                               kAllReduceBuckets)),
      worker_compute(
          ModelHistogram(registry, model_name_, "tessera_worker_compute_seconds",
                         "Rank 0's time in one step (forward pass and sampling); "
                         "tessera_step_duration_seconds minus this is the control plane's share.",
                         kComputeBuckets)),
      step_gap(ModelHistogram(registry, model_name_, "tessera_step_gap_seconds",
                              "Scheduler time between a step's result and the next step's "
                              "hand-off while requests keep running.",
                              kGapBuckets)),
      handoff_to_workers(
          handoff_family_.WithLabels({{"model_name", model_name_}, {"direction", "to_workers"}})),
      handoff_to_controller(handoff_family_.WithLabels(
          {{"model_name", model_name_}, {"direction", "to_controller"}})),
      step_control(ModelHistogram(
          registry, model_name_, "tessera_step_control_seconds",
          "The control plane's round trip in one step: from the hand-off to the controller "
          "holding every result, less rank 0's compute (tessera_worker_compute_seconds).",
          kGapBuckets)),
      prompt_tokens_total(ModelCounter(registry, model_name_, "tessera_prompt_tokens_total",
                                       "Prompt tokens processed (prefilled).")),
      generation_tokens_total(ModelCounter(registry, model_name_, "tessera_generation_tokens_total",
                                           "Tokens generated.")),
      preemptions(ModelCounter(registry, model_name_, "tessera_num_preemptions_total",
                               "Requests preempted (KV blocks reclaimed, to be recomputed).")),
      prefix_cache_queries(ModelCounter(
          registry, model_name_, "tessera_prefix_cache_queries_total",
          "Prefix caching: prompt tokens of requests looked up in the cache (once per request).")),
      prefix_cache_hits(ModelCounter(registry, model_name_, "tessera_prefix_cache_hits_total",
                                     "Prefix caching: prompt tokens found in the cache (not "
                                     "prefilled again).")),
      spec_drafts(ModelCounter(registry, model_name_, "tessera_spec_decode_num_drafts_total",
                               "Speculative decoding: decodes that carried drafted tokens.")),
      spec_draft_tokens(ModelCounter(registry, model_name_,
                                     "tessera_spec_decode_num_draft_tokens_total",
                                     "Speculative decoding: drafted tokens verified.")),
      spec_accepted_tokens(ModelCounter(registry, model_name_,
                                        "tessera_spec_decode_num_accepted_tokens_total",
                                        "Speculative decoding: drafted tokens accepted.")),
      requests_running(ModelGauge(registry, model_name_, "tessera_num_requests_running",
                                  "Requests in the running batch.")),
      requests_waiting(ModelGauge(registry, model_name_, "tessera_num_requests_waiting",
                                  "Requests queued, waiting to be scheduled.")),
      kv_cache_usage(ModelGauge(registry, model_name_, "tessera_kv_cache_usage_perc",
                                "Fraction (0-1) of KV cache blocks in use.")),
      model_load_seconds(ModelGauge(registry, model_name_, "tessera_model_load_seconds",
                                    "Seconds the last model load took, from start to "
                                    "every worker loaded.")),
      ready(ModelGauge(registry, model_name_, "tessera_ready",
                       "1 while the daemon serves (model loaded, workers up), else 0.")),
      build_info(
          registry
              .AddGauge("tessera_build_info", "Build of the running daemon; the value is always 1.")
              .WithLabels({{"model_name", model_name_},
                           {"version", options.version.empty() ? TESSERA_VERSION : options.version},
                           {"git_sha", options.git_sha.empty() ? TESSERA_GIT_SHA : options.git_sha},
                           {"backend", options.backend}})) {
  build_info.Set(1);
  for (const char* reason : kFinishedReasons) RequestSuccess(reason);
  for (const char* reason : kFailureReasons) RequestFailure(reason);
  for (const char* phase : kStepPhases) StepDuration(phase);
  // The first draft position exists from the start (0 without speculation), so that the
  // family is scraped before any draft.
  SpecAcceptedAt(0);
  for (int rank = 0; rank < options.world_size; ++rank) {
    WorkerRestarts(rank);
    WorkerUp(rank);
    LoadProgress(rank);
  }
  KvBlocks("used");
  KvBlocks("free");
  for (const char* route : kHttpRoutes) HttpRequest(route, 200);
  for (const char* method : kGrpcMethods) GrpcRequest(method, "OK");
}

Counter ServingMetrics::RequestSuccess(const std::string& finished_reason) const {
  return success_family_.WithLabels(
      {{"model_name", model_name_}, {"finished_reason", finished_reason}});
}

Counter ServingMetrics::RequestFailure(const std::string& reason) const {
  return failure_family_.WithLabels({{"model_name", model_name_}, {"reason", reason}});
}

Histogram ServingMetrics::StepDuration(const std::string& phase) const {
  return step_family_.WithLabels({{"model_name", model_name_}, {"phase", phase}});
}

Counter ServingMetrics::SpecAcceptedAt(int position) const {
  return spec_per_pos_family_.WithLabels(
      {{"model_name", model_name_}, {"position", std::to_string(position)}});
}

Counter ServingMetrics::WorkerRestarts(int rank) const {
  return restarts_family_.WithLabels({{"model_name", model_name_}, {"rank", std::to_string(rank)}});
}

Gauge ServingMetrics::KvBlocks(const std::string& state) const {
  return kv_blocks_family_.WithLabels({{"model_name", model_name_}, {"state", state}});
}

Gauge ServingMetrics::WorkerUp(int rank) const {
  return worker_up_family_.WithLabels(
      {{"model_name", model_name_}, {"rank", std::to_string(rank)}});
}

Gauge ServingMetrics::LoadProgress(int rank) const {
  return load_progress_family_.WithLabels(
      {{"model_name", model_name_}, {"rank", std::to_string(rank)}});
}

Counter ServingMetrics::HttpRequest(const std::string& route, int status) const {
  return http_family_.WithLabels(
      {{"model_name", model_name_}, {"route", route}, {"status", std::to_string(status)}});
}

Counter ServingMetrics::GrpcRequest(const std::string& method, const std::string& code) const {
  return grpc_family_.WithLabels({{"model_name", model_name_}, {"method", method}, {"code", code}});
}

}  // namespace tessera::metrics
