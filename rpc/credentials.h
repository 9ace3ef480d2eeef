// Transport security for every gRPC connection of the system: the server's
// listening port, the client library's channels, ps_ctl's and the tests'
// own. Credentials are made here and nowhere else.
//
// SecurityOptions (common/security_options.h) says what a process was
// given (the --tls_* flags, --auth_token_file, --insecure). With TLS, the PEM files are watched
// (grpc::experimental::FileWatcherCertificateProvider) and re-read every
// `reload_interval`, so a certificate rotated on disk is used by the next
// handshake without a restart; connections already up keep theirs.
//
//   server: tls_cert + tls_key        TLS; the server proves who it is.
//           + tls_ca                  mutual TLS: every client must present a
//                                     certificate signed by that CA (the
//                                     handshake fails otherwise).
//           + auth_token_file         bearer tokens (rpc/authz.h TokenTable).
//   client: tls_ca                    TLS; the server's certificate must chain
//                                     to it and name the address's host (or
//                                     tls_server_name).
//           + tls_cert + tls_key      the client's certificate (mutual TLS).
//           + auth_token_file         sends its token with every call.
//
// Plaintext is allowed only on loopback addresses, on unix sockets
// ("unix:/ABS/PATH", rpc/unix_socket.h) in a folder only the server's user
// can enter, or anywhere with `insecure` (CheckSecurityOptions).
//
// On a unix socket without TLS both sides use gRPC's local credentials
// (UDS), which carry no encryption (none is needed between processes of one
// host) but let bearer tokens travel and be checked: tokens need TLS, or a
// unix socket. Thread-safe; results are owned by the caller (shared).
#ifndef PS_RPC_CREDENTIALS_H_
#define PS_RPC_CREDENTIALS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/security_options.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"

namespace ps {

// OK when `options` are consistent: files readable, a key with each
// certificate, a server with a certificate, tokens only with TLS (a client
// needs tls_ca; a server tls_cert) or on a unix socket, and plaintext only
// on a loopback host of `address` (HOST:PORT; "localhost", 127.0.0.0/8,
// [::1]) or a unix socket, unless options.insecure. INVALID_ARGUMENT naming
// the flag otherwise. `server` selects the server's rules; a server's
// unix:PATH must also sit in a folder of its own user with mode 0700
// (CheckUnixSocketFolder, FAILED_PRECONDITION), unless options.insecure.
absl::Status CheckSecurityOptions(const SecurityOptions& options, absl::string_view address,
                                  bool server);

// True if HOST of HOST:PORT is a loopback name or address.
bool IsLoopbackAddress(absl::string_view address);

// The listening port's credentials (CheckSecurityOptions first) for
// `address` (where it listens: a unix: address without TLS gets local
// credentials). With TLS or on a unix socket, `processor` (may be null)
// authenticates and authorizes every call (rpc/auth_processor.h).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const SecurityOptions& options, std::shared_ptr<grpc::AuthMetadataProcessor> processor,
    absl::string_view address = "");

// True if calls on `address` with `options` can be authenticated by the
// server (TLS, or a unix socket's local credentials).
bool CanAuthenticate(const SecurityOptions& options, absl::string_view address);

// Interceptors a channel's calls go through (rpc/route.h's RouteStamps).
using ClientInterceptors =
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>;

// A channel to `address` with `options` (CheckSecurityOptions first), the
// caller's channel arguments (tls_server_name is added to them) and
// `interceptors` (none: a plain channel).
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeSecureChannel(
    const std::string& address, const SecurityOptions& options, grpc::ChannelArguments args,
    ClientInterceptors interceptors = {});

// Plaintext, for tests' own channels to loopback servers.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials();

}  // namespace ps

#endif  // PS_RPC_CREDENTIALS_H_
