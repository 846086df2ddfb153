// The HTTP server under the gateway: keep-alive and pipelining, size caps (413, 431),
// malformed requests, Expect: 100-continue, idle timeout, client disconnect -> the engine
// request is cancelled, graceful drain, and 1,000 idle SSE connections on two io threads.
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/util/proc_stats.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/gateway_test_util.h"

namespace tessera::testing {
namespace {

using nlohmann::json;

std::string ErrorType(const ClientResponse& r) {
  const json body = json::parse(r.body, nullptr, false);
  if (!body.is_object() || !body.contains("error")) return "<not an OpenAI error: " + r.body + ">";
  return body["error"]["type"];
}

TEST(HttpServerTest, KeepAliveAndPipelining) {
  GatewayUnderTest g;
  HttpTestConnection c(g.port());
  for (int i = 0; i < 3; ++i) {
    const auto r = c.Call("GET", "/health");
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.keep_alive);
  }
  // Two requests in one write: answered in order on the same connection.
  c.WriteRaw(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 14\r\n\r\n{\"prompt\":\"a\"}"
      "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
  const auto first = c.Read();
  const auto second = c.Read();
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(json::parse(first.body)["choices"][0]["text"], "a");
  EXPECT_EQ(second.status, 200);
  EXPECT_EQ(json::parse(second.body)["object"], "list");
}

TEST(HttpServerTest, Http10ClientsGetWholeAnswersThenClose) {
  GatewayUnderTest g;
  HttpTestConnection plain(g.port());
  plain.WriteRaw("GET /health HTTP/1.0\r\n\r\n");
  const auto r = plain.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.keep_alive);
  EXPECT_TRUE(plain.ClosedByServer());
  // A stream to an HTTP/1.0 client is not chunked: its body ends when the connection does.
  HttpTestConnection streamed(g.port());
  const std::string body = R"({"prompt":"ab","stream":true})";
  streamed.WriteRaw(
      "POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body);
  const auto s = streamed.Read();
  EXPECT_EQ(s.status, 200);
  EXPECT_EQ(s.Header("transfer-encoding"), "");
  ASSERT_FALSE(SseData(s.body).empty()) << s.body;
  EXPECT_EQ(SseData(s.body).back(), "[DONE]");
}

TEST(HttpServerTest, ConnectionsOverTheLimitAre503) {
  http::ServerOptions options;
  options.max_connections = 2;
  GatewayUnderTest g({}, options);
  HttpTestConnection a(g.port());
  HttpTestConnection b(g.port());
  EXPECT_EQ(a.Call("GET", "/health").status, 200);
  EXPECT_EQ(b.Call("GET", "/health").status, 200);
  const auto refused = HttpCall(g.port(), "GET", "/health");
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(ErrorType(refused), "service_unavailable");
  a.Close();
  EXPECT_TRUE(WaitFor([&] { return HttpCall(g.port(), "GET", "/health").status == 200; }));
}

TEST(HttpServerTest, OversizedBodyIs413) {
  http::ServerOptions options;
  options.max_body_bytes = 1024;
  GatewayUnderTest g({}, options);
  const std::string big = R"({"prompt":")" + std::string(2000, 'x') + R"("})";
  const auto r = HttpCall(g.port(), "POST", "/v1/completions", big);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(ErrorType(r), "invalid_request_error");
  EXPECT_NE(json::parse(r.body)["error"]["message"].get<std::string>().find("1024"),
            std::string::npos);
  // A body far over the cap: the client still reads the 413 (not a connection reset) after
  // writing it all.
  const std::string huge = R"({"prompt":")" + std::string(4u << 20, 'x') + R"("})";
  EXPECT_EQ(HttpCall(g.port(), "POST", "/v1/completions", huge).status, 413);
  // Just under the cap is fine.
  const std::string fits = R"({"prompt":")" + std::string(900, 'x') + R"(","max_tokens":1})";
  EXPECT_EQ(HttpCall(g.port(), "POST", "/v1/completions", fits).status, 200);
}

TEST(HttpServerTest, OversizedHeadersAre431) {
  http::ServerOptions options;
  options.max_header_bytes = 2048;
  GatewayUnderTest g({}, options);
  const auto r = HttpCall(g.port(), "GET", "/health", "", {{"X-Big", std::string(4000, 'h')}});
  EXPECT_EQ(r.status, 431);
  EXPECT_EQ(ErrorType(r), "invalid_request_error");
}

TEST(HttpServerTest, MalformedRequestIs400) {
  GatewayUnderTest g;
  HttpTestConnection c(g.port());
  c.WriteRaw("GET /health HTTP/9.9\r\n\r\n");
  const auto r = c.Read();
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(ErrorType(r), "invalid_request_error");
  EXPECT_TRUE(c.ClosedByServer());
}

TEST(HttpServerTest, ExpectContinue) {
  GatewayUnderTest g;
  HttpTestConnection c(g.port());
  const std::string body = R"({"prompt":"ok"})";
  c.WriteRaw(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
      "Content-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n");
  EXPECT_EQ(c.ReadHeader().status, 100);
  c.WriteRaw(body);
  const auto r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], "ok");
}

TEST(HttpServerTest, IdleConnectionsAreClosed) {
  http::ServerOptions options;
  options.idle_timeout = std::chrono::milliseconds(100);
  GatewayUnderTest g({}, options);
  HttpTestConnection c(g.port());
  EXPECT_EQ(c.Call("GET", "/health").status, 200);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.ClosedByServer());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(WaitFor([&] { return g.server->OpenConnections() == 0; }));
}

