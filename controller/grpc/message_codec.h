// The Inference service's messages as bytes. The service takes its requests unparsed (gRPC's
// raw callback methods) and parses them here, so that bytes protobuf refuses -- a proto3
// string that is not UTF-8, a truncated or garbled message -- are INVALID_ARGUMENT saying
// what was wrong, instead of the UNIMPLEMENTED without details that gRPC 1.51's generated
// handlers answer when they cannot parse a request.
#pragma once

#include <string>
#include <string_view>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tessera::grpc_api {

// Parses `bytes` into `message` (cleared first). INVALID_ARGUMENT otherwise, e.g. "the
// request is not a valid tessera.v1.ChatRequest: messages[1].content: expected UTF-8 text
// (a proto3 string), byte 4 is 0xff".
absl::Status ParseRequest(std::string_view bytes, google::protobuf::Message* message);
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, google::protobuf::Message* message);

// Why `bytes` is not a message of `type`: "<field path>: <what>" for a string field that is
// not UTF-8, a sub-message or packed field that is not well formed; a sentence for bytes
// that are not protobuf wire format at all; "" when no reason is found. Fields the type does
// not define are skipped (unknown fields are allowed).
std::string DescribeInvalidMessage(const google::protobuf::Descriptor& type,
                                   std::string_view bytes);

// `message` serialized as a raw method's response; INTERNAL when protobuf refuses it.
grpc::Status SerializeResponse(const google::protobuf::Message& message, grpc::ByteBuffer* out);

}  // namespace tessera::grpc_api
