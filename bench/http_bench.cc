// Requests per second through the REST gateway's HTTP server (2 io threads) over the
// scripted engine, which costs next to nothing: what is measured is HTTP parsing, routing,
// JSON and the hand-off to and from the engine thread. Each benchmark thread is one
// keep-alive client connection. GET /health is the baseline the others are read against.
#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "controller/http/gateway.h"
#include "tests/support/http_test_client.h"
#include "tests/support/scripted_engine.h"

namespace {

struct Served {
  Served() : engine(tessera::testing::ScriptedEngine::Options{}) {
    gateway = std::make_shared<tessera::http::Gateway>(&engine, tessera::http::GatewayOptions{});
    tessera::http::ServerOptions options;
    options.threads = 2;
    server = *tessera::http::StartGatewayServer(options, gateway);
  }
  tessera::testing::ScriptedEngine engine;
  std::shared_ptr<tessera::http::Gateway> gateway;
  std::unique_ptr<tessera::http::HttpServer> server;
};

Served& Server() {
  static Served* served = new Served();  // lives to process exit, like a daemon's
  return *served;
}

void Run(benchmark::State& state, const std::string& method, const std::string& target,
         const std::string& body) {
  tessera::testing::HttpTestConnection connection(Server().server->port());
  for (auto _ : state) {
    const auto r = connection.Call(method, target, body);
    if (r.status != 200) {
      state.SkipWithError("request failed");
      break;
    }
    benchmark::DoNotOptimize(r.body.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Health(benchmark::State& state) { Run(state, "GET", "/health", ""); }

// One generated token, not streamed.
void BM_CompletionOneToken(benchmark::State& state) {
  Run(state, "POST", "/v1/completions", R"({"prompt":"hi","max_tokens":1})");
}

void BM_ChatOneToken(benchmark::State& state) {
  Run(state, "POST", "/v1/chat/completions",
      R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":1})");
}

// 16 tokens as 16 server-sent events (+ role, finish and [DONE]); items are events.
void BM_ChatStream16(benchmark::State& state) {
  tessera::testing::HttpTestConnection connection(Server().server->port());
  for (auto _ : state) {
    const auto r = connection.Call(
        "POST", "/v1/chat/completions",
        R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":16,"stream":true})");
    if (r.status != 200) {
      state.SkipWithError("request failed");
      break;
    }
    benchmark::DoNotOptimize(r.body.data());
  }
  state.SetItemsProcessed(state.iterations() * 16);
}

BENCHMARK(BM_Health)->Threads(1)->Threads(4)->UseRealTime();
BENCHMARK(BM_CompletionOneToken)->Threads(1)->Threads(4)->UseRealTime();
BENCHMARK(BM_ChatOneToken)->Threads(1)->Threads(4)->UseRealTime();
BENCHMARK(BM_ChatStream16)->Threads(1)->Threads(4)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
