#include "controller/grpc/generate_stream.h"

#include <chrono>
#include <utility>

#include "controller/grpc/message_codec.h"
#include "controller/grpc/response_convert.h"
#include "controller/grpc/status_codes.h"

namespace tessera::grpc_api {

struct GenerateStream::Mailbox {
  std::mutex mu;
  GenerateStream* stream = nullptr;  // null once the call is done
};

namespace {

// The call's deadline on the engine's clock; nullopt when the client set none.
std::optional<std::chrono::steady_clock::time_point> EngineDeadline(
    const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return std::nullopt;
  const auto left = deadline - std::chrono::system_clock::now();
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
}

}  // namespace

GenerateStream* GenerateStream::Start(CallGuard* guard, grpc::CallbackServerContext* context,
                                      std::string method, grpc::Status refusal,
                                      absl::StatusOr<PreparedCall> call) {
  auto* stream = new GenerateStream(guard, context, std::move(method));
  if (!refusal.ok()) {
    stream->FinishNow(std::move(refusal));
  } else if (!call.ok()) {
    stream->FinishNow(ToGrpcStatus(call.status()));
  } else {
    stream->Submit(*std::move(call));
  }
  return stream;
}

GenerateStream* GenerateStream::StartPrepared(
    CallGuard* guard, grpc::CallbackServerContext* context, std::string method,
    serving::PrepPool* pool, std::function<absl::StatusOr<PreparedCall>()> prepare) {
  auto* stream = new GenerateStream(guard, context, std::move(method));
  // gRPC keeps the reactor until Finish is called and OnDone runs: the task may use it.
  const absl::Status queued = pool->TrySubmit([stream, prepare = std::move(prepare)] {
    if (stream->context_->IsCancelled()) {
      return stream->FinishNow(grpc::Status(grpc::StatusCode::CANCELLED,
                                            "the client went away while the request was prepared"));
    }
    absl::StatusOr<PreparedCall> call = prepare();
    if (!call.ok()) return stream->FinishNow(ToGrpcStatus(call.status()));
    stream->Submit(*std::move(call));
  });
  if (!queued.ok()) stream->FinishNow(ToGrpcStatus(queued));
  return stream;
}

GenerateStream::GenerateStream(CallGuard* guard, grpc::CallbackServerContext* context,
                               std::string method)
    : guard_(guard),
      context_(context),
      method_(std::move(method)),
      mailbox_(std::make_shared<Mailbox>()) {
  mailbox_->stream = this;
  guard_->StreamStarted();
}

void GenerateStream::FinishNow(grpc::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    finish_called_ = true;
  }
  guard_->BeforeFinish(context_, method_, status);
  Finish(status);
}

void GenerateStream::Submit(PreparedCall call) {
  serving::GenerateRequest& request = call.request;
  if (request.request_id.empty()) request.request_id = guard_->NewRequestId();
  request.deadline = EngineDeadline(*context_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    request_id_ = request.request_id;
    chunks_.emplace(std::move(call.output));
  }
  std::shared_ptr<Mailbox> mailbox = mailbox_;
  absl::StatusOr<std::unique_ptr<serving::RequestHandle>> handle =
      guard_->engine().Submit(std::move(request), [mailbox](serving::GenerateEvent event) {
        std::lock_guard<std::mutex> lock(mailbox->mu);
        if (mailbox->stream != nullptr) mailbox->stream->OnEvent(std::move(event));
      });
  if (!handle.ok()) {
    FinishNow(ToGrpcStatus(handle.status()));
    return;
  }
  bool cancel_now = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    handle_ = *std::move(handle);
    cancel_now = cancelled_;
  }
  // A cancel that came while Submit ran found no handle to cancel.
  if (cancel_now) handle_->Cancel();
}

void GenerateStream::OnEvent(serving::GenerateEvent event) {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_called_) return;
    if (event.finished && !event.status.ok()) {
      // A failed request ends with its status, not with a finish_reason and usage.
      event.finished = false;
      engine_finished_ = true;
      final_status_ = ToGrpcStatus(event.status);
    } else if (event.finished) {
      engine_finished_ = true;
    }
    chunks_->Append(event, guard_->engine(), &pending_);
    action = NextActionLocked();
  }
  Act(action);
}

GenerateStream::Action GenerateStream::NextActionLocked() {
  if (finish_called_ || writing_) return Action::kNone;
  if (cancelled_) {
    final_status_ = CancelledStatus();
    finish_called_ = true;
    return Action::kFinish;
  }
  if (!IsEmptyChunk(pending_)) {
    pending_.set_request_id(request_id_);
    grpc::Status serialized = SerializeResponse(pending_, &in_flight_);
    pending_.Clear();
    if (!serialized.ok()) {
      // Not expected (a chunk is small and its strings are valid UTF-8). The call ends; the
      // engine request runs out on its own, its events dropped once the call is done.
      final_status_ = std::move(serialized);
      finish_called_ = true;
      return Action::kFinish;
    }
    writing_ = true;
    return Action::kWrite;
  }
  if (engine_finished_) {
    finish_called_ = true;
    return Action::kFinish;
  }
  return Action::kNone;
}

void GenerateStream::Act(Action action) {
  switch (action) {
    case Action::kNone:
      return;
    case Action::kWrite:
      StartWrite(&in_flight_);
      return;
    case Action::kFinish:
      // final_status_ is no longer written by anyone once finish_called_ is set.
      guard_->BeforeFinish(context_, method_, final_status_);
      Finish(final_status_);
      return;
  }
}

// A failed write means the stream broke (the client is gone): stop generating for it.
void GenerateStream::OnWriteDone(bool ok) { AfterCallEvent(/*write_done=*/true, !ok); }

void GenerateStream::OnCancel() { AfterCallEvent(/*write_done=*/false, /*client_gone=*/true); }

void GenerateStream::AfterCallEvent(bool write_done, bool client_gone) {
  Action action;
  bool cancel_engine = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (write_done) writing_ = false;
    if (client_gone && !cancelled_) {
      cancelled_ = true;
      cancel_engine = handle_ != nullptr;
    }
    action = NextActionLocked();
  }
  // Outside mu_: the engine may deliver its CANCELLED event from inside Cancel().
  if (cancel_engine) handle_->Cancel();
  Act(action);
}

void GenerateStream::OnDone() {
  {
    std::lock_guard<std::mutex> lock(mailbox_->mu);
    mailbox_->stream = nullptr;
  }
  guard_->StreamDone();
  delete this;
}

grpc::Status GenerateStream::CancelledStatus() const {
  if (context_->deadline() <= std::chrono::system_clock::now()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "the call's deadline passed");
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the call");
}

}  // namespace tessera::grpc_api
