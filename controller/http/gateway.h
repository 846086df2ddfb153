// The OpenAI-compatible REST gateway: routes requests to the Engine and answers with
// OpenAI-shaped bodies.
//
//   POST /v1/chat/completions, POST /v1/completions   (stream: true -> server-sent events)
//   GET  /v1/models, GET /v1/models/{id}
//   GET  /health   200 while the process lives
//   GET  /ready    200 once the engine is set and ready, else 503 saying why
//   GET  /metrics  Prometheus text from GatewayOptions::metrics_text
//
// With an API key set, /v1/* needs `Authorization: Bearer KEY` (401 otherwise); /health,
// /ready and /metrics stay open. Unknown paths are 404, known paths with another method
// 405; every error has OpenAI's {"error": {...}} shape.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "controller/http/http_server.h"
#include "controller/serving/engine.h"
#include "nlohmann/json.hpp"

namespace tessera::http {

struct GatewayOptions {
  std::string api_key;  // empty: no authentication
  // Served model names other than the engine's are 404 model_not_found unless this is set.
  bool accept_any_model_name = false;
  std::string system_fingerprint;  // optional, echoed in responses
  // Merged into /ready's body (load progress, worker states, ...).
  std::function<nlohmann::json()> ready_details;
  // The Prometheus exposition text for /metrics (absent: 404).
  std::function<std::string()> metrics_text;
  // Counts answered requests by route ("/v1/chat/completions", ..., "other" for unknown
  // paths) and HTTP status; called on an io thread once the answer is complete.
  std::function<void(const std::string& route, int status)> route_observer;
};

class Gateway {
 public:
  // `engine` may be null while the model loads (then /ready and /v1/* answer 503); set it
  // with SetEngine. The engine must outlive the gateway's requests.
  Gateway(serving::Engine* engine, GatewayOptions options);

  void SetEngine(serving::Engine* engine) { engine_.store(engine); }

  // The HttpServer's Handler and ExchangeObserver.
  void Handle(HttpRequest request, std::shared_ptr<Exchange> exchange);
  void Observe(const HttpRequest& request, int status) const;

  // The route label of a path: the known route it is, or "other".
  static std::string RouteOf(const std::string& path);

 private:
  void HandleModels(const HttpRequest& request, Exchange& exchange, serving::Engine* engine);
  void HandleReady(Exchange& exchange, serving::Engine* engine);
  void HandleGeneration(const HttpRequest& request, std::shared_ptr<Exchange> exchange,
                        serving::Engine* engine);
  // True when no key is set or the request carries it.
  bool Authorized(const HttpRequest& request) const;

  std::atomic<serving::Engine*> engine_;
  const GatewayOptions options_;
};

// Starts an HttpServer serving `gateway` (error bodies and route statistics wired in).
absl::StatusOr<std::unique_ptr<HttpServer>> StartGatewayServer(ServerOptions options,
                                                               std::shared_ptr<Gateway> gateway);

// Compares a presented secret with the expected one in time that depends only on the
// presented secret's length (not on where they differ).
bool ConstantTimeEquals(const std::string& presented, const std::string& expected);

}  // namespace tessera::http
