// What every Inference call shares: the engine, the API key, the drain switch, the
// observer, and how a call is finished with a status (retry-after included).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "controller/grpc/api_key.h"
#include "controller/serving/engine.h"

namespace tessera::grpc_api {

// Called once per Inference call with the method's full name
// ("/tessera.v1.Inference/Generate", as ServingMetrics::GrpcRequest takes it) and the status
// code the client received (StatusCodeName gives its canonical name), for request counters.
// Runs on gRPC's threads; must be thread-safe and quick.
using CallObserver = std::function<void(const std::string& method, grpc::StatusCode code)>;

class CallGuard {
 public:
  CallGuard(serving::Engine* engine, std::string api_key, int retry_after_seconds,
            CallObserver observer);

  serving::Engine& engine() const { return *engine_; }

  // The status a new call is refused with (UNAUTHENTICATED without the right key,
  // UNAVAILABLE while draining), or OK to go on.
  grpc::Status Admit(const grpc::CallbackServerContext& context) const;

  // Adds `retry-after` trailing metadata when `status` asks for it, and reports the call
  // to the observer. Call right before finishing the RPC with `status`.
  void BeforeFinish(grpc::CallbackServerContext* context, const std::string& method,
                    const grpc::Status& status) const;

  // New calls are refused with UNAVAILABLE from now on; running streams go on.
  void StopAccepting() { accepting_.store(false); }
  bool accepting() const { return accepting_.load(); }

  // A request id for a call that did not bring one: unique within this process.
  std::string NewRequestId();

  // Streams running now (Generate and Chat calls not yet done).
  int active_streams() const { return active_streams_.load(); }
  void StreamStarted() { active_streams_.fetch_add(1); }
  void StreamDone() { active_streams_.fetch_sub(1); }

 private:
  serving::Engine* engine_;
  ApiKeyCheck api_key_;
  int retry_after_seconds_;
  CallObserver observer_;
  std::atomic<bool> accepting_{true};
  std::atomic<uint64_t> next_request_id_{1};
  std::atomic<int> active_streams_{0};
  const uint64_t id_prefix_;
};

}  // namespace tessera::grpc_api
