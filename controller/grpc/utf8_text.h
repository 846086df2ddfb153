// Model output as protobuf `string` fields accept it: proto3 strings must be valid UTF-8
// (a client's parser rejects the whole message otherwise), while a model may emit any bytes.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tessera::grpc_api {

// `bytes` with every ill-formed UTF-8 sequence replaced by U+FFFD, following the Unicode
// "maximal subpart" practice (each maximal prefix of a valid sequence becomes one U+FFFD).
// Surrogates and overlong forms count as ill-formed. Valid input is returned unchanged.
std::string ToValidUtf8(std::string_view bytes);

// The offset of the first byte of `bytes` that does not begin a well-formed UTF-8 sequence
// (by the same rules), or nullopt when all of `bytes` is valid UTF-8.
std::optional<size_t> FirstInvalidUtf8Byte(std::string_view bytes);

}  // namespace tessera::grpc_api
