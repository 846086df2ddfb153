#include "controller/grpc/call_guard.h"

#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "controller/grpc/status_codes.h"

namespace tessera::grpc_api {
namespace {

uint64_t RandomPrefix() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
         static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

}  // namespace

CallGuard::CallGuard(serving::Engine* engine, std::string api_key, int retry_after_seconds,
                     CallObserver observer)
    : engine_(engine),
      api_key_(std::move(api_key)),
      retry_after_seconds_(retry_after_seconds),
      observer_(std::move(observer)),
      id_prefix_(RandomPrefix() & 0xFFFFFFFFull) {}

grpc::Status CallGuard::Admit(const grpc::CallbackServerContext& context) const {
  if (!api_key_.Allows(context)) {
    return grpc::Status(
        grpc::StatusCode::UNAUTHENTICATED,
        "missing or wrong API key: send one metadata entry `authorization: Bearer KEY`");
  }
  if (!accepting()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "server is draining and accepts no new requests");
  }
  return grpc::Status::OK;
}

void CallGuard::BeforeFinish(grpc::CallbackServerContext* context, const std::string& method,
                             const grpc::Status& status) const {
  if (WantsRetryAfter(status.error_code())) {
    context->AddTrailingMetadata("retry-after", absl::StrCat(retry_after_seconds_));
  }
  if (observer_) observer_(method, status.error_code());
}

std::string CallGuard::NewRequestId() {
  return absl::StrFormat("grpc-%08x-%d", id_prefix_, next_request_id_.fetch_add(1));
}

}  // namespace tessera::grpc_api
