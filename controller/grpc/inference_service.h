// tessera.v1.Inference on the gRPC callback API, over a serving::Engine.
//
// Every method is a raw one: the request arrives as bytes and is parsed here
// (message_codec.h), so that a request protobuf cannot parse is INVALID_ARGUMENT naming what
// was wrong; the API key is checked before the bytes are looked at.
#pragma once

#include <functional>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "controller/grpc/call_guard.h"
#include "controller/grpc/request_convert.h"
#include "controller/serving/prep_pool.h"
#include "controller/serving/tool_calling.h"
#include "tessera/v1/inference.grpc.pb.h"

namespace tessera::grpc_api {

// tessera.v1.Inference's service with every method raw (bytes in, bytes out).
using RawInferenceService = tessera::v1::Inference::WithRawCallbackMethod_Generate<
    tessera::v1::Inference::WithRawCallbackMethod_Chat<
        tessera::v1::Inference::WithRawCallbackMethod_Tokenize<
            tessera::v1::Inference::WithRawCallbackMethod_Detokenize<
                tessera::v1::Inference::WithRawCallbackMethod_ListModels<
                    tessera::v1::Inference::WithRawCallbackMethod_GetModelInfo<
                        tessera::v1::Inference::Service>>>>>>;

class InferenceService final : public RawInferenceService {
 public:
  // `guard` must outlive the service.
  // `prep_pool` (may be null) prepares large Generate / Chat requests off the callback threads.
  // `chat_output`: how Chat output is parsed (tool calls, reasoning; tesserad's
  // --tool-call-parser and --reasoning-parser).
  InferenceService(CallGuard* guard, serving::PrepPool* prep_pool,
                   serving::ChatOutputSettings chat_output)
      : guard_(guard), prep_pool_(prep_pool), chat_output_(std::move(chat_output)) {}

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Chat(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;

 private:
  // Admission and parsing shared by Generate and Chat, then `prepare` (request conversion,
  // prompt tokenization); any failure finishes the stream with its status.
  template <typename Request>
  grpc::ServerWriteReactor<grpc::ByteBuffer>* StartStream(
      grpc::CallbackServerContext* context, const char* method, const grpc::ByteBuffer& bytes,
      std::function<absl::StatusOr<PreparedCall>(const Request&)> prepare);
  // Admission, parsing, `answer` and the response's serialization shared by the unary calls.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context, const char* method,
                                  const grpc::ByteBuffer& request, grpc::ByteBuffer* response,
                                  absl::Status (InferenceService::*answer)(const Request&,
                                                                           Response*) const);

  absl::Status AnswerTokenize(const tessera::v1::TokenizeRequest& request,
                              tessera::v1::TokenizeResponse* response) const;
  absl::Status AnswerDetokenize(const tessera::v1::DetokenizeRequest& request,
                                tessera::v1::DetokenizeResponse* response) const;
  absl::Status AnswerListModels(const tessera::v1::ListModelsRequest& request,
                                tessera::v1::ListModelsResponse* response) const;
  absl::Status AnswerGetModelInfo(const tessera::v1::GetModelInfoRequest& request,
                                  tessera::v1::ModelInfo* response) const;

  CallGuard* const guard_;
  serving::PrepPool* const prep_pool_;
  const serving::ChatOutputSettings chat_output_;
};

}  // namespace tessera::grpc_api
