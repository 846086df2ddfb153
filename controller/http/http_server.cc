#include "controller/http/http_server.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <optional>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "boost/asio.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "common/util/thread_name.h"

namespace tessera::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// While a request is being answered the connection keeps one read posted so that a client
// that closes is noticed at once; bytes it reads (a pipelined next request) stay buffered,
// up to this much.
constexpr size_t kMaxBufferedWhileAnswering = 64u << 10;
// How long a connection that is closing reads (and drops) what the client still sends.
constexpr std::chrono::milliseconds kLinger{2000};
// How long Stop() after StopAccepting() waits for answers still being written.
constexpr std::chrono::milliseconds kFlushOnStop{500};

bool EqualsIgnoreCase(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string ReasonPhrase(int status) {
  const auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  return reason.empty() ? std::string("Unknown") : std::string(reason.data(), reason.size());
}

// Status line and headers. `content_length` absent: a chunked body (HTTP/1.1) or, for an
// HTTP/1.0 client, a body that ends when the connection closes.
std::string FormatHead(int status, const std::string& content_type,
                       const std::vector<HttpHeader>& headers, std::optional<size_t> content_length,
                       bool keep_alive, bool http10) {
  std::string head = absl::StrCat(http10 ? "HTTP/1.0 " : "HTTP/1.1 ", status, " ",
                                  ReasonPhrase(status), "\r\nServer: tessera\r\n");
  if (!content_type.empty()) absl::StrAppend(&head, "Content-Type: ", content_type, "\r\n");
  for (const HttpHeader& h : headers) absl::StrAppend(&head, h.name, ": ", h.value, "\r\n");
  if (content_length.has_value()) {
    absl::StrAppend(&head, "Content-Length: ", *content_length, "\r\n");
  } else if (!http10) {
    absl::StrAppend(&head, "Transfer-Encoding: chunked\r\n");
  }
  if (!keep_alive) {
    absl::StrAppend(&head, "Connection: close\r\n");
  } else if (http10) {
    absl::StrAppend(&head, "Connection: keep-alive\r\n");
  }
  absl::StrAppend(&head, "\r\n");
  return head;
}

class Session;

}  // namespace

struct HttpServer::Core : std::enable_shared_from_this<HttpServer::Core> {
  explicit Core(ServerOptions opts, Handler h)
      : options(std::move(opts)), handler(std::move(h)), acceptor(net::make_strand(ioc)) {}

  void Accept();
  void Register(Session* s, std::weak_ptr<Session> w) {
    std::lock_guard<std::mutex> lock(mu);
    sessions[s] = std::move(w);
  }
  void Unregister(Session* s) {
    std::lock_guard<std::mutex> lock(mu);
    sessions.erase(s);
  }
  std::string ErrorBody(int status, const std::string& message) const {
    if (options.error_body) return options.error_body(status, message);
    return message;
  }

  net::io_context ioc;
  ServerOptions options;
  Handler handler;
  tcp::acceptor acceptor;
  std::atomic<bool> draining{false};
  std::atomic<bool> stopping{false};
  std::atomic<int> active{0};
  std::atomic<int> connections{0};
  std::mutex mu;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions;
};

namespace {

class ExchangeImpl;

// One client connection. Every member is touched only on `strand_`: the strand the socket was
// accepted onto, so that the socket's completions, the timer's and the posted work of the
// Exchange all run serialized on it.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<HttpServer::Core> core, tcp::socket socket)
      : core_(std::move(core)),
        socket_(std::move(socket)),
        strand_(socket_.get_executor()),
        timer_(strand_) {
    core_->connections.fetch_add(1);
  }
  ~Session() {
    core_->Unregister(this);
    core_->connections.fetch_sub(1);
  }

  void Start() {
    core_->Register(this, weak_from_this());
    beast::error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    remote_ = socket_.remote_endpoint(ec).address().to_string(ec);
    if (core_->connections.load() > core_->options.max_connections) {
      net::post(strand_, [self = shared_from_this()] {
        self->AnswerOwnError(503, absl::StrCat("too many connections (the limit is ",
                                               self->core_->options.max_connections, ")"));
      });
      return;
    }
    net::post(strand_, [self = shared_from_this()] { self->ReadRequest(); });
  }

  // From any thread.
  void PostClose() {
    net::post(strand_, [self = shared_from_this()] { self->Close(); });
  }

