// SecurityOptions: the transport security a process was given (ps_server's,
// ps_worker's and ps_ctl's --tls_* flags, --auth_token_file, --insecure):
// file names and switches only; rpc/credentials.h turns them into gRPC
// credentials and says what each combination means. A plain value.
#ifndef PS_COMMON_SECURITY_OPTIONS_H_
#define PS_COMMON_SECURITY_OPTIONS_H_

#include <string>

#include "absl/time/time.h"

namespace ps {

struct SecurityOptions {
  // PEM files; all empty: plaintext.
  std::string tls_cert;  // this side's certificate (chain), leaf first
  std::string tls_key;   // its private key
  std::string tls_ca;    // the CA that signs the peers' certificates
  // Client only: the name the server's certificate must carry, when the
  // address's host is not it (e.g. an IP address, or a tunnel).
  std::string tls_server_name;
  // Bearer tokens (rpc/authz.h): the server's table, or the client's own
  // token. Needs TLS on both sides.
  std::string auth_token_file;
  // How often the PEM files are re-read (at least 1 s; ps_server's
  // --tls_reload_secs).
  absl::Duration reload_interval = absl::Seconds(10);
  // Allows plaintext on non-loopback addresses.
  bool insecure = false;

  bool tls() const { return !tls_cert.empty() || !tls_key.empty() || !tls_ca.empty(); }
};

}  // namespace ps

#endif  // PS_COMMON_SECURITY_OPTIONS_H_
