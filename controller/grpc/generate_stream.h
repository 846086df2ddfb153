// One streaming Generate or Chat call: submits the request to the engine and writes its
// events to the client as they come, each chunk a serialized tessera.v1.GenerateResponse (the
// service's methods are raw: see inference_service.h).
//
// Threads: the engine calls the sink on its own thread; gRPC calls OnWriteDone / OnCancel /
// OnDone on its callback threads. Decisions (what to write next, whether to finish) are
// taken under mu_; the gRPC operations themselves are started outside it, one write at a
// time. Events that arrive while a write is in flight are merged into the next chunk, so a
// slow client costs memory proportional to its unread output, never a blocked engine.
//
// Lifetime: gRPC owns the reactor until OnDone, which deletes it. The engine's sink holds
// only a shared Mailbox that OnDone disconnects, so an event arriving after the call ended
// (the engine's CANCELLED event after a client cancel) is dropped safely.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/statusor.h"
#include "controller/grpc/call_guard.h"
#include "controller/grpc/request_convert.h"
#include "controller/grpc/response_convert.h"
#include "controller/serving/engine.h"
#include "controller/serving/prep_pool.h"
#include "tessera/v1/inference.pb.h"

namespace tessera::grpc_api {

class GenerateStream : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // Starts the call: finishes it at once with `refusal` (non-OK) or a failed `call`,
  // otherwise submits its request (its chunks built as ChunkBuilder says, with the call's
  // output options). `method` names the call for the observer.
  static GenerateStream* Start(CallGuard* guard, grpc::CallbackServerContext* context,
                               std::string method, grpc::Status refusal,
                               absl::StatusOr<PreparedCall> call);

  // As Start with an OK refusal, but `prepare` (parsing, rendering, tokenizing) runs on
  // `pool`, off the gRPC callback thread; RESOURCE_EXHAUSTED when the pool's queue is full,
  // CANCELLED when the client left while the request waited.
  static GenerateStream* StartPrepared(CallGuard* guard, grpc::CallbackServerContext* context,
                                       std::string method, serving::PrepPool* pool,
                                       std::function<absl::StatusOr<PreparedCall>()> prepare);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct Mailbox;
  enum class Action { kNone, kWrite, kFinish };

  GenerateStream(CallGuard* guard, grpc::CallbackServerContext* context, std::string method);
  void Submit(PreparedCall call);
  void OnEvent(serving::GenerateEvent event);  // engine thread, under the mailbox's lock
  // What gRPC reported (a write completed, the client went away) applied under mu_, then the
  // engine request cancelled (the first time the client is gone) and the next step taken.
  void AfterCallEvent(bool write_done, bool client_gone);
  Action NextActionLocked();
  void Act(Action action);
  void FinishNow(grpc::Status status);  // for calls that never reached the engine
  grpc::Status CancelledStatus() const;

  CallGuard* const guard_;
  grpc::CallbackServerContext* const context_;
  const std::string method_;
  std::shared_ptr<Mailbox> mailbox_;

  std::mutex mu_;
  std::unique_ptr<serving::RequestHandle> handle_;  // set once Submit returned
  std::string request_id_;
  std::optional<ChunkBuilder> chunks_;     // set once Submit began
  tessera::v1::GenerateResponse pending_;  // not yet handed to gRPC
  grpc::ByteBuffer in_flight_;             // being written; untouched until OnWriteDone
  bool writing_ = false;
  bool engine_finished_ = false;
  grpc::Status final_status_;
  bool cancelled_ = false;  // client cancel, deadline, or a failed write
  bool finish_called_ = false;
};

}  // namespace tessera::grpc_api
