#include "controller/grpc/api_key.h"

#include <vector>

#include "controller/serving/request_validation.h"

namespace tessera::grpc_api {

bool ApiKeyCheck::AllowsHeader(std::string_view authorization) const {
  return serving::AuthorizationAllows(
      {absl::string_view(authorization.data(), authorization.size())}, key_);
}

bool ApiKeyCheck::Allows(const grpc::ServerContextBase& context) const {
  if (!enabled()) return true;
  std::vector<absl::string_view> values;
  // gRPC delivers metadata keys in lower case.
  const auto [begin, end] = context.client_metadata().equal_range("authorization");
  for (auto it = begin; it != end; ++it) values.emplace_back(it->second.data(), it->second.size());
  return serving::AuthorizationAllows(values, key_);
}

}  // namespace tessera::grpc_api
