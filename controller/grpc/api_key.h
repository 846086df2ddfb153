// The optional API key of the Inference service: `authorization: Bearer KEY` metadata, by the
// rule the REST gateway applies to its `Authorization` header (serving::AuthorizationAllows).
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

  // True when no key is configured, or the call carries exactly one `authorization` entry and
  // it is `Bearer <key>` (scheme in any case, one space, the key byte for byte). A call with
  // two `authorization` entries is refused whatever they say. The key comparison takes the
  // same time wherever the first difference is.
  bool Allows(const grpc::ServerContextBase& context) const;

  // The same, for a call carrying this one `authorization` value.
  bool AllowsHeader(std::string_view authorization) const;

 private:
  std::string key_;
};

}  // namespace tessera::grpc_api
