// The OpenAI-compatible REST gateway: routes requests to the Engine and answers with
// OpenAI-shaped bodies.
//
//   POST /v1/chat/completions, POST /v1/completions   (stream: true -> server-sent events)
//   GET  /v1/models, GET /v1/models/{id}
//   POST /reset_prefix_cache   forgets every cached prefix (400 when prefix caching is off)
//   GET  /health   200 while the process lives
//   GET  /ready    200 once the engine is set and ready, else 503 saying why
//   GET  /metrics  Prometheus text from GatewayOptions::metrics_text
//
// With an API key set, /v1/* and /reset_prefix_cache need `Authorization: Bearer KEY` (401
// otherwise); /health,
// /ready and /metrics stay open. Unknown paths are 404, known paths with another method
// 405 (HEAD is answered on every GET route); every error has OpenAI's {"error": {...}} shape.
//
// Browser safety: a POST must carry `Content-Type: application/json` (415 otherwise), so a
// web page cannot send a "simple" cross-origin request (text/plain, form data) to a local
// daemon; when the server is bound to a loopback address, a Host header that is not a
// loopback name is refused (403), so a DNS-rebinding page cannot reach it either. Origins
// listed in GatewayOptions::allowed_origins get CORS headers and preflight answers.
//
// Requests with bodies above serving::kInlinePrepBytes are parsed, rendered and tokenized on the
// PrepPool (when one is given), never on the I/O thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/http/http_server.h"
#include "controller/serving/engine.h"
#include "controller/serving/prep_pool.h"
#include "controller/serving/tool_calling.h"
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
  // Where large requests are prepared (see above); null: on the I/O thread. Must outlive
  // the gateway's requests.
  serving::PrepPool* prep_pool = nullptr;
  // The server listens on a loopback address only: refuse non-loopback Host headers.
  bool loopback_only = false;
  // Origins allowed to call from a browser (CORS); "*" allows any. Empty: none.
  std::vector<std::string> allowed_origins;
  // Chat output: the tool-call format of the model's template (chat::ToolCallFormats();
  // "none": calls are not parsed), used for requests that send `tools` and no
  // `tool_choice: "none"`; and whether <think>…</think> is split into reasoning_content.
  serving::ChatOutputSettings chat_output;
};

// True for "localhost", names under .localhost, 127.0.0.0/8 and ::1, with or without a port
// (the Host header's form; a bare "::1" too, as a bind address).
bool IsLoopbackHost(const std::string& host_header);

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
  void HandleGeneration(HttpRequest request, std::shared_ptr<Exchange> exchange,
                        serving::Engine* engine);
  // Parses, renders, tokenizes and starts the generation (on an I/O or a PrepPool thread).
  void PrepareGeneration(const HttpRequest& request, std::shared_ptr<Exchange> exchange,
                         serving::Engine* engine);
  // The CORS origin to answer `request` with ("" for none).
  std::string CorsOrigin(const HttpRequest& request) const;
  // True when no key is set or the request carries it.
  bool Authorized(const HttpRequest& request) const;

  std::atomic<serving::Engine*> engine_;
  const GatewayOptions options_;
};

// Starts an HttpServer serving `gateway` (error bodies and route statistics wired in).
absl::StatusOr<std::unique_ptr<HttpServer>> StartGatewayServer(ServerOptions options,
                                                               std::shared_ptr<Gateway> gateway);

}  // namespace tessera::http