  const net::any_io_executor& strand() const { return strand_; }

  // The Exchange's work, on the strand; `ex` must be the current exchange.
  void DoRespond(ExchangeImpl* ex, HttpResponse response);
  void DoBeginStream(ExchangeImpl* ex, int status, std::string content_type,
                     std::vector<HttpHeader> headers);
  void DoWrite(ExchangeImpl* ex, std::string data);
  void DoEndStream(ExchangeImpl* ex, bool keep_alive);
  void DoOnDisconnect(ExchangeImpl* ex, std::function<void()> fn);

 private:
  enum class State { kReading, kAnswering, kResumeAfterWatch, kLingering, kClosed };

  void ArmTimer(std::chrono::milliseconds d) {
    const uint64_t gen = ++timer_gen_;
    timer_.expires_after(d);
    timer_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
      if (ec || gen != self->timer_gen_) return;
      self->Close();
    });
  }
  void DisarmTimer() {
    ++timer_gen_;
    timer_.cancel();
  }

  void ReadRequest();
  void OnHeader(beast::error_code ec);
  void OnBody(beast::error_code ec);
  void FailRead(beast::error_code ec);
  void Dispatch();
  void Watch();
  void OnWatch(beast::error_code ec, size_t n);
  // Answers with an error made by the server and closes the connection afterwards.
  void AnswerOwnError(int status, const std::string& message);
  void Enqueue(std::string bytes);
  void WriteNext();
  void OnWritten(beast::error_code ec);
  void FinishExchange();
  // After the last answer on a connection: stop sending, read and discard what the client
  // still sends (the rest of an oversized body) for a moment, then close, so that the
  // client reads the answer instead of a reset.
  void LingerThenClose();
  void Close();

  std::shared_ptr<HttpServer::Core> core_;
  tcp::socket socket_;
  net::any_io_executor strand_;
  net::steady_timer timer_;
  uint64_t timer_gen_ = 0;
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  State state_ = State::kReading;
  bool watching_ = false;
  bool keep_alive_ = true;
  bool http10_ = false;
  bool head_only_ = false;
  std::shared_ptr<ExchangeImpl> exchange_;
  HttpRequest request_;  // the one being answered, for the observer
  std::deque<std::string> writes_;
  bool writing_ = false;
  bool finish_after_writes_ = false;
};

class ExchangeImpl : public Exchange, public std::enable_shared_from_this<ExchangeImpl> {
 public:
  explicit ExchangeImpl(std::shared_ptr<Session> session) : session_(std::move(session)) {}

  void Respond(HttpResponse response) override {
    Post([response = std::move(response)](Session* s, ExchangeImpl* ex) mutable {
      s->DoRespond(ex, std::move(response));
    });
  }
  void BeginStream(int status, std::string content_type, std::vector<HttpHeader> headers) override {
    Post([status, content_type = std::move(content_type), headers = std::move(headers)](
             Session* s, ExchangeImpl* ex) mutable {
      s->DoBeginStream(ex, status, std::move(content_type), std::move(headers));
    });
  }
  void Write(std::string data) override {
    Post([data = std::move(data)](Session* s, ExchangeImpl* ex) mutable {
      s->DoWrite(ex, std::move(data));
    });
  }
  void EndStream(bool keep_alive) override {
    Post([keep_alive](Session* s, ExchangeImpl* ex) { s->DoEndStream(ex, keep_alive); });
  }
  void OnDisconnect(std::function<void()> fn) override {
    // Posted even when gone_ is set, so that a late callback still runs (at once).
    net::post(session_->strand(), [self = shared_from_this(), fn = std::move(fn)]() mutable {
      self->session_->DoOnDisconnect(self.get(), std::move(fn));
    });
  }
  bool disconnected() const override { return gone_.load(); }

  // On the strand.
  void MarkGone() { gone_.store(true); }
  std::function<void()> on_disconnect;
  bool answered = false;   // a status line was queued
  bool streaming = false;  // BeginStream seen, EndStream not yet
  bool finished = false;   // the whole answer is queued
  int status = 0;

 private:
  template <typename F>
  void Post(F&& f) {
    if (gone_.load()) return;
    net::post(session_->strand(), [self = shared_from_this(), f = std::forward<F>(f)]() mutable {
      f(self->session_.get(), self.get());
    });
  }

