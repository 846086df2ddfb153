#include "controller/grpc/protobuf_log.h"

#include <string>

#include <google/protobuf/stubs/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "controller/daemon/log.h"

namespace tessera::grpc_api {
namespace {

void ToDaemonLog(google::protobuf::LogLevel level, const char* filename, int line,
                 const std::string& message) {
  daemon::LogLevel ours = daemon::LogLevel::kError;
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      ours = daemon::LogLevel::kInfo;
      break;
    case google::protobuf::LOGLEVEL_WARNING:
      ours = daemon::LogLevel::kWarning;
      break;
    default:  // ERROR, and FATAL (protobuf aborts after it)
      break;
  }
  absl::string_view file = filename == nullptr ? "?" : filename;
  if (size_t slash = file.rfind('/'); slash != absl::string_view::npos)
    file.remove_prefix(slash + 1);
  daemon::Log(ours, absl::StrCat("protobuf: ", message),
              {{"source", absl::StrCat(file, ":", line)}});
}

}  // namespace

void RouteProtobufLogToDaemonLog() {
  // protobuf reads its handler without a lock: set it once, however many servers start.
  static const bool installed = [] {
    google::protobuf::SetLogHandler(&ToDaemonLog);
    return true;
  }();
  (void)installed;
}

}  // namespace tessera::grpc_api