TEST(HttpServerTest, DisconnectCancelsTheEngineRequest) {
  ScriptedEngine::Options slow;
  slow.token_delay = std::chrono::milliseconds(50);
  GatewayUnderTest g({}, {}, slow);
  {
    HttpTestConnection c(g.port());
    c.Send("POST", "/v1/chat/completions",
           R"({"messages":[{"role":"user","content":"a long prompt"}],"stream":true})");
    EXPECT_EQ(c.ReadHeader().status, 200);
    c.Close();
  }
  EXPECT_TRUE(WaitFor([&] { return g.engine->cancels() == 1; }));
  {
    HttpTestConnection c(g.port());
    c.Send("POST", "/v1/completions", R"({"prompt":"a long prompt"})");
    EXPECT_TRUE(WaitFor([&] { return g.engine->requests().size() == 2; }));
    c.Close();
  }
  EXPECT_TRUE(WaitFor([&] { return g.engine->cancels() == 2; }));
  EXPECT_TRUE(WaitFor([&] { return g.engine->running() == 0; }));
  // The non-streaming request never got a status: counted as 499 (client closed).
  EXPECT_TRUE(WaitFor([&] { return g.RouteCount("/v1/completions 499") == 1; }));
  EXPECT_TRUE(WaitFor([&] { return g.server->ActiveExchanges() == 0; }));
}

TEST(HttpServerTest, DrainFinishesInFlightAndRefusesNewRequests) {
  ScriptedEngine::Options slow;
  slow.token_delay = std::chrono::milliseconds(20);
  GatewayUnderTest g({}, {}, slow);
  HttpTestConnection idle(g.port());
  EXPECT_EQ(idle.Call("GET", "/health").status, 200);
  HttpTestConnection busy(g.port());
  busy.Send("POST", "/v1/completions", R"({"prompt":"abcdefghij","stream":true})");
  EXPECT_EQ(busy.ReadHeader().status, 200);

  g.server->StopAccepting();
  EXPECT_TRUE(g.server->draining());
  const auto refused = idle.Call("GET", "/health");
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(ErrorType(refused), "service_unavailable");
  EXPECT_FALSE(refused.keep_alive);
  EXPECT_TRUE(WaitFor([&] {
    try {
      HttpTestConnection fresh(g.port());
      return fresh.Call("GET", "/health").status == 0;
    } catch (const std::exception&) {
      return true;  // connection refused
    }
  }));
  // The in-flight stream runs to its end.
  const auto rest = busy.Read();
  std::string text;
  for (const std::string& d : SseData(rest.body)) {
    if (d == "[DONE]") break;
    text += json::parse(d)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "abcdefghij");
  EXPECT_EQ(SseData(rest.body).back(), "[DONE]");
  EXPECT_EQ(g.engine->cancels(), 0);
  EXPECT_TRUE(WaitFor([&] { return g.server->ActiveExchanges() == 0; }));
}

