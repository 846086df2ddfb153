// OpenAI's error shape, {"error": {"message", "type", "param", "code"}}, and the mapping
// from the engine's absl::Status codes to HTTP statuses.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "controller/http/http_server.h"
#include "nlohmann/json.hpp"

namespace tessera::http {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" is written as null
  std::string code;   // "" is written as null
  std::vector<HttpHeader> headers;
};

// INVALID_ARGUMENT naming the request field `param` (see ApiErrorFromStatus): the same as
// serving::InvalidField, so that the errors of serving's shared checks name their field too.
absl::Status InvalidParam(const std::string& param, const std::string& message);

// INVALID_ARGUMENT / OUT_OF_RANGE / FAILED_PRECONDITION -> 400, NOT_FOUND -> 404,
// RESOURCE_EXHAUSTED -> 429 with Retry-After, UNAUTHENTICATED -> 401, PERMISSION_DENIED ->
// 403, UNAVAILABLE / CANCELLED / ABORTED -> 503, DEADLINE_EXCEEDED -> 504, others -> 500.
// The field named by InvalidParam or serving::InvalidField becomes `param`.
ApiError ApiErrorFromStatus(const absl::Status& status);

// The error's type for a status the server answers by itself (413, 431, 404, ...).
std::string ErrorTypeForHttpStatus(int status);

nlohmann::json ErrorJson(const ApiError& error);
HttpResponse ErrorResponse(const ApiError& error);
// The body of an error the HTTP server answers by itself (ServerOptions::error_body).
std::string ErrorBody(int status, const std::string& message);

// nlohmann::json::dump that never throws on invalid UTF-8 (it is replaced with U+FFFD).
std::string DumpJson(const nlohmann::json& value);

}  // namespace tessera::http
