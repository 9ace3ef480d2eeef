#include "rpc/metrics_endpoint.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <sys/socket.h>

#include <cstdio>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "prometheus/text_serializer.h"
#include "rpc/authz.h"
#include "rpc/credentials.h"

namespace ps {
namespace {

constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// The last OpenSSL error as text.
std::string SslError() {
  char buf[256];
  ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
  return buf;
}

// A certificate chain (leaf first) and its key, read from PEM files.
struct KeyPair {
  std::vector<X509*> chain;
  EVP_PKEY* key = nullptr;

  KeyPair() = default;
  KeyPair(const KeyPair&) = delete;
  KeyPair& operator=(const KeyPair&) = delete;
  ~KeyPair() {
    for (X509* c : chain) X509_free(c);
    EVP_PKEY_free(key);
  }
};

absl::StatusOr<std::unique_ptr<KeyPair>> ReadKeyPair(const std::string& cert_path,
                                                     const std::string& key_path) {
  auto pair = std::make_unique<KeyPair>();
  FILE* f = std::fopen(cert_path.c_str(), "r");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", cert_path));
  while (X509* c = PEM_read_X509(f, nullptr, nullptr, nullptr)) pair->chain.push_back(c);
  std::fclose(f);
  ERR_clear_error();
  if (pair->chain.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(cert_path, ": no PEM certificate"));
  }
  f = std::fopen(key_path.c_str(), "r");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", key_path));
  pair->key = PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (pair->key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(key_path, ": no PEM private key: ", SslError()));
  }
  if (X509_check_private_key(pair->chain[0], pair->key) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(key_path, " is not the key of ", cert_path));
  }
  return pair;
}

// The identity a verified peer certificate names (rpc/authz.h).
absl::StatusOr<Identity> PeerIdentity(const SSL* ssl) {
  X509* cert = SSL_get_peer_certificate(ssl);
  if (cert == nullptr) return absl::UnauthenticatedError("no client certificate");
  char cn[256] = {0};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn));
  std::vector<std::string> sans;
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (n->type != GEN_URI) continue;
    const ASN1_IA5STRING* uri = n->d.uniformResourceIdentifier;
    sans.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(uri)),
                      ASN1_STRING_length(uri));
  }
  GENERAL_NAMES_free(names);
  X509_free(cert);
  return IdentityFromCertificate(cn, sans);
}

}  // namespace

std::string SerializeMetrics(
    const std::vector<std::weak_ptr<prometheus::Collectable>>& collectables) {
  std::vector<prometheus::MetricFamily> families;
  for (const auto& weak : collectables) {
    if (std::shared_ptr<prometheus::Collectable> c = weak.lock()) {
      std::vector<prometheus::MetricFamily> more = c->Collect();
      families.insert(families.end(), std::make_move_iterator(more.begin()),
                      std::make_move_iterator(more.end()));
    }
  }
  return prometheus::TextSerializer().Serialize(families);
}

// The TLS state: the certificate and key, re-read at most every
// reload_interval, handed to each handshake by OpenSSL's certificate
// callback; and the token table.
struct MetricsEndpoint::Impl {
  SecurityOptions security;
  std::vector<std::weak_ptr<prometheus::Collectable>> collectables;
  std::optional<TokenTable> tokens;

  absl::Mutex mu;
  std::shared_ptr<KeyPair> pair ABSL_GUARDED_BY(mu);
  absl::Time read_at ABSL_GUARDED_BY(mu);

  std::shared_ptr<KeyPair> CurrentPair() {
    absl::MutexLock lock(&mu);
    const absl::Time now = absl::Now();
    if (now - read_at >= security.reload_interval) {
      read_at = now;
      absl::StatusOr<std::unique_ptr<KeyPair>> fresh =
          ReadKeyPair(security.tls_cert, security.tls_key);
      // A file caught mid-rewrite keeps the old pair until the next try.
      if (fresh.ok()) pair = std::move(*fresh);
    }
    return pair;
  }

  static int CertCallback(SSL* ssl, void* arg) {
    std::shared_ptr<KeyPair> pair = static_cast<Impl*>(arg)->CurrentPair();
    if (pair == nullptr) return 0;
    SSL_certs_clear(ssl);
    if (SSL_use_certificate(ssl, pair->chain[0]) != 1) return 0;
    for (size_t i = 1; i < pair->chain.size(); ++i) {
      if (SSL_add1_chain_cert(ssl, pair->chain[i]) != 1) return 0;
    }
    return SSL_use_PrivateKey(ssl, pair->key) == 1 ? 1 : 0;
  }

