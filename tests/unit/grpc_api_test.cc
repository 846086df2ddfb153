// tessera_grpc_api end to end: the real GrpcServer on a loopback port over the
// ScriptedEngine (tests/support/scripted_engine.h, which echoes its prompt), driven by the
// generated C++ stub. Expected tokens and text follow from the prompt by hand (ids are
// bytes, BOS 256).
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "controller/grpc/api_key.h"
#include "controller/grpc/grpc_server.h"
#include "controller/grpc/reflection_service.h"
#include "controller/grpc/status_codes.h"
#include "controller/grpc/utf8_text.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tessera/v1/inference.grpc.pb.h"
#include "tests/support/scripted_engine.h"

namespace tessera::grpc_api {
namespace {

namespace v1 = tessera::v1;
using ::tessera::testing::ScriptedEngine;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

struct StreamResult {
  std::vector<v1::GenerateResponse> chunks;
  grpc::Status status;
  std::multimap<std::string, std::string> trailers;

  std::vector<int32_t> ids() const {
    std::vector<int32_t> out;
    for (const auto& c : chunks) out.insert(out.end(), c.token_ids().begin(), c.token_ids().end());
    return out;
  }
  std::string text() const {
    std::string out;
    for (const auto& c : chunks) out += c.text();
    return out;
  }
};

// Polls `done` for up to two seconds: the server finishes its side of a call (OnDone,
// engine cancel) shortly after the client has seen the status.
template <typename Pred>
bool WaitUntil(Pred done) {
  for (int i = 0; i < 400 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

template <typename Reader>
StreamResult Drain(grpc::ClientContext* context, Reader reader) {
  StreamResult r;
  v1::GenerateResponse chunk;
  while (reader->Read(&chunk)) r.chunks.push_back(chunk);
  r.status = reader->Finish();
  for (const auto& [k, v] : context->GetServerTrailingMetadata()) {
    r.trailers.emplace(std::string(k.data(), k.size()), std::string(v.data(), v.size()));
  }
  return r;
}

class GrpcApiTest : public ::testing::Test {
 protected:
  void StartServer(GrpcServerOptions options = {}) {
    options.port = 0;
    options.health_poll_interval = std::chrono::milliseconds(10);
    options.observer = [this](const std::string& method, grpc::StatusCode code) {
      std::lock_guard<std::mutex> lock(observed_mu_);
      observed_.emplace_back(method, code);
    };
    absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Start(&engine_, options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = v1::Inference::NewStub(channel_);
  }
  void SetUp() override { StartServer(); }
  void TearDown() override { server_.reset(); }

  StreamResult Generate(const v1::GenerateRequest& request, const std::string& key = "") {
    grpc::ClientContext context;
    if (!key.empty()) context.AddMetadata("authorization", "Bearer " + key);
    return Drain(&context, stub_->Generate(&context, request));
  }
  static v1::GenerateRequest TextRequest(const std::string& text) {
    v1::GenerateRequest r;
    r.set_text(text);
    return r;
  }

  // grpc.health.v1.Health/Check with hand-encoded messages: request {service = 1}, response
  // {status = 1} where SERVING = 1, NOT_SERVING = 2.
  int HealthStatus(const std::string& service = "") {
    grpc::GenericStub generic(channel_);
    std::string request_bytes;
    if (!service.empty()) {
      request_bytes = std::string("\x0A", 1) + static_cast<char>(service.size()) + service;
    }
    grpc::Slice slice(request_bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext context;
    std::promise<grpc::Status> done;
    generic.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                      &response, [&](grpc::Status s) { done.set_value(s); });
    grpc::Status status = done.get_future().get();
    if (!status.ok()) return -static_cast<int>(status.error_code());
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(response.Dump(&slices).ok());
    std::string bytes;
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    if (bytes.size() == 2 && bytes[0] == '\x08') return bytes[1];
    return 0;  // UNKNOWN
  }

  // `bytes` sent as the request of `method` (any method: a streaming one answers its error
  // status the same way), with optional metadata; the status and the answer's bytes.
  grpc::Status RawCall(const std::string& method, const std::string& bytes,
                       const std::vector<std::pair<std::string, std::string>>& metadata = {},
                       std::string* answer = nullptr) {
    grpc::GenericStub generic(channel_);
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext context;
    for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
    std::promise<grpc::Status> done;
    generic.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                      [&](grpc::Status s) { done.set_value(s); });
    grpc::Status status = done.get_future().get();
    if (answer != nullptr && status.ok()) {
      std::vector<grpc::Slice> slices;
      EXPECT_TRUE(response.Dump(&slices).ok());
      answer->clear();
      for (const auto& s : slices)
        answer->append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    return status;
  }

  int WaitForHealth(int want) {
    int got = 0;
    for (int i = 0; i < 200 && (got = HealthStatus()) != want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return got;
  }

  void SetTokenDelay(std::chrono::milliseconds delay) {
    engine_.Configure([delay](ScriptedEngine::Options& o) { o.token_delay = delay; });
  }

  std::vector<std::pair<std::string, grpc::StatusCode>> observed() {
    std::lock_guard<std::mutex> lock(observed_mu_);
    return observed_;
  }

  ScriptedEngine engine_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Inference::Stub> stub_;
  std::mutex observed_mu_;
  std::vector<std::pair<std::string, grpc::StatusCode>> observed_;
};

TEST_F(GrpcApiTest, GenerateStreamsTheEchoThenFinishAndUsageOnTheLastChunk) {
  v1::GenerateRequest request = TextRequest("hi");
  request.set_request_id("req-1");
  StreamResult r = Generate(request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(r.ids(), ElementsAre('h', 'i'));
  EXPECT_EQ(r.text(), "hi");
  ASSERT_FALSE(r.chunks.empty());
  for (size_t i = 0; i + 1 < r.chunks.size(); ++i) {
    EXPECT_EQ(r.chunks[i].finish_reason(), "") << "chunk " << i;
    EXPECT_FALSE(r.chunks[i].has_usage()) << "chunk " << i;
  }
  const v1::GenerateResponse& last = r.chunks.back();
  EXPECT_EQ(last.finish_reason(), "stop");
  EXPECT_EQ(last.usage().prompt_tokens(), 3);  // BOS h i
  EXPECT_EQ(last.usage().completion_tokens(), 2);
  EXPECT_EQ(last.usage().total_tokens(), 5);
  for (const auto& c : r.chunks) EXPECT_EQ(c.request_id(), "req-1");
  EXPECT_THAT(engine_.requests().back().prompt_tokens, ElementsAre(ScriptedEngine::kBos, 'h', 'i'));
}

TEST_F(GrpcApiTest, MaxTokensEndsWithLength) {
  v1::GenerateRequest request = TextRequest("hello");
  request.mutable_options()->set_max_tokens(2);
  StreamResult r = Generate(request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(r.ids(), ElementsAre('h', 'e'));
  EXPECT_EQ(r.chunks.back().finish_reason(), "length");
  EXPECT_EQ(r.chunks.back().usage().completion_tokens(), 2);
  EXPECT_FALSE(r.chunks.back().request_id().empty());  // the server made one
}

TEST_F(GrpcApiTest, OddModelBytesAreReplacedTextNotAnError) {
  engine_.Configure([](ScriptedEngine::Options& o) { o.raw_text = true; });
  v1::GenerateRequest request;
  request.mutable_token_ids()->add_ids(0xE2);  // a lone lead byte
  request.mutable_token_ids()->add_ids('a');
  request.mutable_token_ids()->add_ids(0xFF);  // never valid in UTF-8
  StreamResult r = Generate(request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(r.ids(), ElementsAre(0xE2, 'a', 0xFF));
  EXPECT_EQ(r.text(), std::string(kReplacement) + "a" + kReplacement);
  EXPECT_EQ(r.chunks.back().usage().prompt_tokens(), 3);  // ids used as given, no BOS
}

TEST_F(GrpcApiTest, LogprobsCarryTokenTextBytesAndAlternatives) {
  v1::GenerateRequest request = TextRequest("ab");
  request.mutable_options()->set_logprobs(true);
  request.mutable_options()->set_top_logprobs(2);
  StreamResult r = Generate(request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  std::vector<v1::TokenLogprob> lps;
  for (const auto& c : r.chunks) {
    EXPECT_EQ(c.logprobs_size(), c.token_ids_size());
    lps.insert(lps.end(), c.logprobs().begin(), c.logprobs().end());
  }
  ASSERT_EQ(lps.size(), 2u);
  EXPECT_EQ(lps[0].token(), 'a');
  EXPECT_EQ(lps[0].text(), "a");
  EXPECT_EQ(lps[0].bytes(), "a");
  EXPECT_FLOAT_EQ(lps[0].logprob(), -0.125f);
  EXPECT_FLOAT_EQ(lps[1].logprob(), -0.25f);
  ASSERT_EQ(lps[1].top_logprobs_size(), 2);
  EXPECT_EQ(lps[1].top_logprobs(1).token(), 'c');  // 'b' + 1
  EXPECT_EQ(lps[1].top_logprobs(1).text(), "c");
  EXPECT_FLOAT_EQ(lps[1].top_logprobs(1).logprob(), -1.25f);
}

TEST_F(GrpcApiTest, SamplingFieldsReachTheEngineAndAbsentOnesTakeDefaults) {
  v1::GenerateRequest request = TextRequest("x");
  request.mutable_sampling()->set_temperature(0.0f);
  request.mutable_sampling()->set_top_k(5);
  request.mutable_sampling()->set_seed(42);
  request.mutable_sampling()->set_frequency_penalty(0.5f);
  request.mutable_options()->add_stop("\n\n");
  request.mutable_options()->add_stop_token_ids(7);
  request.mutable_options()->set_ignore_eos(true);
  ASSERT_TRUE(Generate(request).status.ok());
  const serving::GenerateRequest got = engine_.requests().back();
  EXPECT_EQ(got.sampling.temperature, 0.0f);
  EXPECT_EQ(got.sampling.top_k, 5);
  EXPECT_EQ(got.sampling.seed, 42u);
  EXPECT_EQ(got.sampling.frequency_penalty, 0.5f);
  EXPECT_EQ(got.sampling.top_p, 1.0f);
  EXPECT_EQ(got.sampling.repetition_penalty, 1.0f);
  EXPECT_THAT(got.stop, ElementsAre("\n\n"));
  EXPECT_THAT(got.stop_token_ids, ElementsAre(7));
  EXPECT_TRUE(got.ignore_eos);
  EXPECT_FALSE(got.logprobs);
}

TEST_F(GrpcApiTest, BadParametersAreInvalidArgumentNamingTheField) {
  v1::GenerateRequest request = TextRequest("x");
  request.mutable_sampling()->set_temperature(-1.0f);
  StreamResult r = Generate(request);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("temperature"));

  request = TextRequest("x");
  request.mutable_sampling()->set_top_p(1.5f);
  EXPECT_THAT(Generate(request).status.error_message(), HasSubstr("top_p"));

  request.Clear();  // no prompt at all
  EXPECT_EQ(Generate(request).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  request.mutable_token_ids()->add_ids(ScriptedEngine::kVocab);
  r = Generate(request);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("outside the vocabulary"));

  request = TextRequest("x");
  request.set_model("gpt-4");
  EXPECT_EQ(Generate(request).status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(engine_.requests().size(), 0u);
}

TEST_F(GrpcApiTest, ChatRendersMessagesWithTheTemplate) {
  v1::ChatRequest request;
  auto* m = request.add_messages();
  m->set_role("user");
  m->set_content("hi");
  grpc::ClientContext context;
  StreamResult r = Drain(&context, stub_->Chat(&context, request));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  const std::string rendered = "<|user|>hi\n<|assistant|>";
  EXPECT_EQ(r.text(), rendered);
  EXPECT_EQ(r.chunks.back().finish_reason(), "stop");
  // As the REST gateway: the template writes the special tokens it wants, no BOS is added.
  EXPECT_EQ(r.chunks.back().usage().prompt_tokens(), static_cast<int>(rendered.size()));

  grpc::ClientContext empty_context;
  v1::ChatRequest empty;
  StreamResult e = Drain(&empty_context, stub_->Chat(&empty_context, empty));
  EXPECT_EQ(e.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(e.status.error_message(), HasSubstr("messages"));
}

TEST_F(GrpcApiTest, TokenizeAndDetokenize) {
  v1::TokenizeRequest request;
  request.set_text("ab");
  v1::TokenizeResponse response;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Tokenize(&context, request, &response).ok());
  }
  EXPECT_THAT(response.token_ids(), ElementsAre(ScriptedEngine::kBos, 'a', 'b'));
  EXPECT_THAT(response.tokens(), ElementsAre("<s>", "a", "b"));
  request.set_add_special_tokens(false);
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Tokenize(&context, request, &response).ok());
  }
  EXPECT_THAT(response.token_ids(), ElementsAre('a', 'b'));

  v1::DetokenizeRequest detok;
  detok.add_token_ids('h');
  detok.add_token_ids('i');
  detok.add_token_ids(0xFF);
  v1::DetokenizeResponse text;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Detokenize(&context, detok, &text).ok());
  }
  EXPECT_EQ(text.text(), std::string("hi") + kReplacement);
  detok.add_token_ids(-1);
  grpc::ClientContext context;
  grpc::Status bad = stub_->Detokenize(&context, detok, &text);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(), HasSubstr("token_ids[3]"));
}

TEST_F(GrpcApiTest, ListModelsAndGetModelInfo) {
  v1::ListModelsResponse models;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->ListModels(&context, v1::ListModelsRequest(), &models).ok());
  }
  ASSERT_EQ(models.models_size(), 1);
  EXPECT_EQ(models.models(0).id(), "scripted-echo");
  EXPECT_EQ(models.models(0).owned_by(), "tessera");
  EXPECT_EQ(models.models(0).created(), 1700000000);

  v1::ModelInfo info;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  }
  EXPECT_EQ(info.name(), "scripted-echo");
  // The engine's model is /models/echo.gguf: clients see the file's name, not where it is.
  EXPECT_EQ(info.path(), "echo.gguf");
  EXPECT_EQ(info.n_vocab(), 258);
  EXPECT_EQ(info.context_length(), 4096);
  EXPECT_EQ(info.quantization(), "F32");
  EXPECT_THAT(info.eog_token_ids(), ElementsAre(ScriptedEngine::kEos));
  EXPECT_TRUE(info.ready());

