#include "controller/grpc/inference_service.h"

#include "controller/grpc/generate_stream.h"
#include "controller/grpc/request_convert.h"
#include "controller/grpc/status_codes.h"
#include "controller/grpc/utf8_text.h"

namespace tessera::grpc_api {
namespace {

namespace v1 = tessera::v1;

// The engine request shared by Generate and Chat, less the prompt.
absl::StatusOr<serving::GenerateRequest> BaseRequest(const std::string& model,
                                                     const v1::SamplingParams& sampling,
                                                     const v1::GenerationOptions& options,
                                                     const std::string& request_id,
                                                     const serving::Engine& engine) {
  if (absl::Status s = CheckModelName(model, engine.info()); !s.ok()) return s;
  serving::GenerateRequest request;
  request.request_id = request_id;
  absl::StatusOr<serving::Sampling> s = ToSampling(sampling);
  if (!s.ok()) return s.status();
  request.sampling = *s;
  if (absl::Status st = ApplyOptions(options, &request); !st.ok()) return st;
  return request;
}

}  // namespace

grpc::ServerWriteReactor<v1::GenerateResponse>* InferenceService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  return StartStream(context, "/tessera.v1.Inference/Generate", *request, &PromptTokens);
}

grpc::ServerWriteReactor<v1::GenerateResponse>* InferenceService::Chat(
    grpc::CallbackServerContext* context, const v1::ChatRequest* request) {
  return StartStream(context, "/tessera.v1.Inference/Chat", *request, &ChatPromptTokens);
}

template <typename Request>
grpc::ServerWriteReactor<v1::GenerateResponse>* InferenceService::StartStream(
    grpc::CallbackServerContext* context, const char* method, const Request& request,
    absl::StatusOr<std::vector<int32_t>> (*prompt_tokens)(const Request&, const serving::Engine&)) {
  grpc::Status refusal = guard_->Admit(*context);
  absl::StatusOr<serving::GenerateRequest> engine_request = absl::CancelledError("refused");
  if (refusal.ok()) {
    engine_request = BaseRequest(request.model(), request.sampling(), request.options(),
                                 request.request_id(), guard_->engine());
  }
  if (refusal.ok() && engine_request.ok()) {
    absl::StatusOr<std::vector<int32_t>> prompt = prompt_tokens(request, guard_->engine());
    if (prompt.ok()) {
      engine_request->prompt_tokens = *std::move(prompt);
    } else {
      engine_request = prompt.status();
    }
  }
  return GenerateStream::Start(guard_, context, method, std::move(refusal),
                               std::move(engine_request));
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(grpc::CallbackServerContext* context,
                                                     const v1::TokenizeRequest* request,
                                                     v1::TokenizeResponse* response) {
  grpc::Status status = guard_->Admit(*context);
  if (status.ok()) status = ToGrpcStatus(CheckModelName(request->model(), guard_->engine().info()));
  if (status.ok()) {
    const bool add_special =
        request->has_add_special_tokens() ? request->add_special_tokens() : true;
    absl::StatusOr<std::vector<int32_t>> ids =
        guard_->engine().Tokenize(request->text(), add_special);
    if (ids.ok()) {
      for (int32_t id : *ids) {
        response->add_token_ids(id);
        response->add_tokens(ToValidUtf8(guard_->engine().TokenText(id)));
      }
    } else {
      status = ToGrpcStatus(ids.status());
    }
  }
  return FinishUnary(context, "/tessera.v1.Inference/Tokenize", std::move(status));
}

grpc::ServerUnaryReactor* InferenceService::Detokenize(grpc::CallbackServerContext* context,
                                                       const v1::DetokenizeRequest* request,
                                                       v1::DetokenizeResponse* response) {
  grpc::Status status = guard_->Admit(*context);
  if (status.ok()) status = ToGrpcStatus(CheckModelName(request->model(), guard_->engine().info()));
  if (status.ok()) {
    const int32_t n_vocab = guard_->engine().info().n_vocab;
    for (int i = 0; i < request->token_ids_size() && status.ok(); ++i) {
      const int32_t id = request->token_ids(i);
      if (id < 0 || (n_vocab > 0 && id >= n_vocab)) {
        status =
            grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                         "token_ids[" + std::to_string(i) + "]: token id " + std::to_string(id) +
                             " outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
      }
    }
  }
  if (status.ok()) {
    std::vector<int32_t> ids(request->token_ids().begin(), request->token_ids().end());
    absl::StatusOr<std::string> text = guard_->engine().Detokenize(ids);
    if (text.ok()) {
      response->set_text(ToValidUtf8(*text));
    } else {
      status = ToGrpcStatus(text.status());
    }
  }
  return FinishUnary(context, "/tessera.v1.Inference/Detokenize", std::move(status));
}

grpc::ServerUnaryReactor* InferenceService::ListModels(grpc::CallbackServerContext* context,
                                                       const v1::ListModelsRequest* /*request*/,
                                                       v1::ListModelsResponse* response) {
  grpc::Status status = guard_->Admit(*context);
  if (status.ok()) {
    const serving::ModelInfo& info = guard_->engine().info();
    v1::ModelCard* card = response->add_models();
    card->set_id(ToValidUtf8(info.name));
    card->set_created(info.created_unix);
    card->set_owned_by("tessera");
  }
  return FinishUnary(context, "/tessera.v1.Inference/ListModels", std::move(status));
}

grpc::ServerUnaryReactor* InferenceService::GetModelInfo(grpc::CallbackServerContext* context,
                                                         const v1::GetModelInfoRequest* request,
                                                         v1::ModelInfo* response) {
  grpc::Status status = guard_->Admit(*context);
  if (status.ok()) status = ToGrpcStatus(CheckModelName(request->model(), guard_->engine().info()));
  if (status.ok()) {
    const serving::ModelInfo& info = guard_->engine().info();
    response->set_name(ToValidUtf8(info.name));
    response->set_architecture(ToValidUtf8(info.architecture));
    response->set_path(ToValidUtf8(info.path));
    response->set_context_length(info.context_length);
    response->set_max_model_len(info.max_model_len);
    response->set_n_vocab(info.n_vocab);
    response->set_tensor_parallel(info.tp);
    response->set_quantization(ToValidUtf8(info.quantization));
    response->set_created(info.created_unix);
    for (int32_t id : info.eog_token_ids) response->add_eog_token_ids(id);
    response->set_ready(guard_->engine().ready() && guard_->accepting());
  }
  return FinishUnary(context, "/tessera.v1.Inference/GetModelInfo", std::move(status));
}

grpc::ServerUnaryReactor* InferenceService::FinishUnary(grpc::CallbackServerContext* context,
                                                        const char* method, grpc::Status status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  guard_->BeforeFinish(context, method, status);
  reactor->Finish(status);
  return reactor;
}

}  // namespace tessera::grpc_api
