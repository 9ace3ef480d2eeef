// MetricsEndpoint: an HTTP(S) port that answers GET /metrics with the
// Prometheus text exposition (format 0.0.4) of a process's collectables:
// prometheus-cpp's data model and serializer, served by cpp-httplib.
//
// Security follows the gRPC port's rules (rpc/credentials.h):
//   - plaintext only on a loopback address, unless options.insecure;
//   - with TLS (security.tls_cert, tls_key and tls_ca, the process's own
//     files), the scraper must present a certificate signed by the CA that
//     names the `reader` or `admin` identity (rpc/authz.h), or, when
//     security.auth_token_file is set, a bearer token of reader or admin in
//     an Authorization header; anyone else gets 403 (a worker's identity) or
//     401 (none). The certificate files are re-read every
//     security.reload_interval, like the gRPC port's.
// Any other path is 404.
//
// Thread-safe. Collectables are held weakly: one that is gone is skipped.
// Shutdown (or the destructor) stops the port and waits for its threads.
#ifndef PS_RPC_METRICS_ENDPOINT_H_
#define PS_RPC_METRICS_ENDPOINT_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/security_options.h"
#include "prometheus/collectable.h"

namespace httplib {
class Server;
}

namespace ps {

struct MetricsEndpointOptions {
  // HOST:PORT to listen on ("127.0.0.1:0" picks a free port; see port()).
  std::string listen;
  // The process's TLS files, token table and `insecure` (see above).
  SecurityOptions security;
  // The flag that set `listen`, named in errors ("--metrics_listen").
  std::string flag = "--metrics_listen";
};

class MetricsEndpoint {
 public:
  // Binds the port and starts serving. INVALID_ARGUMENT naming options.flag
  // for a bad address or plaintext off loopback; UNAVAILABLE if the port
  // cannot be bound; what reading the TLS files or the token table says.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const MetricsEndpointOptions& options,
      std::vector<std::weak_ptr<prometheus::Collectable>> collectables);

  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // The bound port, and HOST:PORT with it.
  int port() const { return port_; }
  std::string address() const;
  bool tls() const { return tls_; }

  // Stops serving; idempotent.
  void Shutdown();

 private:
  struct Impl;
  MetricsEndpoint() = default;

  std::string host_;
  int port_ = 0;
  bool tls_ = false;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

// The text exposition of `collectables` (those still alive), as /metrics
// answers it.
std::string SerializeMetrics(const std::vector<std::weak_ptr<prometheus::Collectable>>& collectables);

}  // namespace ps

#endif  // PS_RPC_METRICS_ENDPOINT_H_
