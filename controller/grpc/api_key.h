// The optional API key of the Inference service: `authorization: Bearer KEY` metadata.
#pragma once

#include <string>
#include <string_view>

#include <grpcpp/server_context.h>

namespace tessera::grpc_api {

class ApiKeyCheck {
 public:
  // An empty key lets every call through.
  explicit ApiKeyCheck(std::string key) : key_(std::move(key)) {}

  bool enabled() const { return !key_.empty(); }

  // True when no key is configured, or the call carries `authorization: Bearer <key>`
  // (scheme case-insensitive). The key comparison takes the same time wherever the first
  // difference is, so response timing does not leak a prefix of the key.
  bool Allows(const grpc::ServerContextBase& context) const;

  // The same, on the header value itself.
  bool AllowsHeader(std::string_view authorization) const;

 private:
  std::string key_;
};

}  // namespace tessera::grpc_api