  // Who may read: 200, or 401/403 with the reason in `why`.
  int Authorize(const httplib::Request& req, std::string* why) {
    if (!security.tls()) return 200;
    absl::StatusOr<Identity> who = absl::UnauthenticatedError("no identity");
    const std::string auth = req.get_header_value("Authorization");
    if (tokens.has_value() && absl::StartsWith(auth, "Bearer ")) {
      who = tokens->Find(absl::string_view(auth).substr(7));
    } else if (req.ssl != nullptr) {
      who = PeerIdentity(req.ssl);
    }
    if (!who.ok()) {
      *why = std::string(who.status().message());
      return 401;
    }
    if (who->role != Role::kReader && who->role != Role::kAdmin) {
      *why = absl::StrCat(who->name, " may not read metrics: only reader and admin may");
      return 403;
    }
    return 200;
  }
};

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const MetricsEndpointOptions& options,
    std::vector<std::weak_ptr<prometheus::Collectable>> collectables) {
  const std::string& listen = options.listen;
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(options.flag, "='", listen,
                                                   "' is not HOST:PORT (port 0 picks one)"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const SecurityOptions& sec = options.security;
  if (!sec.tls() && !sec.insecure && !IsLoopbackAddress(listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.flag, "=", listen,
        " would serve metrics in plaintext off loopback: give TLS files or --insecure"));
  }
  if (sec.tls() && (sec.tls_cert.empty() || sec.tls_key.empty() || sec.tls_ca.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.flag, " with TLS needs --tls_cert, --tls_key and --tls_ca (the scrapers' CA)"));
  }

  std::unique_ptr<MetricsEndpoint> ep(new MetricsEndpoint());
  ep->impl_ = std::make_unique<Impl>();
  Impl* impl = ep->impl_.get();
  impl->security = sec;
  impl->collectables = std::move(collectables);
  ep->host_ = host;
  ep->tls_ = sec.tls();

  if (ep->tls_) {
    absl::StatusOr<std::unique_ptr<KeyPair>> pair = ReadKeyPair(sec.tls_cert, sec.tls_key);
    if (!pair.ok()) return pair.status();
    {
      absl::MutexLock lock(&impl->mu);
      impl->pair = std::move(*pair);
      impl->read_at = absl::Now();
    }
    if (!sec.auth_token_file.empty()) {
      absl::StatusOr<TokenTable> tokens = TokenTable::Load(sec.auth_token_file);
      if (!tokens.ok()) return tokens.status();
      impl->tokens = std::move(*tokens);
    }
    std::string ca_error;
    auto server = std::make_unique<httplib::SSLServer>([&](SSL_CTX& ctx) {
      SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
      if (SSL_CTX_load_verify_locations(&ctx, sec.tls_ca.c_str(), nullptr) != 1) {
        ca_error = absl::StrCat(sec.tls_ca, ": ", SslError());
        return false;
      }
      SSL_CTX_set_client_CA_list(&ctx, SSL_load_client_CA_file(sec.tls_ca.c_str()));
      // A certificate is required unless bearer tokens are allowed too.
      SSL_CTX_set_verify(&ctx,
                         impl->tokens.has_value()
                             ? SSL_VERIFY_PEER
                             : SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                         nullptr);
      SSL_CTX_set_cert_cb(&ctx, &Impl::CertCallback, impl);
      return true;
    });
    if (!server->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(options.flag, ": TLS setup failed: ",
                                                     ca_error.empty() ? SslError() : ca_error));
    }
    ep->server_ = std::move(server);
  } else {
    ep->server_ = std::make_unique<httplib::Server>();
  }

  httplib::Server& s = *ep->server_;
  // Scrapes are small and rare: two threads, short timeouts.
  s.new_task_queue = [] { return new httplib::ThreadPool(2); };
  s.set_read_timeout(5, 0);
  s.set_write_timeout(5, 0);
  s.set_keep_alive_timeout(30);
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, which would
  // let a second process bind the same port and take scrapes.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  auto handle = [impl](const httplib::Request& req, httplib::Response& res) {
    std::string why;
    res.status = impl->Authorize(req, &why);
    if (res.status != 200) {
      res.set_content(why + "\n", "text/plain");
      return;
    }
    res.set_content(SerializeMetrics(impl->collectables), kContentType);
  };
  s.Get("/metrics", handle);
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404) {
      res.set_content("not found: this port serves GET /metrics\n", "text/plain");
    }
  });
  const int bound = port == 0 ? s.bind_to_any_port(host) : (s.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    return absl::UnavailableError(
        absl::StrCat(options.flag, ": cannot listen on ", listen, " (in use, or no such address)"));
  }
  ep->port_ = bound;
  ep->thread_ = std::thread([server = ep->server_.get()] { server->listen_after_bind(); });
  // stop() is a no-op until the loop runs, so Shutdown waits for it here.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!s.is_running() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  if (!s.is_running()) {
    ep->Shutdown();
    return absl::InternalError(absl::StrCat(options.flag, ": the HTTP server did not start"));
  }
  return ep;
}

MetricsEndpoint::~MetricsEndpoint() { Shutdown(); }

std::string MetricsEndpoint::address() const {
  return absl::StrCat(host_.find(':') != std::string::npos ? absl::StrCat("[", host_, "]") : host_,
                      ":", port_);
}

void MetricsEndpoint::Shutdown() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace ps
