// The public API's .proto files (tessera.v1 inference, grpc.health.v1, grpc.reflection.v1)
// as a serialized google.protobuf.FileDescriptorSet built with their comments (protoc
// --include_source_info). Generated code's descriptors carry no comments, so reflection
// serves these instead.
#pragma once

#include <cstddef>

namespace tessera::grpc_api {

extern const unsigned char kApiDescriptorSet[];
extern const size_t kApiDescriptorSetSize;

}  // namespace tessera::grpc_api
