#include "rpc/auth_processor.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "grpc/grpc_security_constants.h"
#include "rpc/wire.h"

namespace ps {
namespace {

absl::string_view View(grpc::string_ref s) { return absl::string_view(s.data(), s.size()); }

// The value of the first `key` entry, or nullopt.
std::optional<absl::string_view> Find(const Authenticator::Metadata& metadata,
                                      absl::string_view key) {
  auto it = metadata.find(grpc::string_ref(key.data(), key.size()));
  if (it == metadata.end()) return std::nullopt;
  return View(it->second);
}

}  // namespace

absl::StatusOr<Identity> Authenticator::Identify(const grpc::AuthContext& peer,
                                                 const Metadata& metadata) const {
  std::optional<Identity> from_certificate;
  if (client_certificates_) {
    std::string cn;
    for (grpc::string_ref v : peer.FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
      cn.assign(v.data(), v.size());
    }
    std::vector<std::string> uris;
    for (grpc::string_ref v : peer.FindPropertyValues(GRPC_PEER_URI_PROPERTY_NAME)) {
      uris.emplace_back(v.data(), v.size());
    }
    absl::StatusOr<Identity> id = IdentityFromCertificate(cn, uris);
    // Without tokens, the certificate must name an identity; with them, the
    // token does.
    if (!id.ok() && !tokens_.has_value()) return id.status();
    if (id.ok()) from_certificate = *std::move(id);
  }
  if (!tokens_.has_value()) return *from_certificate;
  std::optional<absl::string_view> header = Find(metadata, "authorization");
  if (!header.has_value()) return absl::UnauthenticatedError("missing bearer token");
  absl::string_view token = *header;
  if (!absl::ConsumePrefix(&token, "Bearer ")) {
    return absl::UnauthenticatedError("the authorization header is not 'Bearer TOKEN'");
  }
  absl::StatusOr<Identity> id = tokens_->Find(token);
  if (!id.ok()) return id.status();
  if (from_certificate.has_value() && !(*from_certificate == *id)) {
    return absl::PermissionDeniedError(absl::StrCat("the certificate of ", from_certificate->name,
                                                    " came with the token of ", id->name));
  }
  return id;
}

grpc::Status AuthProcessor::Process(const InputMetadata& metadata, grpc::AuthContext* context,
                                    OutputMetadata* /*consumed*/, OutputMetadata* /*response*/) {
  const absl::string_view method = Find(metadata, ":path").value_or("");
  // Probes need no identity, only the handshake.
  if (absl::StartsWith(method, kHealthPrefix)) return grpc::Status::OK;
  absl::StatusOr<Identity> who = authenticator_->Identify(*context, metadata);
  const absl::Status allowed =
      !who.ok() ? absl::Status(who.status().code(),
                               absl::StrCat(method, ": ", who.status().message()))
                : AuthorizeMethod(*who, method);
  grpc::Status status = ToGrpcStatus(allowed);
  if (!status.ok() && on_refused_) on_refused_(method, status.error_code());
  return status;
}

absl::StatusOr<std::optional<Identity>> CallerOf(const Authenticator* authenticator,
                                                 const grpc::ServerContextBase& ctx) {
  if (authenticator == nullptr) return std::nullopt;
  std::shared_ptr<const grpc::AuthContext> peer = ctx.auth_context();
  absl::StatusOr<Identity> who = authenticator->Identify(*peer, ctx.client_metadata());
  if (!who.ok()) return who.status();
  return std::optional<Identity>(*std::move(who));
}

}  // namespace ps
