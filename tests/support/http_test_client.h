// A blocking HTTP/1.1 client for tests of the REST gateway (Boost.Beast, synchronous), and
// a reader of server-sent-event bodies.
#pragma once

#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"

namespace tessera::testing {

struct ClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  bool keep_alive = false;

  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
};

// One client connection; requests on it are kept alive unless the server closes.
class HttpTestConnection {
 public:
  explicit HttpTestConnection(uint16_t port) : socket_(ioc_) {
    boost::asio::ip::tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"), port);
    socket_.connect(ep);
  }

  // Writes one request (without reading the answer).
  void Send(const std::string& method, const std::string& target, const std::string& body = "",
            const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    namespace http = boost::beast::http;
    http::request<http::string_body> req{http::string_to_verb(method), target, 11};
    req.set(http::field::host, "127.0.0.1");
    for (const auto& [name, value] : headers) req.set(name, value);
    if (!body.empty() || method == "POST") {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
      req.prepare_payload();
    }
    http::write(socket_, req);
  }

  // Reads one whole answer (a streamed one to its end). A read error gives status 0.
  // After ReadHeader, reads the rest of that answer.
  ClientResponse Read() {
    if (!parser_) NewParser();
    boost::beast::error_code ec;
    boost::beast::http::read(socket_, buffer_, *parser_, ec);
    ClientResponse out;
    if (!ec) out = Convert(parser_->release());
    parser_.reset();
    return out;
  }

  // Reads only the status line and headers of an answer.
  ClientResponse ReadHeader() {
    NewParser();
    boost::beast::error_code ec;
    boost::beast::http::read_header(socket_, buffer_, *parser_, ec);
    ClientResponse out;
    if (ec) return out;
    out = Convert(parser_->get());
    // A 1xx answer is complete without a body.
    if (out.status < 200) parser_.reset();
    return out;
  }

  ClientResponse Call(const std::string& method, const std::string& target,
                      const std::string& body = "",
                      const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    Send(method, target, body, headers);
    return Read();
  }

  // True when the server closed the connection (a read sees end of stream).
  bool ClosedByServer() {
    boost::beast::error_code ec;
    char byte;
    const size_t n = socket_.read_some(boost::asio::buffer(&byte, 1), ec);
    return n == 0 && ec;
  }

  void WriteRaw(const std::string& bytes) {
    boost::asio::write(socket_, boost::asio::buffer(bytes));
  }
  void Close() {
    boost::beast::error_code ec;
    socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

 private:
  template <typename Message>
  static ClientResponse Convert(const Message& msg) {
    ClientResponse out;
    out.status = static_cast<int>(msg.result_int());
    for (const auto& field : msg) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = std::string(field.value());
    }
    out.body = msg.body();
    out.keep_alive = msg.keep_alive();
    return out;
  }

  void NewParser() {
    parser_.emplace();
    parser_->body_limit(64u << 20);
  }

  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::string_body>> parser_;
};

// One request on a fresh connection.
inline ClientResponse HttpCall(
    uint16_t port, const std::string& method, const std::string& target,
    const std::string& body = "",
    const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  HttpTestConnection connection(port);
  return connection.Call(method, target, body, headers);
}

// The `data:` payloads of a text/event-stream body, in order (events are separated by a
// blank line; this server sends one data line per event).
inline std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) out.push_back(event.substr(6));
    pos = end + 2;
  }
  return out;
}

}  // namespace tessera::testing
