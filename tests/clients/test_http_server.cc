// An HTTP server for client tests: the real REST gateway (controller/http) over the
// ScriptedEngine (which generates its prompt back). Prints "listening on HOST:PORT" once
// serving; SIGTERM or SIGINT drains (new requests refused, running ones finish) and exits 0.
//
//   test_http_server [--port N] [--api-key KEY] [--token-delay-ms N]
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "controller/http/gateway.h"
#include "tests/support/scripted_engine.h"

namespace {

int Usage() {
  std::fprintf(stderr, "usage: test_http_server [--port N] [--api-key KEY] [--token-delay-ms N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  tessera::http::ServerOptions server_options;
  tessera::http::GatewayOptions gateway_options;
  tessera::testing::ScriptedEngine::Options engine_options;
  engine_options.token_delay = std::chrono::milliseconds(2);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return Usage();
    const char* value = argv[++i];
    if (arg == "--port") {
      server_options.port = static_cast<uint16_t>(std::atoi(value));
    } else if (arg == "--api-key") {
      gateway_options.api_key = value;
    } else if (arg == "--token-delay-ms") {
      engine_options.token_delay = std::chrono::milliseconds(std::atoi(value));
    } else {
      return Usage();
    }
  }
  // Blocked before any thread starts, so only sigwait below sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  tessera::testing::ScriptedEngine engine(engine_options);
  gateway_options.metrics_text = [] {
    return std::string("# TYPE tessera_up gauge\ntessera_up 1\n");
  };
  auto gateway = std::make_shared<tessera::http::Gateway>(&engine, gateway_options);
  auto server = tessera::http::StartGatewayServer(server_options, gateway);
  if (!server.ok()) {
    std::fprintf(stderr, "test_http_server: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("listening on %s:%u\n", server_options.host.c_str(), (*server)->port());
  std::fflush(stdout);

  int signal = 0;
  sigwait(&signals, &signal);
  (*server)->StopAccepting();
  engine.StartDrain();
  while (engine.InFlight() > 0 || (*server)->ActiveExchanges() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  (*server)->Stop();
  return 0;
}
