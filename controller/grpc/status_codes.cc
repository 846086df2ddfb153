#include "controller/grpc/status_codes.h"

#include <string>

namespace tessera::grpc_api {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  // absl and gRPC share the canonical code numbering (google.rpc.Code), 1..16.
  const grpc::StatusCode grpc_code =
      code >= 1 && code <= 16 ? static_cast<grpc::StatusCode>(code) : grpc::StatusCode::INTERNAL;
  return grpc::Status(grpc_code, std::string(status.message()));
}

const char* StatusCodeName(grpc::StatusCode code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i <= 16 ? kNames[i] : "UNKNOWN";
}

bool WantsRetryAfter(grpc::StatusCode code) { return code == grpc::StatusCode::RESOURCE_EXHAUSTED; }

}  // namespace tessera::grpc_api
