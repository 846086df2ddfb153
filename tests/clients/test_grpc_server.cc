// A gRPC server for client tests: the real GrpcServer over the ScriptedEngine (which
// generates its prompt back). Prints "listening on HOST:PORT" once serving; SIGTERM or SIGINT
// drains (new calls refused, running streams finish) and exits 0.
//
//   test_grpc_server [--port N] [--api-key KEY] [--token-delay-ms N]
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "controller/grpc/grpc_server.h"
#include "tests/support/scripted_engine.h"

namespace {

int Usage() {
  std::fprintf(stderr, "usage: test_grpc_server [--port N] [--api-key KEY] [--token-delay-ms N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  tessera::grpc_api::GrpcServerOptions options;
  options.port = 0;
  int token_delay_ms = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return Usage();
    const char* value = argv[++i];
    if (arg == "--port") {
      options.port = std::atoi(value);
    } else if (arg == "--api-key") {
      options.api_key = value;
    } else if (arg == "--token-delay-ms") {
      token_delay_ms = std::atoi(value);
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

  tessera::testing::ScriptedEngineOptions engine_options;
  engine_options.token_delay = std::chrono::milliseconds(token_delay_ms);
  tessera::testing::ScriptedEngine engine(engine_options);
  auto server = tessera::grpc_api::GrpcServer::Start(&engine, options);
  if (!server.ok()) {
    std::fprintf(stderr, "test_grpc_server: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("listening on %s\n", (*server)->address().c_str());
  std::fflush(stdout);

  int signal = 0;
  sigwait(&signals, &signal);
  (*server)->StopAccepting();
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return 0;
}
