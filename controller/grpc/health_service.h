// grpc.health.v1.Health, our own rather than gRPC's built-in one so that reflection can
// describe it (grpcurl calls Check with no .proto). The server as a whole ("") and
// "tessera.v1.Inference" share one status, set by the owner (GrpcServer polls the engine's
// readiness and its own drain state). Check on another name is NOT_FOUND; Watch on another
// name reports SERVICE_UNKNOWN, as the protocol says.
#pragma once

#include <mutex>
#include <set>

#include "grpc/health/v1/health.grpc.pb.h"

namespace tessera::grpc_api {

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  HealthService() = default;
  ~HealthService() override;

  // Publishes SERVING or NOT_SERVING to Check and to every Watch stream (on change only).
  void SetServing(bool serving);

  // NOT_SERVING from now on, ignoring SetServing, and every Watch stream is finished (so a
  // server shutdown does not wait for them).
  void Shutdown();

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class WatchStream;
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;

  static bool Known(const std::string& service);
  void Forget(WatchStream* stream);

  std::mutex mu_;
  Status status_ = grpc::health::v1::HealthCheckResponse::NOT_SERVING;
  bool shut_down_ = false;
  std::set<WatchStream*> watches_;
};

}  // namespace tessera::grpc_api
