#include "controller/http/gateway.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/chat/tool_calls.h"
#include "controller/http/generation_call.h"
#include "controller/http/openai_errors.h"
#include "controller/http/openai_request.h"
#include "controller/http/openai_response.h"
#include "controller/serving/request_validation.h"

namespace tessera::http {
namespace {

using nlohmann::json;

constexpr char kChatRoute[] = "/v1/chat/completions";
constexpr char kCompletionsRoute[] = "/v1/completions";
constexpr char kModelsRoute[] = "/v1/models";
constexpr char kModelsPrefix[] = "/v1/models/";
constexpr char kResetPrefixCacheRoute[] = "/reset_prefix_cache";

HttpResponse JsonResponse(int status, const json& body) {
  HttpResponse response;
  response.status = status;
  response.body = DumpJson(body);
  return response;
}

HttpResponse Error(int status, const std::string& message, const std::string& param = "",
                   const std::string& code = "") {
  ApiError error;
  error.status = status;
  error.message = message;
  error.type = ErrorTypeForHttpStatus(status);
  error.param = param;
  error.code = code;
  return ErrorResponse(error);
}

// The method a known route takes, or "" for an unknown path.
std::string MethodOf(const std::string& path) {
  if (path == kChatRoute || path == kCompletionsRoute || path == kResetPrefixCacheRoute) {
    return "POST";
  }
  if (path == kModelsRoute || absl::StartsWith(path, kModelsPrefix) || path == "/health" ||
      path == "/ready" || path == "/metrics") {
    return "GET";
  }
  return "";
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json ModelObject(const serving::ModelInfo& info) {
  return {{"id", info.name},
          {"object", "model"},
          {"created", info.created_unix},
          {"owned_by", "tessera"},
          {"max_model_len", info.max_model_len}};
}

// Adds the CORS headers of an allowed origin to whatever the handler answers.
class CorsExchange : public Exchange {
 public:
  CorsExchange(std::shared_ptr<Exchange> inner, std::string origin)
      : inner_(std::move(inner)), origin_(std::move(origin)) {}
  void Respond(HttpResponse response) override {
    AddHeaders(response.headers);
    inner_->Respond(std::move(response));
  }
  void BeginStream(int status, std::string content_type, std::vector<HttpHeader> headers) override {
    AddHeaders(headers);
    inner_->BeginStream(status, std::move(content_type), std::move(headers));
  }
  void Write(std::string data) override { inner_->Write(std::move(data)); }
  void EndStream(bool keep_alive) override { inner_->EndStream(keep_alive); }
  void OnDisconnect(std::function<void()> on_disconnect) override {
    inner_->OnDisconnect(std::move(on_disconnect));
  }
  bool disconnected() const override { return inner_->disconnected(); }

 private:
  void AddHeaders(std::vector<HttpHeader>& headers) const {
    headers.push_back({"Access-Control-Allow-Origin", origin_});
    if (origin_ != "*") headers.push_back({"Vary", "Origin"});
  }
  const std::shared_ptr<Exchange> inner_;
  const std::string origin_;
};

// The media type of a Content-Type value, lower-cased, without parameters.
std::string MediaType(const std::string& content_type) {
  std::string type(absl::StripAsciiWhitespace(content_type.substr(0, content_type.find(';'))));
  absl::AsciiStrToLower(&type);
  return type;
}

bool IsJsonMediaType(const std::string& type) {
  return type == "application/json" ||
         (absl::StartsWith(type, "application/") && absl::EndsWith(type, "+json"));
}

}  // namespace

bool IsLoopbackHost(const std::string& host_header) {
  std::string host(absl::StripAsciiWhitespace(host_header));
  absl::AsciiStrToLower(&host);
  if (absl::StartsWith(host, "[")) {  // an IPv6 literal, maybe with a port
    const size_t close = host.find(']');
    if (close == std::string::npos) return false;
    const std::string addr = host.substr(1, close - 1);
    return addr == "::1" || addr == "0:0:0:0:0:0:0:1";
  }
  if (host == "::1") return true;  // a bare IPv6 address (a bind address, not a Host header)
  if (std::count(host.begin(), host.end(), ':') == 1) host.resize(host.find(':'));
  if (absl::EndsWith(host, ".")) host.pop_back();  // the absolute form "localhost."
  if (host == "localhost" || absl::EndsWith(host, ".localhost")) return true;
  std::vector<std::string> octets = absl::StrSplit(host, '.');
  if (octets.size() != 4 || octets[0] != "127") return false;
  for (const std::string& o : octets) {
    int v = 0;
    if (o.empty() || o.size() > 3 || !absl::SimpleAtoi(o, &v) || v < 0 || v > 255) return false;
  }
  return true;
}

Gateway::Gateway(serving::Engine* engine, GatewayOptions options)
    : engine_(engine), options_(std::move(options)) {}

std::string Gateway::RouteOf(const std::string& path) {
  if (absl::StartsWith(path, kModelsPrefix)) return "/v1/models/{id}";
  return MethodOf(path).empty() ? "other" : path;
}

void Gateway::Observe(const HttpRequest& request, int status) const {
  if (options_.route_observer) options_.route_observer(RouteOf(request.path), status);
}

bool Gateway::Authorized(const HttpRequest& request) const {
  if (options_.api_key.empty()) return true;
  // Every Authorization header, so that a second one is refused rather than ignored.
  std::vector<absl::string_view> values;
  for (const HttpHeader& h : request.headers) {
    if (absl::EqualsIgnoreCase(h.name, "Authorization")) values.push_back(h.value);
  }
  return serving::AuthorizationAllows(values, options_.api_key);
}

std::string Gateway::CorsOrigin(const HttpRequest& request) const {
  if (options_.allowed_origins.empty()) return "";
  const std::string origin = request.Header("Origin");
  if (origin.empty()) return "";
  for (const std::string& allowed : options_.allowed_origins) {
    if (allowed == "*") return "*";
    if (absl::StripSuffix(allowed, "/") == origin) return origin;
  }
  return "";
}

void Gateway::Handle(HttpRequest request, std::shared_ptr<Exchange> exchange) {
  const std::string& path = request.path;
  if (options_.loopback_only) {
    const std::string host = request.Header("Host");
    if (!host.empty() && !IsLoopbackHost(host)) {
      return exchange->Respond(
          Error(403, absl::StrCat("Host '", host.substr(0, 256),
                                  "' is not allowed: this server listens on a loopback address "
                                  "and answers only loopback names (localhost, 127.0.0.1, [::1]); "
                                  "bind another address (--host) to serve other names")));
    }
  }
  const std::string method = MethodOf(path);
  if (method.empty()) {
    return exchange->Respond(
        Error(404, absl::StrCat("Invalid URL (", request.method, " ", path, ")")));
  }
  const std::string allow = method == "GET" ? "GET, HEAD" : method;
  const std::string cors_origin = CorsOrigin(request);
  if (request.method == "OPTIONS" && !cors_origin.empty()) {
    // A CORS preflight from an allowed origin.
    HttpResponse response;
    response.status = 204;
    response.content_type.clear();
    response.headers = {{"Access-Control-Allow-Origin", cors_origin},
                        {"Access-Control-Allow-Methods", allow + ", OPTIONS"},
                        {"Access-Control-Allow-Headers", "Authorization, Content-Type"},
                        {"Access-Control-Max-Age", "600"}};
    if (cors_origin != "*") response.headers.push_back({"Vary", "Origin"});
    return exchange->Respond(std::move(response));
  }
  // HEAD is GET without the body (the server leaves it out).
  if (request.method != method && !(request.method == "HEAD" && method == "GET")) {
    HttpResponse response = Error(
        405,
        absl::StrCat("Method ", request.method, " is not allowed for ", path, "; use ", method));
    response.headers.push_back({"Allow", allow});
    return exchange->Respond(std::move(response));
  }
  if (!cors_origin.empty()) {
    exchange = std::make_shared<CorsExchange>(std::move(exchange), cors_origin);
  }
  serving::Engine* engine = engine_.load();
  if (path == "/health") return exchange->Respond(JsonResponse(200, {{"status", "ok"}}));
  if (path == "/ready") return HandleReady(*exchange, engine);
  if (path == "/metrics") {
    if (!options_.metrics_text) return exchange->Respond(Error(404, "metrics are not enabled"));
    HttpResponse response;
    response.content_type = "text/plain; version=0.0.4; charset=utf-8";
    response.body = options_.metrics_text();
    return exchange->Respond(std::move(response));
  }
  // Everything else is /v1/* or an operator's action (/reset_prefix_cache).
  if (!Authorized(request)) {
    const bool missing = request.Header("Authorization").empty();
    HttpResponse response = Error(
        401,
        missing ? "You didn't provide an API key. You need to provide your API key in an "
                  "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
                : "Incorrect API key provided.",
        "", "invalid_api_key");
    response.headers.push_back({"WWW-Authenticate", "Bearer"});
    return exchange->Respond(std::move(response));
  }
  if (method == "POST") {
    const std::string content_type = request.Header("Content-Type");
    if (!IsJsonMediaType(MediaType(content_type))) {
      return exchange->Respond(
          Error(415, absl::StrCat("Content-Type must be application/json",
                                  content_type.empty()
                                      ? " (none was sent)"
                                      : absl::StrCat(" (got '", content_type.substr(0, 128), "')"),
                                  "; with curl, add -H 'Content-Type: application/json'")));
    }
  }
  if (engine == nullptr) {
    return exchange->Respond(Error(503, "the model is still loading; see GET /ready"));
  }
  if (path == kModelsRoute || absl::StartsWith(path, kModelsPrefix)) {
    return HandleModels(request, *exchange, engine);
  }
  if (path == kResetPrefixCacheRoute) {
    if (!engine->ResetPrefixCache()) {
      return exchange->Respond(Error(
          400,
          "prefix caching is off on this server (--no-enable-prefix-caching): nothing to reset"));
    }
    return exchange->Respond(JsonResponse(200, {{"status", "ok"}}));
  }
  HandleGeneration(std::move(request), std::move(exchange), engine);
}

void Gateway::HandleModels(const HttpRequest& request, Exchange& exchange,
                           serving::Engine* engine) {
  const serving::ModelInfo& info = engine->info();
  if (request.path == kModelsRoute) {
    return exchange.Respond(
        JsonResponse(200, {{"object", "list"}, {"data", json::array({ModelObject(info)})}}));
  }
  const std::string id = request.path.substr(sizeof(kModelsPrefix) - 1);
  if (id != info.name) {
    return exchange.Respond(
        Error(404, absl::StrCat("The model '", id.substr(0, 256), "' does not exist"), "model",
              "model_not_found"));
  }
  exchange.Respond(JsonResponse(200, ModelObject(info)));
}

void Gateway::HandleReady(Exchange& exchange, serving::Engine* engine) {
  json body = options_.ready_details ? options_.ready_details() : json::object();
  if (!body.is_object()) body = json{{"details", body}};
  if (engine != nullptr && engine->ready()) {
    body["status"] = "ready";
    body["model"] = engine->info().name;
    return exchange.Respond(JsonResponse(200, body));
  }
  body["status"] = "not_ready";
  if (!body.contains("reason")) {
    body["reason"] = engine == nullptr ? "the model is loading"
                                       : "the engine is not ready (starting or draining)";
  }
  exchange.Respond(JsonResponse(503, body));
}

void Gateway::HandleGeneration(HttpRequest request, std::shared_ptr<Exchange> exchange,
                               serving::Engine* engine) {
  if (options_.prep_pool == nullptr || request.body.size() <= serving::kInlinePrepBytes) {
    return PrepareGeneration(request, std::move(exchange), engine);
  }
  auto shared = std::make_shared<HttpRequest>(std::move(request));
  const absl::Status queued = options_.prep_pool->TrySubmit([this, shared, exchange, engine] {
    if (exchange->disconnected()) return;  // the client left while it waited
    PrepareGeneration(*shared, exchange, engine);
  });
  if (!queued.ok()) exchange->Respond(ErrorResponse(ApiErrorFromStatus(queued)));
}

void Gateway::PrepareGeneration(const HttpRequest& request, std::shared_ptr<Exchange> exchange,
                                serving::Engine* engine) {
  const bool chat = request.path == kChatRoute;
  absl::StatusOr<CompletionParams> params = ParseCompletionRequest(
      request.body, chat ? Endpoint::kChatCompletions : Endpoint::kCompletions);
  if (!params.ok()) return exchange->Respond(ErrorResponse(ApiErrorFromStatus(params.status())));
  const serving::ModelInfo& info = engine->info();
  if (!params->model.empty() && params->model != info.name && !options_.accept_any_model_name) {
    return exchange->Respond(
        Error(404,
              absl::StrCat("The model '", params->model, "' does not exist; this server serves '",
                           info.name, "'"),
              "model", "model_not_found"));
  }

  std::vector<int32_t> prompt;
  if (chat) {
    const serving::ChatTemplateExtras extras = serving::TemplateExtras(params->tool_calling);
    absl::StatusOr<std::vector<int32_t>> ids =
        engine->ChatPromptTokens(params->messages, true, extras);
    if (!ids.ok()) {
      ApiError error = ApiErrorFromStatus(ids.status());
      if (error.status == 400 && error.param.empty()) error.param = "messages";
      return exchange->Respond(ErrorResponse(error));
    }
    prompt = *std::move(ids);
  } else if (params->prompt_text.has_value()) {
    absl::StatusOr<std::vector<int32_t>> ids = engine->PromptTokens(
        *params->prompt_text, /*add_special=*/true, params->parse_special_tokens);
    if (!ids.ok()) {
      ApiError error = ApiErrorFromStatus(ids.status());
      if (error.status == 400 && error.param.empty()) error.param = "prompt";
      return exchange->Respond(ErrorResponse(error));
    }
    prompt = *std::move(ids);
  } else {
    for (int32_t id : params->prompt_tokens) {
      if (info.n_vocab > 0 && id >= info.n_vocab) {
        return exchange->Respond(
            Error(400,
                  absl::StrCat("'prompt' token id ", id, " is outside the vocabulary (size ",
                               info.n_vocab, ")"),
                  "prompt"));
      }
    }
    prompt = params->prompt_tokens;
  }
  if (prompt.empty()) {
    return exchange->Respond(Error(400, "the prompt is empty", chat ? "messages" : "prompt"));
  }

  ResponseHeader header;
  header.id = NewResponseId(chat ? "chatcmpl-" : "cmpl-");
  header.object =
      chat ? (params->stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  header.created = UnixNow();
  header.model = info.name;
  header.system_fingerprint = options_.system_fingerprint;
  std::optional<chat::ChatOutputOptions> output;
  if (chat) {
    absl::StatusOr<serving::ChatOutputPlan> plan =
        serving::PlanChatOutput(params->tool_calling, options_.chat_output, *engine, prompt,
                                params->grammar, params->structured_output.field);
    if (!plan.ok()) return exchange->Respond(ErrorResponse(ApiErrorFromStatus(plan.status())));
    params->grammar = plan->grammar;
    output = std::move(plan->parse);
  }
  StartGeneration(engine, *params, std::move(prompt), std::move(header), std::move(exchange),
                  std::move(output));
}

absl::StatusOr<std::unique_ptr<HttpServer>> StartGatewayServer(ServerOptions options,
                                                               std::shared_ptr<Gateway> gateway) {
  options.error_body = ErrorBody;
  options.observer = [gateway](const HttpRequest& request, int status) {
    gateway->Observe(request, status);
  };
  return HttpServer::Start(std::move(options),
                           [gateway](HttpRequest request, std::shared_ptr<Exchange> exchange) {
                             gateway->Handle(std::move(request), std::move(exchange));
                           });
}

}  // namespace tessera::http
