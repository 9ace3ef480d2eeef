#include "rpc/credentials.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "rpc/authz.h"
#include "rpc/unix_socket.h"

namespace ps {
namespace {

using grpc::experimental::FileWatcherCertificateProvider;

absl::Status Readable(const std::string& path, absl::string_view flag) {
  if (path.empty()) return absl::OkStatus();
  if (!std::ifstream(path, std::ios::binary)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  }
  return absl::OkStatus();
}

unsigned int ReloadSeconds(const SecurityOptions& o) {
  return static_cast<unsigned int>(
      std::max<int64_t>(1, absl::ToInt64Seconds(o.reload_interval)));
}

// The provider of `o`'s files: identity (cert + key) when given, roots
// (tls_ca) when given.
std::shared_ptr<FileWatcherCertificateProvider> Provider(const SecurityOptions& o) {
  return std::make_shared<FileWatcherCertificateProvider>(o.tls_key, o.tls_cert, o.tls_ca,
                                                          ReloadSeconds(o));
}

}  // namespace

bool IsLoopbackAddress(absl::string_view address) {
  absl::string_view host = address.substr(0, address.rfind(':'));
  if (absl::ConsumePrefix(&host, "[")) {
    return absl::ConsumeSuffix(&host, "]") && host == "::1";
  }
  if (host == "localhost") return true;
  std::vector<absl::string_view> octets = absl::StrSplit(host, '.');
  int first = 0;
  return octets.size() == 4 && absl::SimpleAtoi(octets[0], &first) && first == 127;
}

absl::Status CheckSecurityOptions(const SecurityOptions& o, absl::string_view address,
                                  bool server) {
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  for (const auto& [path, flag] :
       {std::pair{o.tls_cert, "--tls_cert"}, {o.tls_key, "--tls_key"}, {o.tls_ca, "--tls_ca"},
        {o.auth_token_file, "--auth_token_file"}}) {
    if (absl::Status s = Readable(path, flag); !s.ok()) return s;
  }
  if (o.reload_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        "--tls_reload_secs must be >= 1 (the certificate reload interval)");
  }
  if (server && o.tls() && o.tls_cert.empty()) {
    return absl::InvalidArgumentError("a TLS server needs --tls_cert and --tls_key");
  }
  if (!server && o.tls() && o.tls_ca.empty()) {
    return absl::InvalidArgumentError(
        "a TLS client needs --tls_ca (the CA that signed the servers' certificates)");
  }
  if (!o.tls_server_name.empty() && !o.tls()) {
    return absl::InvalidArgumentError("--tls_server_name needs TLS (--tls_ca)");
  }
  const bool unix_socket = IsUnixAddress(address);
  if (unix_socket) {
    absl::StatusOr<std::string> path =
        UnixSocketPath(address, server ? "--listen" : "server address");
    if (!path.ok()) return path.status();
    if (server && !o.insecure) {
      if (absl::Status s = CheckUnixSocketFolder(*path, "--listen", geteuid()); !s.ok()) {
        return s;
      }
    }
  }
  if (!o.auth_token_file.empty() && !o.tls() && !unix_socket) {
    return absl::InvalidArgumentError(
        "--auth_token_file needs TLS or a unix: address: bearer tokens are never sent or "
        "accepted in plaintext over TCP");
  }
  if (!o.tls() && !o.insecure && !unix_socket && !IsLoopbackAddress(address)) {
    return absl::InvalidArgumentError(absl::StrCat(
        address, " is not a loopback address: give --tls_cert/--tls_key/--tls_ca",
        server ? "" : " (at least --tls_ca)",
        ", or --insecure to ", server ? "serve" : "connect", " in plaintext anyway"));
  }
  return absl::OkStatus();
}

bool CanAuthenticate(const SecurityOptions& o, absl::string_view address) {
  return o.tls() || IsUnixAddress(address);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const SecurityOptions& o, std::shared_ptr<grpc::AuthMetadataProcessor> processor,
    absl::string_view address) {
  if (!o.tls() && IsUnixAddress(address)) {
    // No encryption, but a security level that admits call credentials
    // (bearer tokens), and a processor that checks them.
    std::shared_ptr<grpc::ServerCredentials> creds = grpc::experimental::LocalServerCredentials(UDS);
    if (creds == nullptr) return absl::InternalError("gRPC refused local credentials");
    if (processor != nullptr) creds->SetAuthMetadataProcessor(std::move(processor));
    return creds;
  }
  if (!o.tls()) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(Provider(o));
  options.watch_identity_key_cert_pairs();
  if (!o.tls_ca.empty()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  std::shared_ptr<grpc::ServerCredentials> creds =
      grpc::experimental::TlsServerCredentials(options);
  if (creds == nullptr) return absl::InvalidArgumentError("gRPC refused the TLS options");
  if (processor != nullptr) creds->SetAuthMetadataProcessor(std::move(processor));
  return creds;
}

namespace {

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address,
                                          const std::shared_ptr<grpc::ChannelCredentials>& creds,
                                          const grpc::ChannelArguments& args,
                                          ClientInterceptors interceptors) {
  if (interceptors.empty()) return grpc::CreateCustomChannel(address, creds, args);
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, creds, args,
                                                                 std::move(interceptors));
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeSecureChannel(const std::string& address,
                                                                 const SecurityOptions& o,
                                                                 grpc::ChannelArguments args,
                                                                 ClientInterceptors interceptors) {
  if (absl::Status s = CheckSecurityOptions(o, address, /*server=*/false); !s.ok()) return s;
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (o.tls()) {
    grpc::experimental::TlsChannelCredentialsOptions options;
    options.set_certificate_provider(Provider(o));
    options.watch_root_certs();
    if (!o.tls_cert.empty()) options.watch_identity_key_cert_pairs();
    creds = grpc::experimental::TlsCredentials(options);
    if (creds == nullptr) return absl::InvalidArgumentError("gRPC refused the TLS options");
  } else if (IsUnixAddress(address)) {
    creds = grpc::experimental::LocalCredentials(UDS);
    if (creds == nullptr) return absl::InternalError("gRPC refused local credentials");
  } else {
    return NewChannel(address, grpc::InsecureChannelCredentials(), args, std::move(interceptors));
  }
  if (!o.auth_token_file.empty()) {
    absl::StatusOr<std::string> token = LoadClientToken(o.auth_token_file);
    if (!token.ok()) return token.status();
    creds = grpc::CompositeChannelCredentials(creds, grpc::AccessTokenCredentials(*token));
  }
  if (!o.tls_server_name.empty()) args.SetSslTargetNameOverride(o.tls_server_name);
  return NewChannel(address, creds, args, std::move(interceptors));
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials() {
  return grpc::InsecureChannelCredentials();
}

}  // namespace ps
