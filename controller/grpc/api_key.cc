#include "controller/grpc/api_key.h"

#include <cctype>

namespace tessera::grpc_api {
namespace {

// Compares every byte of the longer string whatever the contents, so the time taken says
// nothing about where `given` first differs from `expected` (only its length may show).
bool ConstantTimeEquals(std::string_view given, std::string_view expected) {
  const size_t n = given.size() > expected.size() ? given.size() : expected.size();
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    const unsigned char b = i < expected.size() ? static_cast<unsigned char>(expected[i]) : 0;
    diff |= a ^ b;
  }
  return diff == 0;
}

bool StartsWithBearer(std::string_view value) {
  constexpr std::string_view kScheme = "bearer ";
  if (value.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(value[i])) != kScheme[i]) return false;
  }
  return true;
}

}  // namespace

bool ApiKeyCheck::AllowsHeader(std::string_view authorization) const {
  if (!enabled()) return true;
  if (!StartsWithBearer(authorization)) return false;
  std::string_view token = authorization.substr(7);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return ConstantTimeEquals(token, key_);
}

bool ApiKeyCheck::Allows(const grpc::ServerContextBase& context) const {
  if (!enabled()) return true;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return false;
  return AllowsHeader(std::string_view(it->second.data(), it->second.size()));
}

}  // namespace tessera::grpc_api
