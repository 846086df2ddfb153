#include "controller/http/openai_errors.h"

#include "controller/serving/request_validation.h"

namespace tessera::http {
namespace {

// Seconds a client told 429 should wait before retrying.
constexpr char kRetryAfterSeconds[] = "1";

}  // namespace

absl::Status InvalidParam(const std::string& param, const std::string& message) {
  return serving::InvalidField(param, message);
}

ApiError ApiErrorFromStatus(const absl::Status& status) {
  ApiError error;
  error.message = std::string(status.message());
  error.param = serving::FieldOf(status);
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      error.status = 400;
      break;
    case absl::StatusCode::kNotFound:
      error.status = 404;
      break;
    case absl::StatusCode::kResourceExhausted:
      error.status = 429;
      error.headers.push_back({"Retry-After", kRetryAfterSeconds});
      break;
    case absl::StatusCode::kUnauthenticated:
      error.status = 401;
      error.code = "invalid_api_key";
      break;
    case absl::StatusCode::kPermissionDenied:
      error.status = 403;
      break;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kAborted:
      error.status = 503;
      break;
    case absl::StatusCode::kDeadlineExceeded:
      error.status = 504;
      break;
    default:
      error.status = 500;
      break;
  }
  error.type = ErrorTypeForHttpStatus(error.status);
  if (error.status == 429) error.code = "rate_limit_exceeded";
  return error;
}

std::string ErrorTypeForHttpStatus(int status) {
  switch (status) {
    case 401:
    case 403:
    case 404:
    case 405:
    case 413:
    case 431:
      return "invalid_request_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable";
    case 504:
      return "timeout";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

nlohmann::json ErrorJson(const ApiError& error) {
  auto or_null = [](const std::string& s) {
    return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
  };
  return {{"error",
           {{"message", error.message},
            {"type", error.type},
            {"param", or_null(error.param)},
            {"code", or_null(error.code)}}}};
}

HttpResponse ErrorResponse(const ApiError& error) {
  HttpResponse response;
  response.status = error.status;
  response.body = DumpJson(ErrorJson(error));
  response.headers = error.headers;
  return response;
}

std::string ErrorBody(int status, const std::string& message) {
  ApiError error;
  error.status = status;
  error.message = message;
  error.type = ErrorTypeForHttpStatus(status);
  return DumpJson(ErrorJson(error));
}

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tessera::http
