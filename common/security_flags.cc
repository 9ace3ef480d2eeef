#include "common/security_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate (chain) of this process, with --tls_key. A server serves TLS with "
          "it. A client presents it (mutual TLS): its Subject CN is the client's identity on the "
          "servers (ps_worker: worker-<id> with its --worker_id; ps_ctl: admin for every "
          "command, reader for status). Re-read when it changes on disk (ps_server: every "
          "--tls_reload_secs), so a rotated certificate needs no restart.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificate(s). A client connects with TLS and verifies each server's "
          "certificate against it and the address's host name (or --tls_server_name). A server "
          "requires every client to present a certificate signed by it (mutual TLS; the "
          "handshake fails otherwise): its Subject CN (worker-<id>, reader, admin) or SAN URI "
          "ps://worker/<id> is the client's identity, which decides what it may call "
          "(PERMISSION_DENIED otherwise).");
ABSL_FLAG(std::string, auth_token_file, "",
          "Bearer tokens; need TLS (or a unix: address). A client's file holds its token ('TOKEN' or 'IDENTITY "
          "TOKEN'), sent with every call (needs --tls_ca, or unix: servers). A server's holds one 'IDENTITY TOKEN' "
          "line each (IDENTITY: worker-<id>, reader, admin): every call must carry one "
          "(UNAUTHENTICATED otherwise); with --tls_ca the token and certificate must name the "
          "same identity.");
ABSL_FLAG(bool, insecure, false,
          "Allow plaintext with a non-loopback address: a server's --listen without --tls_cert "
          "(anyone who can reach the port can read and change the model; prints a warning), a "
          "client's servers without --tls_ca (anyone on the path can read the traffic and "
          "impersonate the servers). A server's unix: --listen needs no --insecure, but with it "
          "the socket folder's owner and mode (0700) are not checked.");

namespace ps {

SecurityOptions SecurityOptionsFromFlags() {
  SecurityOptions o;
  o.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  o.tls_key = absl::GetFlag(FLAGS_tls_key);
  o.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  o.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  o.insecure = absl::GetFlag(FLAGS_insecure);
  return o;
}

}  // namespace ps
