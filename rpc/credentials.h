// Credentials for every gRPC connection of the system: the server's listening
// port, the client library's channels, ps_ctl's and the tests' own. They are
// made here and nowhere else, so that transport security (mutual TLS, with
// per-role identities) changes all of them at once.
//
// Today both sides are plaintext (grpc::Insecure*Credentials): run the
// servers on a trusted network. Thread-safe; each call returns a new object
// that the caller owns (shared).
#ifndef PS_RPC_CREDENTIALS_H_
#define PS_RPC_CREDENTIALS_H_

#include <memory>

#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace ps {

// For grpc::ServerBuilder::AddListeningPort.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials();

// For grpc::CreateChannel / grpc::CreateCustomChannel.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials();

}  // namespace ps

#endif  // PS_RPC_CREDENTIALS_H_