  std::shared_ptr<Session> session_;
  std::atomic<bool> gone_{false};
};

void Session::ReadRequest() {
  if (state_ == State::kClosed) return;
  state_ = State::kReading;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(core_->options.max_header_bytes));
  parser_->body_limit(core_->options.max_body_bytes);
  ArmTimer(buffer_.size() == 0 ? core_->options.idle_timeout : core_->options.read_timeout);
  bhttp::async_read_header(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
}

void Session::OnHeader(beast::error_code ec) {
  if (state_ == State::kClosed) return;
  if (ec) return FailRead(ec);
  ArmTimer(core_->options.read_timeout);
  const auto& msg = parser_->get();
  const auto expect = msg[bhttp::field::expect];
  if (EqualsIgnoreCase(std::string(expect.data(), expect.size()), "100-continue") &&
      !parser_->is_done()) {
    auto interim = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    net::async_write(socket_, net::buffer(*interim),
                     [self = shared_from_this(), interim](beast::error_code wec, size_t) {
                       if (wec) return self->Close();
                       bhttp::async_read(
                           self->socket_, self->buffer_, *self->parser_,
                           [self](beast::error_code rec, size_t) { self->OnBody(rec); });
                     });
    return;
  }
  bhttp::async_read(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code rec, size_t) { self->OnBody(rec); });
}

void Session::OnBody(beast::error_code ec) {
  if (state_ == State::kClosed) return;
  if (ec) return FailRead(ec);
  Dispatch();
}

void Session::FailRead(beast::error_code ec) {
  DisarmTimer();
  if (ec == bhttp::error::body_limit) {
    return AnswerOwnError(413, absl::StrCat("request body exceeds the limit of ",
                                            core_->options.max_body_bytes, " bytes"));
  }
  if (ec == bhttp::error::header_limit) {
    return AnswerOwnError(431, absl::StrCat("request headers exceed the limit of ",
                                            core_->options.max_header_bytes, " bytes"));
  }
  if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
      ec.category() != bhttp::make_error_code(bhttp::error::bad_method).category()) {
    return Close();  // the client went away, or a socket error
  }
  AnswerOwnError(400, absl::StrCat("malformed HTTP request: ", ec.message()));
}

void Session::AnswerOwnError(int status, const std::string& message) {
  state_ = State::kAnswering;
  keep_alive_ = false;
  http10_ = false;
  head_only_ = false;
  request_ = HttpRequest{};
  request_.remote_address = remote_;
  exchange_ = std::make_shared<ExchangeImpl>(shared_from_this());
  core_->active.fetch_add(1);
  HttpResponse response;
  response.status = status;
  response.body = core_->ErrorBody(status, message);
  DoRespond(exchange_.get(), std::move(response));
}

void Session::Dispatch() {
  DisarmTimer();
  auto msg = parser_->release();
  parser_.reset();
  request_ = HttpRequest{};
  request_.method = std::string(msg.method_string());
  request_.target = std::string(msg.target());
  request_.path = request_.target.substr(0, request_.target.find('?'));
  for (const auto& field : msg) {
    request_.headers.push_back({std::string(field.name_string()), std::string(field.value())});
  }
  request_.body = std::move(msg.body());
  request_.remote_address = remote_;
  keep_alive_ = msg.keep_alive();
  http10_ = msg.version() < 11;
  head_only_ = msg.method() == bhttp::verb::head;

  state_ = State::kAnswering;
  exchange_ = std::make_shared<ExchangeImpl>(shared_from_this());
  core_->active.fetch_add(1);
  if (core_->draining.load()) {
    keep_alive_ = false;
    HttpResponse response;
    response.status = 503;
    response.body = core_->ErrorBody(503, "the server is shutting down");
    return DoRespond(exchange_.get(), std::move(response));
  }
  Watch();
  try {
    core_->handler(request_, exchange_);
  } catch (const std::exception& e) {
    HttpResponse response;
    response.status = 500;
    response.body = core_->ErrorBody(500, absl::StrCat("internal error: ", e.what()));
    DoRespond(exchange_.get(), std::move(response));
  }
}

void Session::Watch() {
  if (state_ == State::kLingering) buffer_.consume(buffer_.size());
  if (watching_ || (state_ != State::kAnswering && state_ != State::kLingering) ||
      buffer_.size() >= kMaxBufferedWhileAnswering) {
    return;
  }
  watching_ = true;
  socket_.async_read_some(
      buffer_.prepare(4096),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnWatch(ec, n); });
}

