#include "controller/http/gateway.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "controller/http/generation_call.h"
#include "controller/http/openai_errors.h"
#include "controller/http/openai_request.h"
#include "controller/http/openai_response.h"

namespace tessera::http {
namespace {

using nlohmann::json;

constexpr char kChatRoute[] = "/v1/chat/completions";
constexpr char kCompletionsRoute[] = "/v1/completions";
constexpr char kModelsRoute[] = "/v1/models";
constexpr char kModelsPrefix[] = "/v1/models/";

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
  if (path == kChatRoute || path == kCompletionsRoute) return "POST";
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

}  // namespace

bool ConstantTimeEquals(const std::string& presented, const std::string& expected) {
  if (expected.empty()) return false;
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < presented.size(); ++i) {
    diff |= static_cast<unsigned char>(presented[i] ^ expected[i % expected.size()]);
  }
  return diff == 0;
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
  const std::string header = request.Header("Authorization");
  constexpr char kBearer[] = "Bearer ";
  if (header.size() <= sizeof(kBearer) - 1 ||
      !absl::EqualsIgnoreCase(header.substr(0, sizeof(kBearer) - 1), kBearer)) {
    return false;
  }
  return ConstantTimeEquals(header.substr(sizeof(kBearer) - 1), options_.api_key);
}

void Gateway::Handle(HttpRequest request, std::shared_ptr<Exchange> exchange) {
  const std::string& path = request.path;
  const std::string method = MethodOf(path);
  if (method.empty()) {
    return exchange->Respond(
        Error(404, absl::StrCat("Invalid URL (", request.method, " ", path, ")")));
  }
  if (request.method != method) {
    HttpResponse response = Error(
        405,
        absl::StrCat("Method ", request.method, " is not allowed for ", path, "; use ", method));
    response.headers.push_back({"Allow", method});
    return exchange->Respond(std::move(response));
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
  // Everything else is /v1/*.
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
  if (engine == nullptr) {
    return exchange->Respond(Error(503, "the model is still loading; see GET /ready"));
  }
  if (path == kModelsRoute || absl::StartsWith(path, kModelsPrefix)) {
    return HandleModels(request, *exchange, engine);
  }
  HandleGeneration(request, std::move(exchange), engine);
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
    return exchange.Respond(Error(404, absl::StrCat("The model '", id, "' does not exist"), "model",
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

void Gateway::HandleGeneration(const HttpRequest& request, std::shared_ptr<Exchange> exchange,
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
    absl::StatusOr<std::string> text = engine->RenderChat(params->messages, true);
    if (!text.ok()) {
      ApiError error = ApiErrorFromStatus(text.status());
      if (error.status == 400 && error.param.empty()) error.param = "messages";
      return exchange->Respond(ErrorResponse(error));
    }
    // The template writes the special tokens it wants (BOS included) itself.
    absl::StatusOr<std::vector<int32_t>> ids = engine->Tokenize(*text, /*add_special=*/false);
    if (!ids.ok()) return exchange->Respond(ErrorResponse(ApiErrorFromStatus(ids.status())));
    prompt = *std::move(ids);
  } else if (params->prompt_text.has_value()) {
    absl::StatusOr<std::vector<int32_t>> ids =
        engine->Tokenize(*params->prompt_text, /*add_special=*/true);
    if (!ids.ok()) return exchange->Respond(ErrorResponse(ApiErrorFromStatus(ids.status())));
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
  StartGeneration(engine, *params, std::move(prompt), std::move(header), std::move(exchange));
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
