// Hooks through which the daemon turns the engine's events into metrics (Prometheus)
// without the engine knowing about them. Every method is called on the engine's scheduler
// thread: keep them cheap, never block, never call back into the engine.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::serving {

// Seconds, measured with the steady clock. Phases a request never reached are 0 (a request
// cancelled while waiting has only queue and e2e).
struct RequestTimings {
  double queue = 0;    // arrival -> first scheduled
  double prefill = 0;  // first scheduled -> first token
  double decode = 0;   // first token -> finished
  double ttft = 0;     // arrival -> first token
  double e2e = 0;      // arrival -> finished
  bool has_first_token = false;
  int32_t prompt_tokens = 0;
  int32_t generation_tokens = 0;
  std::string request_id;  // for the log line about the request
  std::string error;       // the failure's message, when it failed
  // Speculative decoding (when on): the decodes that carried drafts, the drafted tokens and
  // those kept. spec_drafts < 0 when speculation is off.
  int32_t spec_drafts = -1;
  int32_t spec_draft_tokens = 0;
  int32_t spec_accepted_tokens = 0;
};

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;

  // A request ended. `finish_reason` is "stop", "length" or "abort" (cancelled by the
  // client, or failed); `failure_reason` is empty for a request that finished normally or
  // was cancelled, else one of "worker_error", "deadline_exceeded", "internal".
  virtual void OnRequestFinished(const RequestTimings& timings, const std::string& finish_reason,
                                 const std::string& failure_reason) {}
  // A request's first token (time since arrival).
  virtual void OnFirstToken(double ttft_seconds) {}
  // Each later token (time since the request's previous token).
  virtual void OnToken(double inter_token_seconds) {}
  // A step ran: "prefill" (only prompt chunks), "decode" (only one-token decodes) or
  // "mixed"; `tokens` fed to the model in it.
  virtual void OnStep(const std::string& phase, double seconds, int tokens) {}
  // Between two steps in a row (requests kept running): the time from one step's result
  // to the hand-off of the next, the scheduler's own share of the critical path (applying
  // the result, scheduling, building the step). Event delivery is in it only with
  // overlap_delivery off; otherwise it overlaps the next step.
  virtual void OnStepGap(double seconds) {}
  // A running sequence lost its KV blocks to make room and will be recomputed.
  virtual void OnPreemption() {}
  // Prefix caching: requests admitted for the first time queried the cache with
  // `queried_tokens` prompt tokens, of which `hit_tokens` were found cached.
  virtual void OnPrefixCache(int64_t queried_tokens, int64_t hit_tokens) {}
  // Speculative decoding: a decode carried `drafted` tokens, of which the first `accepted`
  // were kept.
  virtual void OnSpeculation(int drafted, int accepted) {}
};

}  // namespace tessera::serving
