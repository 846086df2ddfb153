#include "controller/grpc/health_service.h"

#include <string>

namespace tessera::grpc_api {

namespace health = grpc::health::v1;

// One Watch call. Writes the latest status whenever it differs from the last one written;
// statuses that change while a write is in flight collapse into the newest.
class HealthService::WatchStream : public grpc::ServerWriteReactor<health::HealthCheckResponse> {
 public:
  WatchStream(HealthService* owner, bool known) : owner_(owner), known_(known) {}

  // Called with the owner's mutex held.
  void Publish(Status status) {
    bool write = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      latest_ = known_ ? status : health::HealthCheckResponse::SERVICE_UNKNOWN;
      write = TakeWriteLocked();
    }
    if (write) StartWrite(&in_flight_);
  }

  // Called with the owner's mutex held.
  void End() {
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ending_ = true;
      finish = TakeFinishLocked();
    }
    if (finish) Finish(grpc::Status::OK);
  }

  void OnWriteDone(bool ok) override {
    bool write = false, finish = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (!ok) ending_ = true;
      write = TakeWriteLocked();
      if (!write) finish = TakeFinishLocked();
    }
    if (write) StartWrite(&in_flight_);
    if (finish) Finish(grpc::Status::OK);
  }

  void OnCancel() override { End(); }

  void OnDone() override {
    owner_->Forget(this);
    delete this;
  }

 private:
  bool TakeWriteLocked() {
    if (writing_ || ending_ || finished_ || latest_ == written_) return false;
    in_flight_.set_status(static_cast<Status>(latest_));
    written_ = latest_;
    writing_ = true;
    return true;
  }
  bool TakeFinishLocked() {
    if (writing_ || !ending_ || finished_) return false;
    finished_ = true;
    return true;
  }

  HealthService* const owner_;
  const bool known_;
  std::mutex mu_;
  health::HealthCheckResponse in_flight_;
  int latest_ = -1;
  int written_ = -1;
  bool writing_ = false;
  bool ending_ = false;
  bool finished_ = false;
};

HealthService::~HealthService() { Shutdown(); }

bool HealthService::Known(const std::string& service) {
  return service.empty() || service == "tessera.v1.Inference";
}

void HealthService::SetServing(bool serving) {
  std::lock_guard<std::mutex> lock(mu_);
  const Status status =
      serving ? health::HealthCheckResponse::SERVING : health::HealthCheckResponse::NOT_SERVING;
  if (shut_down_ || status == status_) return;
  status_ = status;
  for (WatchStream* w : watches_) w->Publish(status_);
}

void HealthService::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  shut_down_ = true;
  status_ = health::HealthCheckResponse::NOT_SERVING;
  for (WatchStream* w : watches_) {
    w->Publish(status_);
    w->End();
  }
}

void HealthService::Forget(WatchStream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  watches_.erase(stream);
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const health::HealthCheckRequest* request,
                                               health::HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!Known(request->service())) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + request->service() + "'"));
    return reactor;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    response->set_status(status_);
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<health::HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* /*context*/, const health::HealthCheckRequest* request) {
  auto* stream = new WatchStream(this, Known(request->service()));
  std::lock_guard<std::mutex> lock(mu_);
  stream->Publish(status_);
  if (shut_down_) {
    stream->End();
  } else {
    watches_.insert(stream);
  }
  return stream;
}

}  // namespace tessera::grpc_api
