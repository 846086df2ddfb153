#include "controller/grpc/reflection_service.h"

#include <google/protobuf/descriptor.pb.h>

#include "absl/strings/str_cat.h"
#include "controller/grpc/api_descriptors.h"

namespace tessera::grpc_api {

namespace pb = google::protobuf;
namespace refl = grpc::reflection::v1;

// One ServerReflectionInfo call: read a request, write its answer, repeat until the client
// half-closes. Strictly one operation at a time, so it needs no lock.
class ReflectionService::Stream : public grpc::ServerBidiReactor<refl::ServerReflectionRequest,
                                                                 refl::ServerReflectionResponse> {
 public:
  explicit Stream(const ReflectionService* service) : service_(service) { StartRead(&request_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    response_.Clear();
    service_->Answer(request_, &response_);
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "reflection stream broken"));
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  const ReflectionService* const service_;
  refl::ServerReflectionRequest request_;
  refl::ServerReflectionResponse response_;
};

absl::StatusOr<std::unique_ptr<ReflectionService>> ReflectionService::Create(
    std::vector<std::string> services) {
  pb::FileDescriptorSet set;
  if (!set.ParseFromArray(kApiDescriptorSet, static_cast<int>(kApiDescriptorSetSize))) {
    return absl::InternalError("reflection: the embedded descriptor set does not parse");
  }
  std::unique_ptr<ReflectionService> service(new ReflectionService(std::move(services)));
  // protoc writes a set with --include_imports in dependency order.
  for (const pb::FileDescriptorProto& file : set.file()) {
    if (service->pool_.BuildFile(file) == nullptr) {
      return absl::InternalError(
          absl::StrCat("reflection: embedded file ", file.name(), " does not build"));
    }
    service->files_[file.name()] = file.SerializeAsString();
  }
  return service;
}

grpc::ServerBidiReactor<refl::ServerReflectionRequest, refl::ServerReflectionResponse>*
ReflectionService::ServerReflectionInfo(grpc::CallbackServerContext* /*context*/) {
  return new Stream(this);
}

const pb::FileDescriptor* ReflectionService::FindFileBySymbol(const std::string& symbol) const {
  if (const pb::FileDescriptor* f = pool_.FindFileContainingSymbol(symbol)) return f;
  return pb::DescriptorPool::generated_pool()->FindFileContainingSymbol(symbol);
}

const pb::FileDescriptor* ReflectionService::FindFileByName(const std::string& name) const {
  if (const pb::FileDescriptor* f = pool_.FindFileByName(name)) return f;
  return pb::DescriptorPool::generated_pool()->FindFileByName(name);
}

void ReflectionService::AddWithDependencies(const pb::FileDescriptor* file,
                                            std::set<std::string>* seen,
                                            refl::FileDescriptorResponse* out) const {
  if (!seen->insert(file->name()).second) return;
  auto it = files_.find(file->name());
  if (it != files_.end() && file->pool() == &pool_) {
    out->add_file_descriptor_proto(it->second);
  } else {
    pb::FileDescriptorProto proto;
    file->CopyTo(&proto);
    out->add_file_descriptor_proto(proto.SerializeAsString());
  }
  for (int i = 0; i < file->dependency_count(); ++i) {
    AddWithDependencies(file->dependency(i), seen, out);
  }
}

void ReflectionService::Answer(const refl::ServerReflectionRequest& request,
                               refl::ServerReflectionResponse* response) const {
  response->set_valid_host(request.host());
  *response->mutable_original_request() = request;
  auto not_found = [&](const std::string& what) {
    refl::ErrorResponse* error = response->mutable_error_response();
    error->set_error_code(static_cast<int>(grpc::StatusCode::NOT_FOUND));
    error->set_error_message(what);
  };
  std::set<std::string> seen;
  switch (request.message_request_case()) {
    case refl::ServerReflectionRequest::kListServices:
      for (const std::string& name : services_) {
        response->mutable_list_services_response()->add_service()->set_name(name);
      }
      return;
    case refl::ServerReflectionRequest::kFileByFilename: {
      const pb::FileDescriptor* file = FindFileByName(request.file_by_filename());
      if (file == nullptr) return not_found("file not found: " + request.file_by_filename());
      AddWithDependencies(file, &seen, response->mutable_file_descriptor_response());
      return;
    }
    case refl::ServerReflectionRequest::kFileContainingSymbol: {
      const pb::FileDescriptor* file = FindFileBySymbol(request.file_containing_symbol());
      if (file == nullptr) {
        return not_found("symbol not found: " + request.file_containing_symbol());
      }
      AddWithDependencies(file, &seen, response->mutable_file_descriptor_response());
      return;
    }
    case refl::ServerReflectionRequest::kFileContainingExtension:
      // The API declares no extensions.
      return not_found("extension not found");
    case refl::ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const std::string& type = request.all_extension_numbers_of_type();
      if (pool_.FindMessageTypeByName(type) == nullptr &&
          pb::DescriptorPool::generated_pool()->FindMessageTypeByName(type) == nullptr) {
        return not_found("type not found: " + type);
      }
      response->mutable_all_extension_numbers_response()->set_base_type_name(type);
      return;
    }
    case refl::ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
      break;
  }
  refl::ErrorResponse* error = response->mutable_error_response();
  error->set_error_code(static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  error->set_error_message("empty reflection request");
}

}  // namespace tessera::grpc_api
