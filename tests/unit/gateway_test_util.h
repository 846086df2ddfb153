// A REST gateway on an ephemeral port over a ScriptedEngine, for the HTTP tests.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "controller/http/gateway.h"
#include "controller/http/http_server.h"
#include "gtest/gtest.h"
#include "tests/support/http_test_client.h"
#include "tests/support/scripted_engine.h"

namespace tessera::testing {

struct GatewayUnderTest {
  explicit GatewayUnderTest(http::GatewayOptions gateway_options = {},
                            http::ServerOptions server_options = {},
                            ScriptedEngine::Options engine_options = {})
      : engine(std::make_unique<ScriptedEngine>(engine_options)) {
    gateway_options.route_observer = [this](const std::string& route, int status) {
      std::lock_guard<std::mutex> lock(mu);
      route_counts[route + " " + std::to_string(status)]++;
    };
    gateway = std::make_shared<http::Gateway>(engine.get(), std::move(gateway_options));
    auto started = http::StartGatewayServer(std::move(server_options), gateway);
    EXPECT_TRUE(started.ok()) << started.status();
    server = *std::move(started);
  }
  ~GatewayUnderTest() {
    server.reset();  // before the engine: its requests' sinks reference connections
  }

  uint16_t port() const { return server->port(); }
  int RouteCount(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu);
    return route_counts[key];
  }

  std::unique_ptr<ScriptedEngine> engine;
  std::shared_ptr<http::Gateway> gateway;
  std::unique_ptr<http::HttpServer> server;
  std::mutex mu;
  std::map<std::string, int> route_counts;
};

// Polls `condition` for up to `timeout`.
inline bool WaitFor(const std::function<bool()>& condition,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return condition();
}

}  // namespace tessera::testing