void Session::OnWatch(beast::error_code ec, size_t n) {
  watching_ = false;
  if (state_ == State::kClosed) return;
  if (!ec) buffer_.commit(n);
  if (state_ == State::kResumeAfterWatch) {
    if (!ec || ec == net::error::operation_aborted) return ReadRequest();
    return Close();
  }
  if (!ec) return Watch();
  // End of stream or an error while answering: the client went away.
  Close();
}

void Session::DoRespond(ExchangeImpl* ex, HttpResponse response) {
  if (ex != exchange_.get() || ex->answered || state_ != State::kAnswering) return;
  ex->answered = true;
  ex->finished = true;
  ex->status = response.status;
  if (core_->draining.load()) keep_alive_ = false;
  std::string bytes = FormatHead(response.status, response.content_type, response.headers,
                                 response.body.size(), keep_alive_, http10_);
  if (!head_only_) bytes += response.body;
  Enqueue(std::move(bytes));
  finish_after_writes_ = true;
  if (!writing_) FinishExchange();
}

void Session::DoBeginStream(ExchangeImpl* ex, int status, std::string content_type,
                            std::vector<HttpHeader> headers) {
  if (ex != exchange_.get() || ex->answered || state_ != State::kAnswering) return;
  ex->answered = true;
  ex->streaming = true;
  ex->status = status;
  // An HTTP/1.0 client cannot read chunks: its body ends when the connection closes.
  if (http10_) keep_alive_ = false;
  Enqueue(FormatHead(status, content_type, headers, std::nullopt, keep_alive_, http10_));
}

void Session::DoWrite(ExchangeImpl* ex, std::string data) {
  if (ex != exchange_.get() || !ex->streaming || state_ != State::kAnswering || data.empty() ||
      head_only_) {
    return;
  }
  if (http10_) return Enqueue(std::move(data));
  std::string chunk = absl::StrCat(absl::Hex(data.size()), "\r\n");
  chunk += data;
  chunk += "\r\n";
  Enqueue(std::move(chunk));
}

void Session::DoEndStream(ExchangeImpl* ex, bool keep_alive) {
  if (ex != exchange_.get() || !ex->streaming || state_ != State::kAnswering) return;
  ex->streaming = false;
  ex->finished = true;
  if (!keep_alive || core_->draining.load()) keep_alive_ = false;
  if (!http10_) Enqueue("0\r\n\r\n");
  finish_after_writes_ = true;
  if (!writing_) FinishExchange();
}

void Session::DoOnDisconnect(ExchangeImpl* ex, std::function<void()> fn) {
  if (state_ == State::kClosed && (ex == exchange_.get() || !ex->finished)) {
    // The client is already gone and this exchange never completed.
    if (fn && !ex->finished) fn();
    return;
  }
  if (ex != exchange_.get() || ex->finished) return;
  ex->on_disconnect = std::move(fn);
}

void Session::Enqueue(std::string bytes) {
  writes_.push_back(std::move(bytes));
  if (!writing_) WriteNext();
}

void Session::WriteNext() {
  if (writes_.empty() || state_ == State::kClosed) return;
  writing_ = true;
  ArmTimer(core_->options.write_timeout);
  net::async_write(
      socket_, net::buffer(writes_.front()),
      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWritten(ec); });
}

void Session::OnWritten(beast::error_code ec) {
  writing_ = false;
  if (state_ == State::kClosed) return;
  DisarmTimer();
  if (ec) return Close();
  writes_.pop_front();
  if (!writes_.empty()) return WriteNext();
  if (finish_after_writes_) FinishExchange();
}

void Session::FinishExchange() {
  finish_after_writes_ = false;
  if (exchange_) {
    exchange_->on_disconnect = nullptr;
    if (core_->options.observer) core_->options.observer(request_, exchange_->status);
    exchange_.reset();
    core_->active.fetch_sub(1);
  }
  if (core_->stopping.load()) return Close();
  // The answer's head decided (draining answers say Connection: close); a kept-alive
  // connection's next request during a drain is answered 503.
  if (!keep_alive_) return LingerThenClose();
  if (watching_) {
    // The posted read must finish before the parser may read: cancel it, resume there.
    state_ = State::kResumeAfterWatch;
    beast::error_code ignored;
    socket_.cancel(ignored);
    return;
  }
  ReadRequest();
}