TEST(HttpServerTest, StopCancelsStreamsInFlight) {
  ScriptedEngine::Options hold;
  hold.hold = true;
  GatewayUnderTest g({}, {}, hold);
  HttpTestConnection c(g.port());
  c.Send("POST", "/v1/completions", R"({"prompt":"abc","stream":true})");
  EXPECT_EQ(c.ReadHeader().status, 200);
  g.server->Stop();
  EXPECT_EQ(g.engine->cancels(), 1);
  EXPECT_TRUE(WaitFor([&] { return g.engine->running() == 0; }));
}

TEST(HttpServerTest, ConcurrentKeepAliveStreams) {
  GatewayUnderTest g;
  constexpr int kClients = 4;
  constexpr int kRequests = 50;
  std::vector<std::thread> clients;
  std::atomic<int> good{0};
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      HttpTestConnection c(g.port());
      for (int i = 0; i < kRequests; ++i) {
        const std::string prompt = "client " + std::to_string(t) + " request " + std::to_string(i);
        const bool stream = i % 2 == 0;
        const auto r =
            c.Call("POST", "/v1/completions", json{{"prompt", prompt}, {"stream", stream}}.dump());
        std::string text;
        if (stream) {
          for (const std::string& d : SseData(r.body)) {
            if (d != "[DONE]") text += json::parse(d)["choices"][0]["text"].get<std::string>();
          }
        } else if (r.status == 200) {
          text = json::parse(r.body)["choices"][0]["text"];
        }
        if (r.status == 200 && text == prompt) good.fetch_add(1);
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(good.load(), kClients * kRequests);
}

TEST(HttpServerTest, ThousandIdleStreamsDoNotExhaustTheServer) {
  constexpr int kStreams = 1000;
  // Client and server ends of every connection live in this process.
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur < 2 * kStreams + 100) {
    limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, 4 * kStreams);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
  }
  if (limit.rlim_cur < 2 * kStreams + 100) GTEST_SKIP() << "RLIMIT_NOFILE hard limit too low";

  ScriptedEngine::Options hold;
  hold.hold = true;  // streams that never produce a token
  http::ServerOptions options;
  options.threads = 2;
  GatewayUnderTest g({}, options, hold);
  const long rss_before = static_cast<long>(util::RssBytes() / 1024);
  std::vector<std::unique_ptr<HttpTestConnection>> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(std::make_unique<HttpTestConnection>(g.port()));
    streams.back()->Send("POST", "/v1/chat/completions",
                         R"({"messages":[{"role":"user","content":"Hi"}],"stream":true})");
  }
  for (auto& s : streams) ASSERT_EQ(s->ReadHeader().status, 200);
  EXPECT_EQ(g.engine->running(), kStreams);
  EXPECT_EQ(g.server->ActiveExchanges(), kStreams);
  const long rss_after = static_cast<long>(util::RssBytes() / 1024);
  std::printf(
      "[ figures  ] %d idle SSE streams: RSS %+ld KiB (%.1f KiB per stream, client "
      "and server ends together)\n",
      kStreams, rss_after - rss_before, static_cast<double>(rss_after - rss_before) / kStreams);

  // A normal request still gets through, promptly.
  g.engine->Configure([](auto& o) { o.hold = false; });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(HttpCall(g.port(), "GET", "/health").status, 200);
  const auto r = HttpCall(g.port(), "POST", "/v1/completions", R"({"prompt":"ok"})");
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], "ok");
  EXPECT_LT(took, std::chrono::seconds(2));

  for (auto& s : streams) s->Close();
  EXPECT_TRUE(
      WaitFor([&] { return g.engine->cancels() == kStreams; }, std::chrono::milliseconds(20000)));
  EXPECT_TRUE(WaitFor([&] { return g.engine->running() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return g.server->OpenConnections() == 0; }));
}

}  // namespace
}  // namespace tessera::testing
