#include "controller/grpc/inference_service.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "controller/grpc/generate_stream.h"
#include "controller/grpc/message_codec.h"
#include "controller/grpc/request_convert.h"
#include "controller/grpc/status_codes.h"
#include "controller/grpc/utf8_text.h"

namespace tessera::grpc_api {
namespace {

namespace v1 = tessera::v1;

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* InferenceService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return StartStream<v1::GenerateRequest>(context, "/tessera.v1.Inference/Generate", *request,
                                          [guard = guard_](const v1::GenerateRequest& r) {
                                            return PrepareGenerate(r, guard->engine());
                                          });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* InferenceService::Chat(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return StartStream<v1::ChatRequest>(
      context, "/tessera.v1.Inference/Chat", *request,
      [guard = guard_, settings = chat_output_](const v1::ChatRequest& r) {
        return PrepareChat(r, guard->engine(), settings);
      });
}

template <typename Request>
grpc::ServerWriteReactor<grpc::ByteBuffer>* InferenceService::StartStream(
    grpc::CallbackServerContext* context, const char* method, const grpc::ByteBuffer& bytes,
    std::function<absl::StatusOr<PreparedCall>(const Request&)> prepare_request) {
  grpc::Status refusal = guard_->Admit(*context);
  if (!refusal.ok()) {
    return GenerateStream::Start(guard_, context, method, std::move(refusal),
                                 absl::CancelledError("refused"));
  }
  // Parsing, checking, rendering and tokenizing: on the pool for large requests.
  auto prepare = [bytes = grpc::ByteBuffer(bytes),
                  prepare_request = std::move(prepare_request)]() -> absl::StatusOr<PreparedCall> {
    Request request;
    if (absl::Status parsed = ParseRequest(bytes, &request); !parsed.ok()) return parsed;
    return prepare_request(request);
  };
  if (prep_pool_ != nullptr && bytes.Length() > serving::kInlinePrepBytes) {
    return GenerateStream::StartPrepared(guard_, context, method, prep_pool_, std::move(prepare));
  }
  return GenerateStream::Start(guard_, context, method, grpc::Status::OK, prepare());
}

template <typename Request, typename Response>
grpc::ServerUnaryReactor* InferenceService::Unary(
    grpc::CallbackServerContext* context, const char* method, const grpc::ByteBuffer& request,
    grpc::ByteBuffer* response,
    absl::Status (InferenceService::*answer)(const Request&, Response*) const) {
  grpc::Status status = guard_->Admit(*context);
  Request parsed;
  Response answered;
  if (status.ok()) status = ToGrpcStatus(ParseRequest(request, &parsed));
  if (status.ok()) status = ToGrpcStatus((this->*answer)(parsed, &answered));
  if (status.ok()) status = SerializeResponse(answered, response);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  guard_->BeforeFinish(context, method, status);
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return Unary(context, "/tessera.v1.Inference/Tokenize", *request, response,
               &InferenceService::AnswerTokenize);
}

grpc::ServerUnaryReactor* InferenceService::Detokenize(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Unary(context, "/tessera.v1.Inference/Detokenize", *request, response,
               &InferenceService::AnswerDetokenize);
}

grpc::ServerUnaryReactor* InferenceService::ListModels(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Unary(context, "/tessera.v1.Inference/ListModels", *request, response,
               &InferenceService::AnswerListModels);
}

grpc::ServerUnaryReactor* InferenceService::GetModelInfo(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  return Unary(context, "/tessera.v1.Inference/GetModelInfo", *request, response,
               &InferenceService::AnswerGetModelInfo);
}

absl::Status InferenceService::AnswerTokenize(const v1::TokenizeRequest& request,
                                              v1::TokenizeResponse* response) const {
  const serving::Engine& engine = guard_->engine();
  if (absl::Status s = CheckModelName(request.model(), engine.info()); !s.ok()) return s;
  const bool add_special = request.has_add_special_tokens() ? request.add_special_tokens() : true;
  // As Generate reads the same text.
  absl::StatusOr<std::vector<int32_t>> ids =
      engine.PromptTokens(request.text(), add_special, request.parse_special_tokens());
  if (!ids.ok()) return ids.status();
  for (int32_t id : *ids) {
    response->add_token_ids(id);
    response->add_tokens(ToValidUtf8(engine.TokenText(id)));
  }
  return absl::OkStatus();
}

absl::Status InferenceService::AnswerDetokenize(const v1::DetokenizeRequest& request,
                                                v1::DetokenizeResponse* response) const {
  const serving::Engine& engine = guard_->engine();
  if (absl::Status s = CheckModelName(request.model(), engine.info()); !s.ok()) return s;
  const int32_t n_vocab = engine.info().n_vocab;
  for (int i = 0; i < request.token_ids_size(); ++i) {
    const int32_t id = request.token_ids(i);
    if (id < 0 || (n_vocab > 0 && id >= n_vocab)) {
      return absl::InvalidArgumentError(absl::StrCat("token_ids[", i, "]: token id ", id,
                                                     " outside the vocabulary [0, ", n_vocab, ")"));
    }
  }
  std::vector<int32_t> ids(request.token_ids().begin(), request.token_ids().end());
  absl::StatusOr<std::string> text = engine.Detokenize(ids);
  if (!text.ok()) return text.status();
  response->set_text(ToValidUtf8(*text));
  return absl::OkStatus();
}

absl::Status InferenceService::AnswerListModels(const v1::ListModelsRequest& /*request*/,
                                                v1::ListModelsResponse* response) const {
  const serving::ModelInfo& info = guard_->engine().info();
  v1::ModelCard* card = response->add_models();
  card->set_id(ToValidUtf8(info.name));
  card->set_created(info.created_unix);
  card->set_owned_by("tessera");
  return absl::OkStatus();
}

absl::Status InferenceService::AnswerGetModelInfo(const v1::GetModelInfoRequest& request,
                                                  v1::ModelInfo* response) const {
  const serving::ModelInfo& info = guard_->engine().info();
  if (absl::Status s = CheckModelName(request.model(), info); !s.ok()) return s;
  response->set_name(ToValidUtf8(info.name));
  response->set_architecture(ToValidUtf8(info.architecture));
  // The file's name only: where the server keeps its models is the operator's business (the
  // full path is in the daemon's log).
  response->set_path(ToValidUtf8(std::filesystem::path(info.path).filename().string()));
  response->set_context_length(info.context_length);
  response->set_max_model_len(info.max_model_len);
  response->set_n_vocab(info.n_vocab);
  response->set_tensor_parallel(info.tp);
  response->set_quantization(ToValidUtf8(info.quantization));
  response->set_created(info.created_unix);
  for (int32_t id : info.eog_token_ids) response->add_eog_token_ids(id);
  response->set_ready(guard_->engine().ready() && guard_->accepting());
  return absl::OkStatus();
}

}  // namespace tessera::grpc_api
