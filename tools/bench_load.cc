#include "tools/bench_load.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace tessera::cli::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Common short English words: one token each in the usual BPE vocabularies.
constexpr const char* kWords[] = {
    "the",   "of",    "and",   "to",     "in",   "is",   "you",   "that",   "it",    "he",
    "was",   "for",   "on",    "are",    "as",   "with", "his",   "they",   "at",    "be",
    "this",  "have",  "from",  "or",     "one",  "had",  "by",    "word",   "but",   "not",
    "what",  "all",   "were",  "we",     "when", "your", "can",   "said",   "there", "use",
    "an",    "each",  "which", "she",    "do",   "how",  "their", "if",     "will",  "up",
    "other", "about", "out",   "many",   "then", "them", "these", "so",     "some",  "her",
    "would", "make",  "like",  "him",    "into", "time", "has",   "look",   "two",   "more",
    "write", "go",    "see",   "number", "no",   "way",  "could", "people", "my",    "than",
    "first", "water", "been",  "call",   "who",  "oil",  "its",   "now",    "find",  "long",
    "down",  "day",   "did",   "get",    "come", "made", "may",   "part",   "over",  "new"};

// Runs one asynchronous operation to completion on `io` (so that the stream's deadline
// applies: beast::tcp_stream's timeouts only cover asynchronous operations).
template <typename Start>
beast::error_code RunOne(asio::io_context& io, Start start) {
  beast::error_code result;
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  io.restart();
  io.run();
  return result;
}

// Resolves and connects `stream` to `server` (under the stream's deadline).
absl::Status ConnectTo(const ServerAddress& server, asio::io_context& io,
                       beast::tcp_stream& stream) {
  tcp::resolver resolver(io);
  beast::error_code ec;
  const auto endpoints = resolver.resolve(server.host, server.port, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", server.host, ": ", ec.message()));
  }
  ec = RunOne(io, [&](auto handler) { stream.async_connect(endpoints, std::move(handler)); });
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot connect to ", server.ToString(), ": ", ec.message()));
  }
  stream.socket().set_option(tcp::no_delay(true), ec);
  return absl::OkStatus();
}

// Splits a server-sent-event stream into events and hands each event's data to `on_data`.
class SseReader {
 public:
  template <typename OnData>
  void Feed(const char* bytes, size_t n, OnData on_data) {
    pending_.append(bytes, n);
    for (;;) {
      size_t end = pending_.find("\n\n");
      size_t skip = 2;
      const size_t crlf = pending_.find("\r\n\r\n");
      if (crlf != std::string::npos && (end == std::string::npos || crlf < end)) {
        end = crlf;
        skip = 4;
      }
      if (end == std::string::npos) return;
      std::string data;
      bool has_data = false;
      for (absl::string_view line : absl::StrSplit(pending_.substr(0, end), '\n')) {
        line = absl::StripTrailingAsciiWhitespace(line);
        if (!absl::ConsumePrefix(&line, "data:")) continue;
        if (absl::StartsWith(line, " ")) line.remove_prefix(1);
        if (has_data) data += '\n';
        data.append(line.data(), line.size());
        has_data = true;
      }
      pending_.erase(0, end + skip);
      if (has_data) on_data(data);
    }
  }

 private:
  std::string pending_;
};

void ReadUsage(const json& usage, RequestResult* result) {
  result->prompt_tokens = usage.value("prompt_tokens", int64_t{0});
  result->completion_tokens = usage.value("completion_tokens", int64_t{0});
  const json details = usage.value("prompt_tokens_details", json());
  if (details.is_object()) result->cached_tokens = details.value("cached_tokens", int64_t{0});
}

// What one request's event stream said so far.
struct StreamState {
  Clock::time_point start;
  Clock::time_point last_token;
  bool saw_token = false;
  bool usage_seen = false;
  int64_t token_events = 0;
};