  v1::GetModelInfoRequest other;
  other.set_model("llama");
  grpc::ClientContext context;
  EXPECT_EQ(stub_->GetModelInfo(&context, other, &info).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcApiTest, HealthFollowsEngineReadiness) {
  EXPECT_EQ(WaitForHealth(1), 1);
  EXPECT_EQ(HealthStatus("tessera.v1.Inference"), 1);
  engine_.set_ready(false);
  EXPECT_EQ(WaitForHealth(2), 2);
  engine_.set_ready(true);
  EXPECT_EQ(WaitForHealth(1), 1);
}

TEST_F(GrpcApiTest, HealthCheckOfAnUnknownServiceIsNotFound) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("no.such.Service");
  grpc::health::v1::HealthCheckResponse response;
  grpc::ClientContext context;
  EXPECT_EQ(health->Check(&context, request, &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcApiTest, HealthWatchReportsChangesAndEndsAtShutdown) {
  using Response = grpc::health::v1::HealthCheckResponse;
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  auto reader = health->Watch(&context, {});
  Response response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), Response::SERVING);
  engine_.set_ready(false);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), Response::NOT_SERVING);
  engine_.set_ready(true);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), Response::SERVING);

  std::thread shutdown(
      [&] { server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10)); });
  while (reader->Read(&response)) {
    EXPECT_EQ(response.status(), Response::NOT_SERVING);
  }
  EXPECT_TRUE(reader->Finish().ok());
  shutdown.join();

  grpc::ClientContext unknown_context;
  grpc::health::v1::HealthCheckRequest unknown;
  unknown.set_service("no.such.Service");
  StartServer();
  auto unknown_reader =
      grpc::health::v1::Health::NewStub(channel_)->Watch(&unknown_context, unknown);
  ASSERT_TRUE(unknown_reader->Read(&response));
  EXPECT_EQ(response.status(), Response::SERVICE_UNKNOWN);
  unknown_context.TryCancel();
}

