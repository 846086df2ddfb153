// An HTTP/1.1 server on Boost.Beast + Asio: a few io_context threads serve every connection
// (no thread per connection), with keep-alive, request size caps, timeouts, streamed
// (chunked) responses for server-sent events, and client-disconnect notification.
//
// The server knows nothing of OpenAI or the engine: it parses a request, hands it to the
// Handler with an Exchange, and writes what the handler answers. Errors the server itself
// answers (413, 431, 400 for unparsable HTTP, 503 while draining) carry a body made by
// ServerOptions::error_body so that they look like the rest of the API.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera::http {

struct HttpHeader {
  std::string name;
  std::string value;
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, as sent
  std::string path;    // target without the query
  std::vector<HttpHeader> headers;
  std::string body;
  std::string remote_address;

  // The first header called `name` (ASCII case-insensitive), or "" when absent.
  std::string Header(const std::string& name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<HttpHeader> headers;  // extra headers (Retry-After, Allow, ...)
};

// One request being answered. Thread-safe: any method may be called from any thread (the
// engine's event sink calls them); the work is posted to the connection's strand, in call
// order. Exactly one of Respond() or BeginStream() ... EndStream() answers a request;
// later calls, and all calls after the client went away, are ignored.
class Exchange {
 public:
  virtual ~Exchange() = default;

  // Answers with a complete response.
  virtual void Respond(HttpResponse response) = 0;
  // Starts a chunked response (status and headers now, body in pieces).
  virtual void BeginStream(int status, std::string content_type,
                           std::vector<HttpHeader> headers = {}) = 0;
  // Appends `data` to the streamed body.
  virtual void Write(std::string data) = 0;
  // Ends the streamed body. `keep_alive` false closes the connection afterwards (used after
  // an error event, so that a client reading to the end of the stream sees it end).
  virtual void EndStream(bool keep_alive = true) = 0;

  // `on_disconnect` runs once, on the connection's strand, if the client closes the
  // connection (or the server is stopped) before the answer was fully written; at once if
  // that already happened. It is dropped unrun once the answer is written. Replaces any
  // earlier callback.
  virtual void OnDisconnect(std::function<void()> on_disconnect) = 0;

  // True once the client went away (advisory: it may change right after the call).
  virtual bool disconnected() const = 0;
};

using Handler = std::function<void(HttpRequest request, std::shared_ptr<Exchange> exchange)>;

// Called once per request when its answer is complete (or abandoned), on an io thread, with
// the status sent; 499 (as nginx logs it) when the client left before any status was sent.
using ExchangeObserver = std::function<void(const HttpRequest& request, int status)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: an ephemeral port (see HttpServer::port())
  int threads = 2;    // io_context threads
  // Connections beyond this many are answered 503 and closed at once (each costs a file
  // descriptor and ~9 KiB while idle).
  int max_connections = 10000;
  size_t max_body_bytes = 8u << 20;
  size_t max_header_bytes = 16u << 10;
  // Reading one request (headers and body) must finish within this.
  std::chrono::milliseconds read_timeout{30'000};
  // A kept-alive connection with no request in flight is closed after this.
  std::chrono::milliseconds idle_timeout{60'000};
  // One write to a client that does not read (slow or stuck) may take at most this.
  std::chrono::milliseconds write_timeout{60'000};
  // Body of the errors the server answers by itself, given the status and a message.
  std::function<std::string(int status, const std::string& message)> error_body;
  ExchangeObserver observer;
};

class HttpServer {
 public:
  // Binds and listens on options.host:options.port, then serves on options.threads threads
  // until Stop() or destruction. Errors name the address that could not be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(ServerOptions options, Handler handler);
  ~HttpServer();

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound port (the ephemeral one when options.port was 0).
  uint16_t port() const { return port_; }

  // Graceful drain, first step: closes the listening socket; requests already being
  // answered go on; a new request on a kept-alive connection is answered 503, and
  // connections close after their current answer.
  void StopAccepting();
  bool draining() const;

  // Requests being answered now (parsed and not yet fully written).
  int ActiveExchanges() const;
  // Open client connections.
  int OpenConnections() const;

  // Closes every connection (in-flight requests see their disconnect callbacks run) and
  // joins the threads. After StopAccepting(), answers still being written get up to 0.5 s
  // to go out first. Idempotent; the destructor calls it.
  void Stop();

  struct Core;  // shared with the connections; defined in the .cc

 private:
  HttpServer() = default;

  std::shared_ptr<Core> core_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::once_flag stopped_;
};

}  // namespace tessera::http
