// The server's authentication and authorization of calls: who the caller
// is (its verified client certificate, or its bearer token), and whether
// the policy of rpc/authz.h lets it make the call.
//
// AuthProcessor runs in gRPC before any handler, for every call on a TLS
// port that has one (MakeServerCredentials): it refuses unauthenticated
// callers (UNAUTHENTICATED) and calls their role may not make
// (PERMISSION_DENIED). Handlers then check only what the request says
// (AuthorizeWorker: the worker id a worker acts as), with the identity
// CallerOf gives them.
//
// Thread-safe; immutable after construction.
#ifndef PS_RPC_AUTH_PROCESSOR_H_
#define PS_RPC_AUTH_PROCESSOR_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/server_context.h"
#include "rpc/authz.h"

namespace ps {

class Authenticator {
 public:
  using Metadata = std::multimap<grpc::string_ref, grpc::string_ref>;

  // `client_certificates`: the port requires verified client certificates,
  // whose names are identities. `tokens`: every call must carry one of them
  // ("authorization: Bearer TOKEN"); with a certificate too, both must name
  // the same identity.
  Authenticator(bool client_certificates, std::optional<TokenTable> tokens)
      : client_certificates_(client_certificates), tokens_(std::move(tokens)) {}

  // The caller of a call with these peer properties and request metadata;
  // UNAUTHENTICATED (naming why) if it has no identity.
  absl::StatusOr<Identity> Identify(const grpc::AuthContext& peer,
                                    const Metadata& metadata) const;

 private:
  const bool client_certificates_;
  const std::optional<TokenTable> tokens_;
};

class AuthProcessor final : public grpc::AuthMetadataProcessor {
 public:
  // Told of every call Process refuses, with its method (":path", e.g.
  // "/ps.v1.ParameterServer/Push") and the code it got (UNAUTHENTICATED or
  // PERMISSION_DENIED), on gRPC's thread: it must not block. Such calls
  // never reach a handler, so this is where a server can count them.
  using OnRefused = std::function<void(absl::string_view method, grpc::StatusCode code)>;

  explicit AuthProcessor(std::shared_ptr<const Authenticator> authenticator,
                         OnRefused on_refused = nullptr)
      : authenticator_(std::move(authenticator)), on_refused_(std::move(on_refused)) {}

  // Runs on gRPC's thread: it only compares strings.
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed, OutputMetadata* response) override;

 private:
  const std::shared_ptr<const Authenticator> authenticator_;
  const OnRefused on_refused_;  // may be null
};

// The identity of the caller of `ctx`, for a handler: nullopt when
// `authenticator` is null (no authentication on this port: every caller
// may do everything).
absl::StatusOr<std::optional<Identity>> CallerOf(const Authenticator* authenticator,
                                                 const grpc::ServerContextBase& ctx);

}  // namespace ps

#endif  // PS_RPC_AUTH_PROCESSOR_H_