TEST_F(GrpcApiTest, ApiKeyGuardsInferenceButNotHealth) {
  server_.reset();
  GrpcServerOptions options;
  options.api_key = "s3cret";
  StartServer(options);
  v1::ModelInfo info;
  {
    grpc::ClientContext context;
    EXPECT_EQ(stub_->GetModelInfo(&context, {}, &info).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer s3cre");
    EXPECT_EQ(stub_->GetModelInfo(&context, {}, &info).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(Generate(TextRequest("x"), "wrong").status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(engine_.requests().size(), 0u);
  {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer s3cret");
    EXPECT_TRUE(stub_->GetModelInfo(&context, {}, &info).ok());
  }
  EXPECT_TRUE(Generate(TextRequest("x"), "s3cret").status.ok());
  EXPECT_EQ(WaitForHealth(1), 1);  // no key needed
}

TEST_F(GrpcApiTest, ApiKeyIsOneBearerEntryAsOverRest) {
  server_.reset();
  GrpcServerOptions options;
  options.api_key = "s3cret";
  StartServer(options);
  const std::string list_models = "/tessera.v1.Inference/ListModels";
  EXPECT_TRUE(RawCall(list_models, "", {{"authorization", "Bearer s3cret"}}).ok());
  EXPECT_EQ(RawCall(list_models, "", {{"authorization", "Bearer  s3cret"}}).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // Two entries are refused even when both carry the key (REST answers two headers with 401).
  const grpc::Status twice = RawCall(
      list_models, "", {{"authorization", "Bearer s3cret"}, {"authorization", "Bearer s3cret"}});
  EXPECT_EQ(twice.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(RawCall(list_models, "",
                    {{"authorization", "Bearer s3cret"}, {"authorization", "Bearer wrong"}})
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // The key is checked before the request is parsed: garbage without a key says nothing more.
  const grpc::Status unparsed = RawCall("/tessera.v1.Inference/Chat", "\xFF\xFF\xFF");
  EXPECT_EQ(unparsed.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(unparsed.error_message(), ::testing::Not(HasSubstr("ChatRequest")));
}

// Requests protobuf cannot parse, sent as raw bytes: INVALID_ARGUMENT saying what was wrong
// (gRPC's generated handlers answered UNIMPLEMENTED without details), and protobuf's own
// complaint in the daemon's log format, not as a raw "[libprotobuf ERROR" line.
TEST_F(GrpcApiTest, UnparsableRequestsAreInvalidArgumentSayingWhy) {
  // Wire type 7 does not exist: not protobuf at all.
  const std::string garbage = "\xFF\xFF\xFF\xFF garbage";
  for (const char* method : {"/tessera.v1.Inference/Generate", "/tessera.v1.Inference/Chat",
                             "/tessera.v1.Inference/Tokenize", "/tessera.v1.Inference/Detokenize",
                             "/tessera.v1.Inference/GetModelInfo"}) {
    const grpc::Status s = RawCall(method, garbage);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_THAT(s.error_message(), HasSubstr("is not a valid tessera.v1.")) << method;
    EXPECT_THAT(s.error_message(), HasSubstr("not protobuf wire format")) << method;
  }
  EXPECT_THAT(RawCall("/tessera.v1.Inference/Chat", garbage).error_message(),
              HasSubstr("tessera.v1.ChatRequest"));

  // ChatRequest{messages: [{role: "user", content: "\xFF"}]}, encoded by hand: field 2
  // (messages) holds field 1 (role) and field 2 (content).
  const std::string bad_content("\x12\x09\x0A\x04user\x12\x01\xFF", 11);
  ::testing::internal::CaptureStderr();
  const grpc::Status content = RawCall("/tessera.v1.Inference/Chat", bad_content);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(content.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(content.error_message(),
              HasSubstr("the request is not a valid tessera.v1.ChatRequest: messages[0].content: "
                        "expected UTF-8 text (a proto3 string), byte 0 is 0xff"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("[libprotobuf")));
  EXPECT_THAT(log, HasSubstr(" error protobuf: String field 'tessera.v1.ChatMessage.content' "
                             "contains invalid UTF-8"));

  // GenerateRequest{text: "x", request_id: "a\xC3"}: field 2 and field 7.
  const std::string bad_id(
      "\x12\x01x\x3A\x02"
      "a\xC3",
      7);
  const grpc::Status id = RawCall("/tessera.v1.Inference/Generate", bad_id);
  EXPECT_EQ(id.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(id.error_message(), HasSubstr("tessera.v1.GenerateRequest: request_id: expected "
                                            "UTF-8 text (a proto3 string), byte 1 is 0xc3"));
  // TokenizeRequest{text: "\xC0\xAF"} (an overlong '/'): field 2.
  const grpc::Status text =
      RawCall("/tessera.v1.Inference/Tokenize", std::string("\x12\x02\xC0\xAF", 4));
  EXPECT_EQ(text.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(text.error_message(), HasSubstr("tessera.v1.TokenizeRequest: text:"));
  EXPECT_EQ(engine_.requests().size(), 0u);

  // A well-formed request still works through the same raw path.
  std::string answer;
  ASSERT_TRUE(
      RawCall("/tessera.v1.Inference/Tokenize", std::string("\x12\x02hi", 4), {}, &answer).ok());
  v1::TokenizeResponse tokens;
  ASSERT_TRUE(tokens.ParseFromString(answer));
  EXPECT_THAT(tokens.token_ids(), ElementsAre(ScriptedEngine::kBos, 'h', 'i'));
}

TEST_F(GrpcApiTest, ClientStringsThatAreLoggedOrEchoedAreBounded) {
  // A 1 MB request_id (it was accepted, logged and echoed in every chunk).
  v1::GenerateRequest request = TextRequest("x");
  request.set_request_id(std::string(1 << 20, 'r'));
  StreamResult r = Generate(request);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("request_id: expected at most 256 bytes"));
  EXPECT_LT(r.status.error_message().size(), 300u);
  EXPECT_TRUE(r.chunks.empty());
  request.set_request_id(std::string(256, 'r'));
  r = Generate(request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.chunks.back().request_id(), std::string(256, 'r'));
  request.set_request_id("two words");
  EXPECT_THAT(Generate(request).status.error_message(), HasSubstr("request_id"));
  request.set_request_id("line\nbreak");
  EXPECT_EQ(Generate(request).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // A model name too long to echo is refused before the not-found check quotes it.
  request = TextRequest("x");
  request.set_model(std::string(100000, 'm'));
  r = Generate(request);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("model: expected a name of at most 256 bytes"));
  EXPECT_LT(r.status.error_message().size(), 300u);
  v1::GetModelInfoRequest info_request;
  info_request.set_model(std::string(300, 'm'));
  v1::ModelInfo info;
  grpc::ClientContext context;
  EXPECT_EQ(stub_->GetModelInfo(&context, info_request, &info).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // Stop strings: at most 16, of at most 256 bytes each.
  request = TextRequest("x");
  for (int i = 0; i < 17; ++i) request.mutable_options()->add_stop("s" + std::to_string(i));
  EXPECT_THAT(Generate(request).status.error_message(),
              HasSubstr("stop: expected at most 16 stop strings, got 17"));
  request = TextRequest("x");
  request.mutable_options()->add_stop("ok");
  request.mutable_options()->add_stop(std::string(257, 's'));
  EXPECT_THAT(Generate(request).status.error_message(),
              HasSubstr("stop[1]: expected at most 256 bytes, got 257"));
  EXPECT_EQ(engine_.requests().size(), 1u);  // only the 256-byte id went through
}

// Where REST and gRPC disagreed, gRPC now answers as REST does, through the same checks.
TEST_F(GrpcApiTest, ChecksAgreeWithRest) {
  v1::ChatRequest chat;
  auto* m = chat.add_messages();
  m->set_role("wizard");
  m->set_content("hi");
  grpc::ClientContext chat_context;
  StreamResult role = Drain(&chat_context, stub_->Chat(&chat_context, chat));
  EXPECT_EQ(role.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(role.status.error_message(),
              HasSubstr("messages[0].role: expected system, developer, user, assistant or tool, "
                        "got 'wizard'"));

  // stop_token_ids name the real vocabulary (258 in the scripted engine), not [0, 0).
  v1::GenerateRequest request = TextRequest("x");
  request.mutable_options()->add_stop_token_ids(-1);
  StreamResult stop = Generate(request);
  EXPECT_EQ(stop.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(stop.status.error_message(),
              HasSubstr("stop_token_ids[0]: token id -1 is outside the vocabulary [0, 258)"));
  request = TextRequest("x");
  request.mutable_options()->add_stop_token_ids(7);
  request.mutable_options()->add_stop_token_ids(ScriptedEngine::kVocab);
  EXPECT_THAT(Generate(request).status.error_message(), HasSubstr("stop_token_ids[1]"));

  // The ranges are OpenAI's, as the REST gateway's (temperature at most 2).
  request = TextRequest("x");
  request.mutable_sampling()->set_temperature(2.5f);
  StreamResult hot = Generate(request);
  EXPECT_EQ(hot.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(hot.status.error_message(), HasSubstr("temperature: expected a value in [0, 2]"));
  EXPECT_THAT(hot.status.error_message(), HasSubstr("got 2.5"));
  request = TextRequest("x");
  request.mutable_options()->set_top_logprobs(21);
  EXPECT_THAT(Generate(request).status.error_message(),
              HasSubstr("top_logprobs: expected a value in [0, 20], got 21"));
  // An empty stop string never matches; it is ignored, as over REST.
  request = TextRequest("x");
  request.mutable_options()->add_stop("");
  EXPECT_TRUE(Generate(request).status.ok());
  EXPECT_EQ(engine_.requests().size(), 1u);
}

TEST(ApiKeyCheckTest, BearerSchemeAndExactKey) {
  ApiKeyCheck check("k3y");
  EXPECT_TRUE(check.AllowsHeader("Bearer k3y"));
  EXPECT_TRUE(check.AllowsHeader("bearer k3y"));
  // One space and the key byte for byte, as the REST gateway requires.
  EXPECT_FALSE(check.AllowsHeader("Bearer  k3y"));
  EXPECT_FALSE(check.AllowsHeader("bearer  k3y "));
  EXPECT_FALSE(check.AllowsHeader("Bearer k3y "));
  EXPECT_FALSE(check.AllowsHeader("Basic k3y"));
  EXPECT_FALSE(check.AllowsHeader("Bearer k3"));
  EXPECT_FALSE(check.AllowsHeader("Bearer k3yy"));
  EXPECT_FALSE(check.AllowsHeader("Bearer "));
  EXPECT_FALSE(check.AllowsHeader("k3y"));
  EXPECT_TRUE(ApiKeyCheck("").AllowsHeader(""));
}

TEST_F(GrpcApiTest, ConcurrentStreamsEachGetTheirOwnTokens) {
  SetTokenDelay(std::chrono::milliseconds(1));
  constexpr int kStreams = 32;
  std::vector<StreamResult> results(kStreams);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      results[i] = Generate(TextRequest("stream " + std::to_string(i) + std::string(i, '.')));
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < kStreams; ++i) {
    const std::string prompt = "stream " + std::to_string(i) + std::string(i, '.');
    ASSERT_TRUE(results[i].status.ok()) << i << ": " << results[i].status.error_message();
    EXPECT_EQ(results[i].text(), prompt) << i;
    EXPECT_EQ(results[i].chunks.back().usage().completion_tokens(),
              static_cast<int>(prompt.size()));
  }
}

TEST_F(GrpcApiTest, ASlowReaderGetsEverythingInFewerChunks) {
  const std::string prompt(3000, 'q');
  grpc::ClientContext context;
  auto reader = stub_->Generate(&context, TextRequest(prompt));
  // The engine finishes long before the client reads: events pile up and are merged.
  ASSERT_TRUE(WaitUntil([&] { return engine_.running() == 0 && !engine_.requests().empty(); }));
  StreamResult r = Drain(&context, std::move(reader));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text(), prompt);
  EXPECT_EQ(r.ids().size(), prompt.size());
  EXPECT_LT(r.chunks.size(), prompt.size());
  EXPECT_EQ(r.chunks.back().finish_reason(), "stop");
}

TEST_F(GrpcApiTest, ClientCancelMidStreamCancelsTheEngineRequest) {
  SetTokenDelay(std::chrono::milliseconds(30));
  grpc::ClientContext context;
  auto reader = stub_->Generate(&context, TextRequest("a long prompt to echo back slowly"));
  v1::GenerateResponse chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  EXPECT_THAT(chunk.token_ids(), ElementsAre('a'));
  context.TryCancel();
  while (reader->Read(&chunk)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitUntil([&] { return engine_.cancels() == 1; }));
  EXPECT_TRUE(WaitUntil([&] { return server_->ActiveStreams() == 0; }));
}

TEST_F(GrpcApiTest, DeadlinePassesTheEngineDeadlineAndCancels) {
  SetTokenDelay(std::chrono::milliseconds(40));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  StreamResult r = Drain(&context, stub_->Generate(&context, TextRequest("0123456789abcdef")));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(r.ids().size(), 16u);
  ASSERT_TRUE(engine_.requests().back().deadline.has_value());
  const auto left = *engine_.requests().back().deadline - std::chrono::steady_clock::now();
  EXPECT_LT(left, std::chrono::milliseconds(200));
  EXPECT_TRUE(WaitUntil([&] { return engine_.cancels() == 1; }));
}

TEST_F(GrpcApiTest, QueueFullIsResourceExhaustedWithRetryAfter) {
  server_.reset();
  GrpcServerOptions options;
  options.retry_after_seconds = 3;
  StartServer(options);
  engine_.Configure([](ScriptedEngine::Options& o) {
    o.submit_error = absl::ResourceExhaustedError("waiting queue full (64)");
  });
  StreamResult r = Generate(TextRequest("x"));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(r.status.error_message(), HasSubstr("waiting queue full"));
  ASSERT_EQ(r.trailers.count("retry-after"), 1u);
  EXPECT_EQ(r.trailers.find("retry-after")->second, "3");
  EXPECT_THAT(observed(), ElementsAre(std::make_pair(std::string("/tessera.v1.Inference/Generate"),
                                                     grpc::StatusCode::RESOURCE_EXHAUSTED)));
}

TEST_F(GrpcApiTest, EngineRefusalsKeepTheirCodeAndMessage) {
  engine_.Configure([](ScriptedEngine::Options& o) {
    o.submit_error =
        absl::InvalidArgumentError("prompt has 5000 tokens, over max_prompt_tokens 4096");
  });
  StreamResult r = Generate(TextRequest("x"));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("max_prompt_tokens 4096"));
  EXPECT_EQ(r.trailers.count("retry-after"), 0u);

  engine_.Configure([](ScriptedEngine::Options& o) { o.submit_error = absl::OkStatus(); });
  engine_.set_ready(false);
  EXPECT_EQ(Generate(TextRequest("x")).status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(GrpcApiTest, EngineFailureMidStreamEndsWithItsStatus) {
  engine_.Configure([](ScriptedEngine::Options& o) { o.fail_after_tokens = 2; });
  StreamResult r = Generate(TextRequest("abcdef"));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(r.status.error_message(), HasSubstr("worker rank 0 died"));
  EXPECT_THAT(r.ids(), ElementsAre('a', 'b'));
  for (const auto& c : r.chunks) EXPECT_EQ(c.finish_reason(), "");
}

TEST_F(GrpcApiTest, DrainRefusesNewCallsWhileRunningStreamsFinish) {
  SetTokenDelay(std::chrono::milliseconds(20));
  grpc::ClientContext context;
  auto reader = stub_->Generate(&context, TextRequest("drain me"));
  v1::GenerateResponse chunk;
  ASSERT_TRUE(reader->Read(&chunk));

  server_->StopAccepting();
  EXPECT_EQ(Generate(TextRequest("x")).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  v1::TokenizeResponse tokens;
  {
    grpc::ClientContext c;
    EXPECT_EQ(stub_->Tokenize(&c, {}, &tokens).error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  EXPECT_EQ(WaitForHealth(2), 2);

  std::string text = chunk.text();
  std::string finish;
  while (reader->Read(&chunk)) {
    text += chunk.text();
    finish = chunk.finish_reason();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(text, "drain me");
  EXPECT_EQ(finish, "stop");
  EXPECT_TRUE(WaitUntil([&] { return server_->ActiveStreams() == 0; }));
  const auto start = std::chrono::steady_clock::now();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST_F(GrpcApiTest, ShutdownDeadlineCancelsWhatIsStillRunning) {
  SetTokenDelay(std::chrono::milliseconds(50));
  grpc::ClientContext context;
  auto reader = stub_->Generate(&context, TextRequest(std::string(100, 'z')));
  v1::GenerateResponse chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  const auto start = std::chrono::steady_clock::now();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  while (reader->Read(&chunk)) {
  }
  EXPECT_FALSE(reader->Finish().ok());
  EXPECT_EQ(engine_.cancels(), 1);
}

TEST_F(GrpcApiTest, OversizedRequestIsRefused) {
  server_.reset();
  GrpcServerOptions options;
  options.max_message_bytes = 1024;
  StartServer(options);
  StreamResult r = Generate(TextRequest(std::string(4096, 'x')));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(engine_.requests().size(), 0u);
}

TEST_F(GrpcApiTest, ObserverSeesEveryCallWithItsCode) {
  ASSERT_TRUE(Generate(TextRequest("x")).status.ok());
  v1::TokenizeResponse tokens;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->Tokenize(&context, {}, &tokens).ok());
  EXPECT_THAT(
      observed(),
      ElementsAre(
          std::make_pair(std::string("/tessera.v1.Inference/Generate"), grpc::StatusCode::OK),
          std::make_pair(std::string("/tessera.v1.Inference/Tokenize"), grpc::StatusCode::OK)));
}

TEST_F(GrpcApiTest, BindingAPortInUseIsAnError) {
  GrpcServerOptions options;
  options.port = server_->port();
  absl::StatusOr<std::unique_ptr<GrpcServer>> second = GrpcServer::Start(&engine_, options);
  EXPECT_FALSE(second.ok());
}

class ReflectionServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto service = ReflectionService::Create({"tessera.v1.Inference", "grpc.health.v1.Health"});
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = *std::move(service);
  }
  grpc::reflection::v1::ServerReflectionResponse Ask(
      const grpc::reflection::v1::ServerReflectionRequest& request) {
    grpc::reflection::v1::ServerReflectionResponse response;
    service_->Answer(request, &response);
    return response;
  }
  std::unique_ptr<ReflectionService> service_;
};

TEST_F(ReflectionServiceTest, ListsTheServicesItWasGiven) {
  grpc::reflection::v1::ServerReflectionRequest request;
  request.set_list_services("");
  auto response = Ask(request);
  ASSERT_EQ(response.list_services_response().service_size(), 2);
  EXPECT_EQ(response.list_services_response().service(0).name(), "tessera.v1.Inference");
}

TEST_F(ReflectionServiceTest, AMethodsFileComesWithTheProtoComments) {
  grpc::reflection::v1::ServerReflectionRequest request;
  request.set_file_containing_symbol("tessera.v1.Inference.Generate");
  auto response = Ask(request);
  ASSERT_EQ(response.file_descriptor_response().file_descriptor_proto_size(), 1);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(response.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.name(), "tessera/v1/inference.proto");
  bool documented = false;
  for (const auto& location : file.source_code_info().location()) {
    documented |=
        location.leading_comments().find("Generates a completion of a prompt") != std::string::npos;
  }
  EXPECT_TRUE(documented);
  EXPECT_EQ(response.original_request().file_containing_symbol(), "tessera.v1.Inference.Generate");
}

TEST_F(ReflectionServiceTest, FilesInTheSetAndInTheGeneratedPoolAreFound) {
  grpc::reflection::v1::ServerReflectionRequest request;
  request.set_file_containing_symbol("grpc.reflection.v1alpha.ServerReflection");
  EXPECT_EQ(Ask(request).file_descriptor_response().file_descriptor_proto_size(), 1);
  request.set_file_by_filename("grpc/health/v1/health.proto");
  EXPECT_EQ(Ask(request).file_descriptor_response().file_descriptor_proto_size(), 1);
}

TEST_F(ReflectionServiceTest, UnknownSymbolsAreNotFound) {
  grpc::reflection::v1::ServerReflectionRequest request;
  request.set_file_containing_symbol("no.such.Thing");
  auto response = Ask(request);
  EXPECT_EQ(response.error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  request.set_all_extension_numbers_of_type("tessera.v1.GenerateRequest");
  response = Ask(request);
  EXPECT_EQ(response.all_extension_numbers_response().base_type_name(),
            "tessera.v1.GenerateRequest");
  EXPECT_EQ(response.all_extension_numbers_response().extension_number_size(), 0);
}

TEST(StatusCodesTest, NamesAndMappingFollowTheCanonicalCodes) {
  EXPECT_STREQ(StatusCodeName(grpc::StatusCode::OK), "OK");
  EXPECT_STREQ(StatusCodeName(grpc::StatusCode::RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
  EXPECT_STREQ(StatusCodeName(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_EQ(ToGrpcStatus(absl::DeadlineExceededError("late")).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError("x")).error_message(), "x");
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

TEST(Utf8TextTest, ReplacesIllFormedSequencesByMaximalSubpart) {
  const std::string r = kReplacement;
  EXPECT_EQ(ToValidUtf8("plain"), "plain");
  EXPECT_EQ(ToValidUtf8("\xF0\x9F\x98\x80 \xC3\xA9"), "\xF0\x9F\x98\x80 \xC3\xA9");
  EXPECT_EQ(ToValidUtf8("a\xFF"
                        "b"),
            "a" + r + "b");
  EXPECT_EQ(ToValidUtf8("\xE2\x82"), r);  // truncated 3-byte: one subpart
  EXPECT_EQ(ToValidUtf8("\xE2\x82"
                        "a"),
            r + "a");
  EXPECT_EQ(ToValidUtf8("\xC0\xAF"), r + r);                  // overlong lead is never valid
  EXPECT_EQ(ToValidUtf8("\xED\xA0\x80"), r + r + r);          // surrogate U+D800
  EXPECT_EQ(ToValidUtf8("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
}

}  // namespace
}  // namespace tessera::grpc_api
