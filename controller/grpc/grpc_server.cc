#include "controller/grpc/grpc_server.h"

#include <grpc/grpc.h>
#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>

#include "absl/strings/str_cat.h"
#include "controller/grpc/protobuf_log.h"

namespace tessera::grpc_api {
namespace {

std::string HostPort(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  return ipv6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(serving::Engine* engine,
                                                              GrpcServerOptions options) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("grpc port: expected 0..65535, got ", options.port));
  }
  if (options.max_message_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "grpc max message size: expected a positive byte count, got ", options.max_message_bytes));
  }
  // Lines protobuf writes about what clients send belong in the daemon's log.
  RouteProtobufLogToDaemonLog();
  std::unique_ptr<GrpcServer> server(new GrpcServer(engine, std::move(options)));
  const GrpcServerOptions& opts = server->options_;
  absl::StatusOr<std::unique_ptr<ReflectionService>> reflection = ReflectionService::Create(
      {"tessera.v1.Inference", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
       "grpc.reflection.v1alpha.ServerReflection"});
  if (!reflection.ok()) return reflection.status();
  server->reflection_ = *std::move(reflection);

  // gRPC's v1alpha reflection, for clients that do not ask v1 (ours, with comments). A
  // process-wide switch that takes effect for servers built after it.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  const std::string listen = HostPort(opts.host, opts.port);
  int bound_port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(server->service_.get());
  builder.RegisterService(server->health_.get());
  builder.RegisterService(server->reflection_.get());
  // Ours replaces gRPC's built-in health service, even where another part of the process
  // turned that on.
  builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  builder.SetMaxReceiveMessageSize(opts.max_message_bytes);
  builder.SetMaxSendMessageSize(opts.max_message_bytes);
  // gRPC sets SO_REUSEPORT by default: a second daemon on the same port would then share
  // its connections silently instead of failing to start.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Pings idle connections so that a client that vanished without closing (a dead host, a
  // dropped NAT entry) is noticed and its requests cancelled within about a minute, instead
  // of TCP's hours.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || bound_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("grpc: cannot listen on ", listen, " (address in use or not local?)"));
  }
  server->port_ = bound_port;
  server->address_ = HostPort(opts.host, bound_port);
  server->UpdateHealth();
  server->health_thread_ = std::thread([s = server.get()] { s->HealthLoop(); });
  return server;
}

GrpcServer::GrpcServer(serving::Engine* engine, GrpcServerOptions options)
    : engine_(engine), options_(std::move(options)) {
  guard_ = std::make_unique<CallGuard>(engine_, options_.api_key, options_.retry_after_seconds,
                                       options_.observer);
  service_ =
      std::make_unique<InferenceService>(guard_.get(), options_.prep_pool, options_.chat_output);
  health_ = std::make_unique<HealthService>();
}

GrpcServer::~GrpcServer() { Shutdown(std::chrono::system_clock::now()); }

void GrpcServer::StopAccepting() {
  guard_->StopAccepting();
  UpdateHealth();
}

void GrpcServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    stopping_ = true;
  }
  wake_.notify_all();
  if (health_thread_.joinable()) health_thread_.join();
  guard_->StopAccepting();
  // NOT_SERVING, and Watch streams end rather than hold the shutdown to its deadline.
  health_->Shutdown();
  if (server_ != nullptr) {
    server_->Shutdown(deadline);
    server_->Wait();
  }
}

void GrpcServer::HealthLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, options_.health_poll_interval);
    if (stopping_) break;
    lock.unlock();
    UpdateHealth();
    lock.lock();
  }
}

void GrpcServer::UpdateHealth() { health_->SetServing(guard_->accepting() && engine_->ready()); }

}  // namespace tessera::grpc_api
