// Calls and streamed tokens per second through the gRPC API (GrpcServer on loopback) over
// the scripted engine, which costs next to nothing: what is measured is gRPC framing,
// protobuf, the hand-off from the engine thread to the stream and back to the client.
// Each benchmark thread is one client call at a time on a shared channel. GetModelInfo is
// the unary baseline the others are read against.
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "benchmark/benchmark.h"
#include "controller/grpc/grpc_server.h"
#include "tessera/v1/inference.grpc.pb.h"
#include "tests/support/scripted_engine.h"

namespace {

namespace v1 = tessera::v1;

struct Served {
  Served() {
    tessera::grpc_api::GrpcServerOptions options;
    options.port = 0;
    server = *tessera::grpc_api::GrpcServer::Start(&engine, options);
    stub = v1::Inference::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  }
  tessera::testing::ScriptedEngine engine;
  std::unique_ptr<tessera::grpc_api::GrpcServer> server;
  std::unique_ptr<v1::Inference::Stub> stub;
};

Served& Server() {
  static Served* served = new Served();  // lives to process exit, like a daemon's
  return *served;
}

void BM_GetModelInfo(benchmark::State& state) {
  v1::ModelInfo info;
  for (auto _ : state) {
    grpc::ClientContext context;
    if (!Server().stub->GetModelInfo(&context, {}, &info).ok()) {
      state.SkipWithError("GetModelInfo failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

// A Generate stream of `range(0)` tokens (the engine echoes the prompt); items are tokens.
void BM_GenerateStream(benchmark::State& state) {
  v1::GenerateRequest request;
  request.set_text(std::string(state.range(0), 'x'));
  request.set_add_special_tokens(false);
  int64_t tokens = 0;
  for (auto _ : state) {
    grpc::ClientContext context;
    auto reader = Server().stub->Generate(&context, request);
    v1::GenerateResponse chunk;
    while (reader->Read(&chunk)) tokens += chunk.token_ids_size();
    if (!reader->Finish().ok()) {
      state.SkipWithError("Generate failed");
      break;
    }
  }
  state.SetItemsProcessed(tokens);
}

BENCHMARK(BM_GetModelInfo)->UseRealTime()->Threads(1)->Threads(4);
BENCHMARK(BM_GenerateStream)->Arg(1)->Arg(16)->Arg(256)->UseRealTime()->Threads(1);
BENCHMARK(BM_GenerateStream)->Arg(16)->UseRealTime()->Threads(8);

}  // namespace

BENCHMARK_MAIN();