// Records one SSE event (its data, received at `now`) into `result`.
void OnStreamEvent(const std::string& data, Clock::time_point now, StreamState* state,
                   RequestResult* result) {
  if (data == "[DONE]" || !result->error.empty()) return;
  const json event = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object()) {
    result->error = "the event stream carried data that is not JSON: " + data.substr(0, 80);
    return;
  }
  if (event.contains("error")) {
    result->error = "error event in the stream: " + ErrorMessageOf(data);
    return;
  }
  const json usage = event.value("usage", json());
  if (usage.is_object()) {
    ReadUsage(usage, result);
    state->usage_seen = true;
  }
  const json choices = event.value("choices", json());
  if (!choices.is_array() || choices.empty()) return;
  if (result->ttft_s < 0) result->ttft_s = Seconds(state->start, now);
  // A token event carries text or (with --logprobs) the token's log-probability; the
  // last event of a choice carries neither, only its finish_reason.
  bool has_token = false;
  for (const json& c : choices) {
    if (!c.is_object()) continue;
    const json text = c.value("text", json());
    if (text.is_string() && c.value("index", 0) == 0) result->text += text.get<std::string>();
    if ((text.is_string() && !text.get_ref<const std::string&>().empty()) ||
        c.value("logprobs", json()).is_object()) {
      has_token = true;
    }
  }
  if (!has_token) return;
  ++state->token_events;
  if (state->saw_token) result->itl_s.push_back(Seconds(state->last_token, now));
  state->last_token = now;
  state->saw_token = true;
}

// One client's keep-alive connection; reconnects when the server closes it.
class Client {
 public:
  explicit Client(const LoadOptions& options) : options_(options), stream_(io_) {}

  RequestResult Send(const std::string& body) {
    RequestResult result;
    const Clock::time_point start = Clock::now();
    stream_.expires_after(
        std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1e3)));
    // A reused connection the server has meanwhile closed fails before any answer: retry
    // once on a fresh one.
    const bool reused = connected_;
    if (!Exchange(body, start, &result) && reused && result.status == 0) {
      result = RequestResult();
      Exchange(body, start, &result);
    }
    result.e2e_s = Seconds(start, Clock::now());
    stream_.expires_never();
    return result;
  }

 private:
  // False when the request failed (result->error says why).
  bool Exchange(const std::string& body_text, Clock::time_point start, RequestResult* result) {
    if (absl::Status s = Connect(); !s.ok()) {
      result->error = std::string(s.message());
      return false;
    }
    http::request<http::string_body> request{http::verb::post,
                                             options_.server.path_prefix + "/v1/completions", 11};
    request.set(http::field::host, options_.server.host + ":" + options_.server.port);
    request.set(http::field::user_agent, "tessera-bench");
    request.set(http::field::content_type, "application/json");
    if (!options_.api_key.empty()) {
      request.set(http::field::authorization, "Bearer " + options_.api_key);
    }
    request.keep_alive(true);
    request.body() = body_text;
    request.prepare_payload();
    beast::error_code ec =
        RunOne(io_, [&](auto handler) { http::async_write(stream_, request, std::move(handler)); });
    if (ec) return Fail(result, "sending the request", ec);

    http::response_parser<http::buffer_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    ec = RunOne(io_, [&](auto handler) {
      http::async_read_header(stream_, buffer_, parser, std::move(handler));
    });
    if (ec) return Fail(result, "reading the answer", ec);
    const int status = parser.get().result_int();
    const beast::string_view content_type = parser.get()[http::field::content_type];
    const bool event_stream = status == 200 && content_type.starts_with("text/event-stream");

    std::string body;  // the whole body, unless it is an event stream
    SseReader sse;
    StreamState state;
    state.start = start;
    char chunk[16384];
    while (!parser.is_done()) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof(chunk);
      ec = RunOne(io_, [&](auto handler) {
        http::async_read_some(stream_, buffer_, parser, std::move(handler));
      });
      if (ec == http::error::need_buffer) ec = {};
      if (ec) return Fail(result, "reading the answer", ec);
      const size_t n = sizeof(chunk) - parser.get().body().size;
      if (!event_stream) {
        body.append(chunk, n);
        continue;
      }
      const Clock::time_point now = Clock::now();
      sse.Feed(chunk, n,
               [&](const std::string& data) { OnStreamEvent(data, now, &state, result); });
    }
    result->status = status;
    if (!parser.get().keep_alive()) Disconnect();
    if (status != 200) {
      result->error = absl::StrCat("HTTP ", status, ": ", ErrorMessageOf(body));
      return false;
    }
    if (!event_stream) {
      const json answer = json::parse(body, nullptr, /*allow_exceptions=*/false);
      const json usage = answer.is_object() ? answer.value("usage", json()) : json();
      if (!usage.is_object()) {
        result->error = "the answer has no usage object: " + body.substr(0, 80);
        return false;
      }
      ReadUsage(usage, result);
      const json choices = answer.value("choices", json());
      if (choices.is_array() && !choices.empty() && choices[0].is_object()) {
        const json text = choices[0].value("text", json());
        if (text.is_string()) result->text = text.get<std::string>();
      }
    } else if (!state.usage_seen && result->error.empty()) {
      result->completion_tokens = state.token_events;  // a server that ignores include_usage
    }
    return result->error.empty();
  }

  absl::Status Connect() {
    if (connected_) return absl::OkStatus();
    if (absl::Status s = ConnectTo(options_.server, io_, stream_); !s.ok()) return s;
    buffer_.clear();
    connected_ = true;
    return absl::OkStatus();
  }

  void Disconnect() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    buffer_.clear();
    connected_ = false;
  }

  bool Fail(RequestResult* result, const char* what, beast::error_code ec) {
    Disconnect();
    result->error = absl::StrCat(what, " from ", options_.server.ToString(), ": ",
                                 ec == beast::error::timeout ? "timed out" : ec.message());
    return false;
  }

  const LoadOptions& options_;
  asio::io_context io_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  bool connected_ = false;
};

}  // namespace

