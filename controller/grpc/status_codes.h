// absl::Status (what the engine and the conversions report) to grpc::Status (what a client
// sees). The codes are numerically the same in both; the mapping exists so that the message
// survives as std::string and unknown codes become INTERNAL rather than a client surprise.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tessera::grpc_api {

grpc::Status ToGrpcStatus(const absl::Status& status);

// The canonical name of `code` ("OK", "INVALID_ARGUMENT", ...), as metrics label it.
const char* StatusCodeName(grpc::StatusCode code);

// True for the codes that mean "try again later", for which the server adds a
// `retry-after` trailer: RESOURCE_EXHAUSTED.
bool WantsRetryAfter(grpc::StatusCode code);

}  // namespace tessera::grpc_api