void Session::LingerThenClose() {
  state_ = State::kLingering;
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  buffer_.consume(buffer_.size());
  ArmTimer(kLinger);
  if (!watching_) Watch();
}

void Session::Close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  DisarmTimer();
  beast::error_code ignored;
  socket_.close(ignored);
  writes_.clear();
  if (exchange_) {
    std::shared_ptr<ExchangeImpl> ex = std::move(exchange_);
    ex->MarkGone();
    if (!ex->finished) {
      std::function<void()> fn = std::move(ex->on_disconnect);
      ex->on_disconnect = nullptr;
      if (fn) fn();
    }
    if (core_->options.observer) core_->options.observer(request_, ex->answered ? ex->status : 499);
    core_->active.fetch_sub(1);
  }
}

}  // namespace

std::string HttpRequest::Header(const std::string& name) const {
  for (const HttpHeader& h : headers) {
    if (EqualsIgnoreCase(h.name, name)) return h.value;
  }
  return "";
}

void HttpServer::Core::Accept() {
  acceptor.async_accept(
      net::make_strand(ioc), [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
        if (!self->acceptor.is_open() || self->stopping.load()) return;
        if (!ec) {
          std::make_shared<Session>(self, std::move(socket))->Start();
          return self->Accept();
        }
        if (ec == net::error::operation_aborted) return;
        // Out of descriptors (or a transient error): wait instead of spinning on accept.
        auto timer = std::make_shared<net::steady_timer>(self->acceptor.get_executor());
        timer->expires_after(std::chrono::milliseconds(50));
        timer->async_wait([self, timer](beast::error_code) {
          if (self->acceptor.is_open()) self->Accept();
        });
      });
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(ServerOptions options,
                                                              Handler handler) {
  const std::string where = absl::StrCat(options.host, ":", options.port);
  beast::error_code ec;
  const auto address = net::ip::make_address(options.host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP listen address ", options.host, ": not an IP address"));
  }
  const int threads = std::max(1, options.threads);
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->core_ = std::make_shared<Core>(std::move(options), std::move(handler));
  Core& core = *server->core_;
  const tcp::endpoint endpoint(address, core.options.port);
  core.acceptor.open(endpoint.protocol(), ec);
  if (!ec) core.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) core.acceptor.bind(endpoint, ec);
  if (!ec) core.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("HTTP server cannot listen on ", where, ": ", ec.message()));
  }
  server->port_ = core.acceptor.local_endpoint().port();
  core.Accept();
  for (int i = 0; i < threads; ++i) {
    server->threads_.emplace_back([c = server->core_] {
      NameThisThread("tessera-http");
      c->ioc.run();
    });
  }
  return server;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::StopAccepting() {
  core_->draining.store(true);
  net::post(core_->acceptor.get_executor(), [c = core_] {
    beast::error_code ignored;
    c->acceptor.close(ignored);
  });
}

bool HttpServer::draining() const { return core_->draining.load(); }
int HttpServer::ActiveExchanges() const { return core_->active.load(); }
int HttpServer::OpenConnections() const { return core_->connections.load(); }

void HttpServer::Stop() {
  std::call_once(stopped_, [this] {
    // After a drain the engine has finished its requests, but their last bytes (a stream's
    // [DONE]) may still be on their way to the socket: let them go out first.
    if (core_->draining.load()) {
      const auto flush_deadline = std::chrono::steady_clock::now() + kFlushOnStop;
      while (core_->active.load() > 0 && std::chrono::steady_clock::now() < flush_deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    StopAccepting();
    core_->stopping.store(true);
    std::vector<std::shared_ptr<Session>> sessions;
    {
      std::lock_guard<std::mutex> lock(core_->mu);
      for (auto& [ptr, weak] : core_->sessions) {
        if (auto s = weak.lock()) sessions.push_back(std::move(s));
      }
    }
    for (auto& s : sessions) s->PostClose();
    sessions.clear();
    // Let the io threads run the closes (and the disconnect callbacks) before stopping.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (core_->active.load() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    core_->ioc.stop();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    // Run the completions of the cancelled operations so that the connections they hold
    // are released (they do nothing more: every connection is closed).
    core_->ioc.restart();
    core_->ioc.poll();
  });
}

}  // namespace tessera::http