std::string ServerAddress::ToString() const {
  const bool v6 = host.find(':') != std::string::npos;
  return absl::StrCat("http://", v6 ? "[" : "", host, v6 ? "]" : "", ":", port, path_prefix);
}

absl::StatusOr<ServerAddress> ParseServerUrl(const std::string& url) {
  absl::string_view rest = url;
  if (absl::StartsWithIgnoreCase(rest, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--url ", url, ": https is not supported; use http://HOST:PORT"));
  }
  if (!absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--url ", url, ": expected http://HOST[:PORT][/PREFIX]"));
  }
  ServerAddress address;
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  if (slash != absl::string_view::npos) {
    absl::string_view prefix = rest.substr(slash);
    while (absl::ConsumeSuffix(&prefix, "/")) {
    }
    // http://host:port/v1 names the API root; requests add /v1 themselves.
    absl::ConsumeSuffix(&prefix, "/v1");
    address.path_prefix = std::string(prefix);
  }
  absl::string_view port;
  if (absl::ConsumePrefix(&authority, "[")) {  // [::1]:8080
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--url ", url, ": unclosed '[' in the host"));
    }
    address.host = std::string(authority.substr(0, close));
    port = authority.substr(close + 1);
    if (!port.empty() && !absl::ConsumePrefix(&port, ":")) {
      return absl::InvalidArgumentError(absl::StrCat("--url ", url, ": expected ':' after ']'"));
    }
  } else {
    const size_t colon = authority.find(':');
    address.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) port = authority.substr(colon + 1);
  }
  if (address.host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--url ", url, ": no host"));
  }
  int port_number = 80;
  if (!port.empty() &&
      (!absl::SimpleAtoi(port, &port_number) || port_number < 1 || port_number > 65535)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--url ", url, ": port '", std::string(port), "' is not in 1..65535"));
  }
  address.port = std::to_string(port_number);
  return address;
}

std::string MakePrompt(int words, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string prompt;
  for (int i = 0; i < words; ++i) {
    if (i > 0) prompt += ' ';
    prompt += kWords[rng() % std::size(kWords)];
  }
  return prompt;
}

std::string PromptOf(const LoadOptions& options, int index) {
  const uint64_t seed = options.seed + static_cast<uint64_t>(index);
  std::string own = MakePrompt(options.prompt_words, seed);
  if (options.shared_prefix_words <= 0) return own;
  return absl::StrCat(MakePrompt(options.shared_prefix_words, kSharedPrefixSeed), " ", own);
}

