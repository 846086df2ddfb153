// grpc.reflection.v1.ServerReflection, answering from the API's descriptor set with its
// comments (api_descriptors.h), so `grpcurl describe` shows the documentation of every
// method and field. Symbols outside that set (gRPC's own v1alpha reflection service) come
// from the generated descriptor pool. The v1alpha service stays gRPC's own plugin, for older
// clients.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>

#include "absl/status/statusor.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace tessera::grpc_api {

class ReflectionService final : public grpc::reflection::v1::ServerReflection::CallbackService {
 public:
  // `services`: the names list_services answers (the services the server registered).
  // Error when the embedded descriptor set does not parse or build.
  static absl::StatusOr<std::unique_ptr<ReflectionService>> Create(
      std::vector<std::string> services);

  grpc::ServerBidiReactor<grpc::reflection::v1::ServerReflectionRequest,
                          grpc::reflection::v1::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* context) override;

  // The answer to one request (public for the stream; has no side effects).
  void Answer(const grpc::reflection::v1::ServerReflectionRequest& request,
              grpc::reflection::v1::ServerReflectionResponse* response) const;

 private:
  class Stream;
  explicit ReflectionService(std::vector<std::string> services) : services_(std::move(services)) {}

  // The file holding `symbol` (a message, enum, service, method or field name).
  const google::protobuf::FileDescriptor* FindFileBySymbol(const std::string& symbol) const;
  const google::protobuf::FileDescriptor* FindFileByName(const std::string& name) const;
  // Serialized FileDescriptorProtos of `file` and every file it imports, each once.
  void AddWithDependencies(const google::protobuf::FileDescriptor* file,
                           std::set<std::string>* seen,
                           grpc::reflection::v1::FileDescriptorResponse* out) const;

  std::vector<std::string> services_;
  google::protobuf::DescriptorPool pool_;     // built from the embedded set
  std::map<std::string, std::string> files_;  // name -> FileDescriptorProto with comments
};

}  // namespace tessera::grpc_api
