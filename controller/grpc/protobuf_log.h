// protobuf's own log lines (for example "String field ... contains invalid UTF-8 data when
// parsing a protocol buffer", written when a client sends such a string) go to the daemon's
// structured log (controller/daemon/log.h) instead of a raw "[libprotobuf ERROR ...]" line
// on stderr.
#pragma once

namespace tessera::grpc_api {

// Installs the handler. protobuf has one handler per process, as the daemon has one
// logger; calling this again changes nothing.
void RouteProtobufLogToDaemonLog();

}  // namespace tessera::grpc_api
