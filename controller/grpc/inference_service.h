// tessera.v1.Inference on the gRPC callback API, over a serving::Engine.
#pragma once

#include "controller/grpc/call_guard.h"
#include "tessera/v1/inference.grpc.pb.h"

namespace tessera::grpc_api {

class InferenceService final : public tessera::v1::Inference::CallbackService {
 public:
  // `guard` must outlive the service.
  explicit InferenceService(CallGuard* guard) : guard_(guard) {}

  grpc::ServerWriteReactor<tessera::v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const tessera::v1::GenerateRequest* request) override;
  grpc::ServerWriteReactor<tessera::v1::GenerateResponse>* Chat(
      grpc::CallbackServerContext* context, const tessera::v1::ChatRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const tessera::v1::TokenizeRequest* request,
                                     tessera::v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const tessera::v1::DetokenizeRequest* request,
                                       tessera::v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const tessera::v1::ListModelsRequest* request,
                                       tessera::v1::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const tessera::v1::GetModelInfoRequest* request,
                                         tessera::v1::ModelInfo* response) override;

 private:
  // Admission, request conversion and prompt tokenization shared by Generate and Chat; any
  // failure finishes the stream with its status.
  template <typename Request>
  grpc::ServerWriteReactor<tessera::v1::GenerateResponse>* StartStream(
      grpc::CallbackServerContext* context, const char* method, const Request& request,
      absl::StatusOr<std::vector<int32_t>> (*prompt_tokens)(const Request&,
                                                            const serving::Engine&));
  grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context, const char* method,
                                        grpc::Status status);

  CallGuard* const guard_;
};

}  // namespace tessera::grpc_api
