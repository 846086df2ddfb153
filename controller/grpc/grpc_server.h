// tesserad's public gRPC endpoint: tessera.v1.Inference over a serving::Engine, the
// standard grpc.health.v1.Health service, and server reflection v1 (with the .proto
// comments) and v1alpha, so grpcurl needs no .proto. Owns its gRPC server and its health thread;
// the destructor shuts both down.
//
// Health: the overall status ("") and "tessera.v1.Inference" are SERVING while the engine
// is ready and the server accepts calls, NOT_SERVING otherwise (polled, so a change shows
// within `health_poll_interval`). Health and reflection need no API key.
//
// Drain: StopAccepting() refuses new Inference calls with UNAVAILABLE (and turns health to
// NOT_SERVING) while running streams go on; Shutdown(deadline) then waits for them up to
// the deadline and cancels what is left (their engine requests are cancelled too).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "controller/grpc/call_guard.h"
#include "controller/grpc/health_service.h"
#include "controller/grpc/inference_service.h"
#include "controller/grpc/reflection_service.h"
#include "controller/serving/engine.h"
#include "controller/serving/prep_pool.h"
#include "controller/serving/tool_calling.h"

namespace tessera::grpc_api {

struct GrpcServerOptions {
  std::string host = "127.0.0.1";   // an IPv6 literal is fine ("::1", no brackets needed)
  int port = 50051;                 // 0: any free port (see GrpcServer::port())
  std::string api_key;              // empty: no authentication
  int max_message_bytes = 4 << 20;  // largest request or response message
  int retry_after_seconds = 1;      // the `retry-after` trailer on RESOURCE_EXHAUSTED
  std::chrono::milliseconds health_poll_interval{200};
  CallObserver observer;  // optional: per-method request counting
  // Where Generate / Chat requests above 16 KiB are parsed, rendered and tokenized (never on
  // a gRPC callback thread); null: inline. Must outlive the server's calls.
  serving::PrepPool* prep_pool = nullptr;
  // How Chat output is split into reasoning, content and tool calls (tesserad's
  // --tool-call-parser and --reasoning-parser, as the REST gateway's
  // GatewayOptions::chat_output). Default: no parsing, the output is all text.
  serving::ChatOutputSettings chat_output;
};

class GrpcServer {
 public:
  // Binds host:port and starts serving. `engine` must outlive the server. Error when the
  // address cannot be bound (in use, bad host) or an option is out of range.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(serving::Engine* engine,
                                                           GrpcServerOptions options);

  ~GrpcServer();  // Shutdown(now) unless already shut down
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // The bound port (the chosen one when the options said 0).
  int port() const { return port_; }
  // "host:port" as clients should dial it.
  const std::string& address() const { return address_; }

  // From now on new Inference calls get UNAVAILABLE; running streams go on. Idempotent.
  void StopAccepting();
  // Generate / Chat streams still running.
  int ActiveStreams() const { return guard_->active_streams(); }

  // Stops the server: waits for running calls until `deadline`, then cancels the rest, and
  // returns when all are done. Idempotent; later calls return at once.
  void Shutdown(std::chrono::system_clock::time_point deadline);

 private:
  GrpcServer(serving::Engine* engine, GrpcServerOptions options);
  void HealthLoop();
  void UpdateHealth();

  serving::Engine* const engine_;
  const GrpcServerOptions options_;
  std::unique_ptr<CallGuard> guard_;
  std::unique_ptr<InferenceService> service_;
  std::unique_ptr<HealthService> health_;
  std::unique_ptr<ReflectionService> reflection_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool shut_down_ = false;
  std::thread health_thread_;
};

}  // namespace tessera::grpc_api