std::string CompletionBody(const LoadOptions& options, int index) {
  return CompletionBodyFor(options, PromptOf(options, index),
                           options.seed + static_cast<uint64_t>(index));
}

std::string CompletionBodyFor(const LoadOptions& options, const std::string& prompt,
                              uint64_t seed) {
  json body = {{"model", options.model},
               {"prompt", prompt},
               {"max_tokens", options.gen_len},
               {"ignore_eos", true},
               {"temperature", options.temperature},
               {"seed", static_cast<int64_t>(seed & 0x7fffffffffffffffULL)},
               {"stream", options.stream}};
  if (options.stream) body["stream_options"] = {{"include_usage", true}};
  if (options.logprobs) body["logprobs"] = 0;
  if (options.extra_body.is_object()) body.update(options.extra_body);
  return body.dump();
}

LoadResult RunLoad(const LoadOptions& options) {
  LoadResult load;
  load.requests.resize(static_cast<size_t>(std::max(options.requests, 0)));
  std::atomic<int> next{0};
  const Clock::time_point start = Clock::now();
  {
    std::vector<std::jthread> clients;
    const int turns = std::max(options.turns, 1);
    const int units = (options.requests + turns - 1) / turns;  // conversations, or requests
    for (int c = 0; c < options.concurrency; ++c) {
      clients.emplace_back([&options, &load, &next, turns, units] {
        Client client(options);
        for (int u = next++; u < units; u = next++) {
          if (turns == 1) {
            load.requests[u] = client.Send(CompletionBody(options, u));
            continue;
          }
          std::string history;
          const int turn_words = options.turn_words > 0 ? options.turn_words : options.prompt_words;
          for (int t = 0; t < turns && u * turns + t < options.requests; ++t) {
            const int i = u * turns + t;
            const std::string prompt =
                t == 0 ? PromptOf(options, i)
                       : absl::StrCat(history, " ", MakePrompt(turn_words, options.seed + i));
            RequestResult& r = load.requests[i];
            r = client.Send(CompletionBodyFor(options, prompt, options.seed + i));
            r.turn = t;
            if (!r.ok()) {
              for (int rest = t + 1; rest < turns && u * turns + rest < options.requests; ++rest) {
                load.requests[u * turns + rest].error = "not sent: an earlier turn failed";
                load.requests[u * turns + rest].turn = rest;
              }
              break;
            }
            history = prompt + r.text;
          }
        }
      });
    }
  }  // joins every client
  load.wall_s = Seconds(start, Clock::now());
  return load;
}

RequestResult SendOne(const LoadOptions& options, int index) {
  Client client(options);
  return client.Send(CompletionBody(options, index));
}

GetResult HttpGet(const ServerAddress& server, const std::string& target,
                  const std::string& api_key, double timeout_s) {
  GetResult result;
  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3)));
  if (absl::Status s = ConnectTo(server, io, stream); !s.ok()) {
    result.error = std::string(s.message());
    return result;
  }
  http::request<http::empty_body> request{http::verb::get, server.path_prefix + target, 11};
  request.set(http::field::host, server.host + ":" + server.port);
  request.set(http::field::user_agent, "tessera-bench");
  if (!api_key.empty()) request.set(http::field::authorization, "Bearer " + api_key);
  beast::error_code ec =
      RunOne(io, [&](auto handler) { http::async_write(stream, request, std::move(handler)); });
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  if (!ec) {
    ec = RunOne(
        io, [&](auto handler) { http::async_read(stream, buffer, response, std::move(handler)); });
  }
  if (ec) {
    result.error = absl::StrCat("GET ", server.ToString(), target, ": ",
                                ec == beast::error::timeout ? "timed out" : ec.message());
    return result;
  }
  result.status = response.result_int();
  result.body = std::move(response.body());
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return result;
}

std::string ErrorMessageOf(const std::string& body) {
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.contains("error")) {
    const json& error = parsed["error"];
    if (error.is_object() && error.contains("message") && error["message"].is_string()) {
      return error["message"].get<std::string>();
    }
    if (error.is_string()) return error.get<std::string>();
  }
  std::string line = body.substr(0, 200);
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return line.empty() ? "(empty body)" : line;
}

}  // namespace tessera::cli::bench
