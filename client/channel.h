// MakeChannel: the gRPC channel a client opens to one server, with the
// transport security of rpc/credentials.h (TLS, its client certificate,
// its bearer token; INVALID_ARGUMENT if `security` is inconsistent or
// plaintext to a non-loopback address without `insecure`), no message size
// limit, a connection of its own (not shared with other clients of the
// process) and HTTP/2 keepalive pings every `keepalive` (none when zero;
// see ClientOptions::keepalive); its calls go through `interceptors`
// (PsClient's: the route stamp of rpc/route.h).
//
// Public, for operators' tools: PsClient and admin_client.h make their
// channels with it, and a tool that calls the servers' other services
// (ps_ctl's grpc.health.v1 probe, the auth probe's raw RPCs) uses it to
// connect exactly as a worker would.
//
// Thread-safe; the channel is shared by the stubs made on it.
#ifndef PS_CLIENT_CHANNEL_H_
#define PS_CLIENT_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "rpc/credentials.h"

namespace ps {

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& address,
                                                           absl::Duration keepalive,
                                                           const SecurityOptions& security,
                                                           ClientInterceptors interceptors = {});

}  // namespace ps

#endif  // PS_CLIENT_CHANNEL_H_
