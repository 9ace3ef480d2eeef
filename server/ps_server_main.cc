// ps_server: serves one shard of the model's parameters over gRPC.
//
//   ps_server --listen=0.0.0.0:50051 --shard_id=0 --num_shards=2
//             --num_workers=2 --mode=sync --lr=0.1
//             --tls_cert=server-0.pem --tls_key=server-0.key --tls_ca=ca.pem
//   ps_server --listen=unix:/run/user/1000/ps/shard-0.sock ...   (one host;
//             the folder 0700 and this user's, no TLS needed)
//
// Prints "listening on HOST:PORT" as its first stdout line once serving,
// then what it runs with, then writes --port_file (what launchers wait for),
// and runs until SIGINT or SIGTERM. Its flags: server/server_flags.h and
// common/security_flags.h; bad values are refused by PsServer::Start
// (ServerOptions::Validate, the shard's own checks, CheckSecurityOptions).
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "common/allocator.h"
#include "common/command_line.h"
#include "grpc/grpc.h"
#include "server/ps_server.h"
#include "server/server_flags.h"

namespace {

int Fail(const absl::Status& s) {
  std::cerr << "ps_server: " << s.message() << std::endl;
  return 2;
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
  const ps::ServerDescription d = ps::DescribeServer(
      *options, (*server)->address(), (*server)->health_address(), (*server)->metrics_address());
  std::cout << d.config << std::endl;
  if (!d.access.empty()) std::cout << d.access << std::endl;
  if (!d.warning.empty()) std::cerr << d.warning << std::endl;
  std::cout << d.security << std::endl;
  // Last: whoever waits for this file may use the server at once.
  if (const std::string port_file = ps::PortFileFromFlags(); !port_file.empty()) {
    if (absl::Status s = ps::WritePortFile(port_file, (*server)->address()); !s.ok()) {
      return Fail(s);
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
