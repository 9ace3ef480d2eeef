// ps_server: serves one shard of the model's parameters over gRPC.
//
//   ps_server --listen=0.0.0.0:50051 --shard_id=0 --num_shards=2
//             --num_workers=2 --mode=sync --lr=0.1
//             --tls_cert=server-0.pem --tls_key=server-0.key --tls_ca=ca.pem
//   ps_server --listen=unix:/run/user/1000/ps/shard-0.sock ...   (one host;
//             the folder 0700 and this user's, no TLS needed)
//
// Prints "listening on HOST:PORT" as its first stdout line once serving, and
// runs until SIGINT or SIGTERM. Its flags: server/server_flags.h and
// common/security_flags.h; bad values are refused by PsServer::Start
// (ServerOptions::Validate, the shard's own checks, CheckSecurityOptions).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "grpc/grpc.h"
#include "absl/strings/str_cat.h"
#include "common/allocator.h"
#include "common/command_line.h"
#include "rpc/unix_socket.h"
#include "server/ps_server.h"
#include "server/server_flags.h"

ABSL_FLAG(std::string, port_file, "",
          "If set, write the bound HOST:PORT (or unix:PATH) to this file once the server is serving.");

namespace {

int Fail(const absl::Status& s) {
  std::cerr << "ps_server: " << s.message() << std::endl;
  return 2;
}

// The lines that say what the server runs with: stdout for the
// configuration, stderr for the warnings about missing security.
void Describe(const ps::ServerOptions& options, const ps::PsServer& server) {
  const ps::ShardOptions& shard = options.shard;
  std::cout << "shard " << shard.shard_id << "/" << shard.num_shards << ", "
            << ps::ModeName(shard.mode) << " mode, " << shard.num_workers << " workers, lr "
            << shard.optimizer.learning_rate << ", optimizer " << shard.optimizer.name << ", "
            << shard.optimizer.schedule.name << " lr schedule";
  if (shard.mode != ps::Mode::kSync) {
    std::cout << ", staleness lr " << ps::StalenessLrName(shard.staleness_lr);
  }
  if (shard.mode == ps::Mode::kSync) {
    const ps::SyncRule& rule = shard.sync_rule;
    std::cout << ", steps close with "
              << (rule.quorum > 0 ? absl::StrCat("the first ", rule.quorum, " gradients")
                                  : std::string("every live worker's gradient"))
              << ", worker lease "
              << (shard.worker_timeout > absl::ZeroDuration()
                      ? absl::FormatDuration(shard.worker_timeout)
                      : std::string("off"));
  }
  if (shard.mode == ps::Mode::kSsp) {
    std::cout << ", at most " << shard.staleness << " steps ahead of the slowest live worker"
              << ", worker lease "
              << (shard.worker_timeout > absl::ZeroDuration()
                      ? absl::FormatDuration(shard.worker_timeout)
                      : std::string("off"));
  }
  std::cout << std::endl;
  const ps::SecurityOptions& security = options.security;
  const bool unix_socket = ps::IsUnixAddress(server.address());
  if (!security.tls() && unix_socket && !security.insecure) {
    std::cout << "unix socket: any process of this user (uid " << geteuid()
              << ") and root can connect; no one else" << std::endl;
  } else if (!security.tls()) {
    std::cerr << "ps_server: WARNING: serving in plaintext"
              << (security.insecure ? " (--insecure)" : " on loopback")
            << (unix_socket ? ", and the socket's folder was not checked (--insecure)" : "")
              << ": no encryption and no authentication; anyone who can reach "
              << server.address() << " can read and change the model" << std::endl;
  } else if (security.tls_ca.empty() && security.auth_token_file.empty()) {
    std::cerr << "ps_server: WARNING: TLS without --tls_ca or --auth_token_file: clients are "
                 "not authenticated, so anyone who can reach the port can read and change "
                 "the model" << std::endl;
  }
  std::cout << "security: "
            << (!security.tls() && unix_socket ? "plaintext on a unix socket"
                : !security.tls()                 ? "plaintext"
                : !security.tls_ca.empty()       ? "mutual TLS"
                                                 : "TLS")
            << (security.auth_token_file.empty() ? "" : " + bearer tokens");
  if (!server.health_address().empty()) {
    std::cout << "; health probes (plaintext) on " << server.health_address();
  }
  if (!server.metrics_address().empty()) {
    std::cout << "; metrics on " << (security.tls() ? "https://" : "http://")
              << server.metrics_address() << "/metrics";
  }
  std::cout << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  ps::TuneAllocatorForLargeBuffers();
  ps::ParseCommandLine(
      argc, argv,
      "Parameter-server shard. Example (certificates from deploy/make_certs.sh):\n"
      "  ps_server --listen=0.0.0.0:50051 --shard_id=0 --num_shards=2 --num_workers=2 "
      "--mode=sync --lr=0.1 --tls_cert=server-0.pem --tls_key=server-0.key --tls_ca=ca.pem\n"
      "On one host, a unix socket in a folder of mode 0700 needs no TLS:\n"
      "  ps_server --listen=unix:$HOME/ps/shard-0.sock ...");
  absl::StatusOr<ps::ServerOptions> options = ps::ServerOptionsFromFlags();
  if (!options.ok()) return Fail(options.status());

  // A reference to the gRPC library that is never dropped: when the server's
  // own went at shutdown, grpc_shutdown would wait (up to 10 s) for the
  // connections of clients that have not hung up yet.
  grpc_init();

  // Block the stop signals before any thread starts, so that only sigwait below
  // receives them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  // Bad flags fail here, with exit status 2: ServerOptions::Validate, then
  // ShardOptions' checks in Shard::Create.
  absl::StatusOr<std::unique_ptr<ps::PsServer>> server = ps::PsServer::Start(*options);
  if (!server.ok()) return Fail(server.status());
  std::cout << "listening on " << (*server)->address() << std::endl;
  Describe(*options, **server);
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << (*server)->address() << "\n";
    if (std::rename(tmp.c_str(), port_file.c_str()) != 0) {
      return Fail(absl::InternalError(absl::StrCat("cannot write --port_file=", port_file)));
    }
  }

  int sig = 0;
  sigwait(&stop, &sig);
  std::cout << "received " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", shutting down"
            << std::endl;
  const absl::Time stop_start = absl::Now();
  absl::Status s = (*server)->Shutdown();
  if (!s.ok()) {
    // Calls gRPC could not end still reference the server: don't run
    // destructors that would wait on them.
    std::cerr << "ps_server: " << s.message() << "; exiting anyway" << std::endl;
    std::_Exit(3);
  }
  std::cout << "stopped serving after " << absl::FormatDuration(absl::Now() - stop_start)
            << std::endl;
  server->reset();
  std::cout << "shut down after " << absl::FormatDuration(absl::Now() - stop_start)
            << std::endl;
  // Everything is written (the final checkpoint) and released. Exit without
  // gRPC's library shutdown, which can wait up to 10 s for connections that
  // clients still hold open (see grpc_init above).
  std::cout.flush();
  std::cerr.flush();
  std::_Exit(0);
}
