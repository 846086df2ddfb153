#include "worker/comm/control_store.h"

#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "grpcpp/grpcpp.h"

namespace tessera::comm {

void ControlStore::set(const std::string& key, const std::vector<char>& data) {
  tessera::v1::StoreSetRequest req;
  req.set_key(key);
  req.set_value(std::string(data.begin(), data.end()));
  tessera::v1::StoreSetResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + default_timeout_);
  grpc::Status s = stub_->StoreSet(&ctx, req, &resp);
  if (!s.ok()) {
    throw gloo::IoException(
        absl::StrCat("rendezvous store: setting '", key, "' failed: ", s.error_message()));
  }
}

std::vector<char> ControlStore::Get(const std::vector<std::string>& keys,
                                    std::chrono::milliseconds timeout, bool wait_only) {
  tessera::v1::StoreGetRequest req;
  for (const std::string& k : keys) req.add_keys(k);
  req.set_timeout_ms(timeout.count());
  req.set_wait_only(wait_only);
  tessera::v1::StoreGetResponse resp;
  grpc::ClientContext ctx;
  // The server answers DEADLINE_EXCEEDED itself, naming the missing keys; the client
  // deadline is only a backstop for a controller that stops answering.
  ctx.set_deadline(std::chrono::system_clock::now() + timeout + std::chrono::seconds(5));
  grpc::Status s = stub_->StoreGet(&ctx, req, &resp);
  if (!s.ok()) throw gloo::IoException(absl::StrCat("rendezvous store: ", s.error_message()));
  return std::vector<char>(resp.value().begin(), resp.value().end());
}

std::vector<char> ControlStore::get(const std::string& key) {
  return Get({key}, default_timeout_, false);
}

void ControlStore::wait(const std::vector<std::string>& keys) { Get(keys, default_timeout_, true); }

void ControlStore::wait(const std::vector<std::string>& keys,
                        const std::chrono::milliseconds& timeout) {
  Get(keys, timeout, true);
}

}  // namespace tessera::comm
