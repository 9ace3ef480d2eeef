// ps_server: serves one shard of the model's parameters over gRPC.
//
//   ps_server --listen=0.0.0.0:50051 --shard_id=0 --num_shards=2
//             --num_workers=2 --mode=sync --lr=0.1
//             --tls_cert=server-0.pem --tls_key=server-0.key --tls_ca=ca.pem
//
// Prints "listening on HOST:PORT" as its first stdout line once serving, and
// runs until SIGINT or SIGTERM.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/allocator.h"
#include "rpc/raw_wire.h"
#include "server/ps_server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "HOST:PORT to serve on (0.0.0.0:PORT: every interface). Port 0 picks a free port; "
          "the first stdout line says which. Without TLS only a loopback address is allowed, "
          "unless --insecure.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate (chain) of this server; with --tls_key, serve TLS. Re-read every "
          "--tls_reload_secs, so a rotated certificate needs no restart.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificate(s): require every client to present a certificate signed by it "
          "(mutual TLS; the handshake fails otherwise). Its Subject CN (worker-<id>, reader, "
          "admin) or SAN URI ps://worker/<id> is the client's identity, which decides what it "
          "may call (PERMISSION_DENIED otherwise).");
ABSL_FLAG(std::string, auth_token_file, "",
          "Bearer tokens, one 'IDENTITY TOKEN' line each (IDENTITY: worker-<id>, reader, "
          "admin): every call must carry one (UNAUTHENTICATED otherwise). Needs TLS; with "
          "--tls_ca the token and certificate must name the same identity.");
ABSL_FLAG(double, tls_reload_secs, 10,
          "How often, in seconds, the --tls_* files are re-read (>= 1).");
ABSL_FLAG(bool, insecure, false,
          "Allow plaintext (no --tls_cert) on a non-loopback --listen address: anyone who can "
          "reach the port can read and change the model. Prints a warning.");
ABSL_FLAG(std::string, health_listen, "",
          "HOST:PORT of an extra plaintext port that serves only grpc.health.v1 (SERVING / "
          "NOT_SERVING), for Kubernetes and compose probes that have no client certificate. "
          "Empty: none (the main port answers health checks from any peer that passes the "
          "TLS handshake).");
ABSL_FLAG(bool, reflection, false,
          "Serve gRPC server reflection (for grpcurl and grpc_cli); reflection calls need the "
          "admin identity when clients are authenticated.");
ABSL_FLAG(std::string, port_file, "",
          "If set, write the bound HOST:PORT to this file once the server is serving.");
ABSL_FLAG(int, shard_id, 0, "This server's shard index, 0 <= shard_id < num_shards.");
ABSL_FLAG(int, num_shards, 1, "Total number of parameter-server shards (S).");
ABSL_FLAG(int, num_workers, 1, "Number of workers that train against the servers (W).");
ABSL_FLAG(std::string, mode, "sync",
          "sync: average one gradient per worker per step, then apply once. "
          "async: apply every gradient as it arrives.");
ABSL_FLAG(double, lr, 0.1, "SGD learning rate applied by this shard.");
ABSL_FLAG(double, pull_timeout, 120,
          "Longest wait, in seconds, of a pull (or a worker's init) for a version that has not "
          "arrived; a request may ask for less (ps_worker sends its --wait_timeout). Past it "
          "the call fails with DEADLINE_EXCEEDED naming the workers that have not pushed.");
ABSL_FLAG(double, stall_report_after, 10,
          "Sync mode: when a step has waited this many seconds since its first gradient "
          "arrived for the other workers' gradients, log to stderr which workers it waits for "
          "(\"shard S: step T has waited ...\"), again each time the wait doubles, and "
          "\"shard S: step T completed after ...\" when it completes. 0 = off.");
ABSL_FLAG(double, call_timeout, 60,
          "Longest time, in seconds, a stream call may take to arrive in full after its first "
          "message; past it the stream is closed with DEADLINE_EXCEEDED and the call's buffer "
          "freed. 0 = no limit.");
ABSL_FLAG(double, shutdown_grace, 10,
          "On SIGINT/SIGTERM, seconds that running calls get to finish before they are "
          "cancelled. The process exits within this plus 5 s whatever its clients do.");
ABSL_FLAG(int64_t, max_model_elements, int64_t{1} << 30,
          "Largest model an init may create, in float32 elements over all tensors "
          "(RESOURCE_EXHAUSTED past it). Also sizes the largest request accepted.");
ABSL_FLAG(int64_t, max_tensor_elements, int64_t{1} << 30,
          "Largest tensor of a model, in elements (INVALID_ARGUMENT past it).");
ABSL_FLAG(int, max_tensors, 4096, "Most tensors a model may have (INVALID_ARGUMENT past it).");
ABSL_FLAG(int, max_name_bytes, 256, "Longest tensor name, in bytes (INVALID_ARGUMENT past it).");
ABSL_FLAG(int64_t, max_waiting_calls, 10000,
          "Most pulls and inits waiting for a version at once; more fail with "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, max_pending_pushes, 0,
          "Most pushes being received at once, each holding a buffer of the shard's size; more "
          "fail with RESOURCE_EXHAUSTED. 0 = 2 * num_workers + 2.");
ABSL_FLAG(int, max_concurrent_streams, 1000,
          "Most calls (streams, unary calls, waiting pulls) open at once on one client "
          "connection; more wait in gRPC for a free slot.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Directory of this shard's checkpoints (created if missing; shards may share it). "
          "At start the newest valid one is restored (damaged ones are skipped with a "
          "warning); one is written at each --checkpoint_every versions, every "
          "--checkpoint_secs, and at SIGTERM. Empty: no checkpoints.");
ABSL_FLAG(int64_t, checkpoint_every, 100,
          "With --checkpoint_dir: write a checkpoint whenever the version reaches a multiple "
          "of this (in sync mode the same steps on every shard: a consistent cut). 0 = not by "
          "version.");
ABSL_FLAG(double, checkpoint_secs, 0,
          "With --checkpoint_dir: also write one at most this many seconds apart if the "
          "version moved (not a consistent cut across shards). 0 = not by time.");
ABSL_FLAG(int, checkpoint_keep, 3, "With --checkpoint_dir: how many newest checkpoints to keep.");
ABSL_FLAG(double, worker_timeout, 10,
          "Sync mode: a worker's lease, in seconds. A worker that sent a request in this run "
          "of the server and then nothing (not even the heartbeat its ps_worker sends) for "
          "this long is dropped: the open step and the next ones close without its gradient "
          "(averaging over the workers that pushed) until it sends again. Logged as "
          "\"shard S: worker W dropped ...\" and \"... worker W is back\". 0 = no leases: "
          "a step waits for every worker up to --pull_timeout.");
ABSL_FLAG(int, min_workers, 1,
          "Sync mode: a step closes without dropped workers only once at least this many "
          "gradients are in; below it, it waits.");
ABSL_FLAG(int, sync_quorum, 0,
          "Sync mode, backup workers: close each step with the first N gradients from N "
          "distinct workers (1 <= N <= --num_workers). A gradient that arrives for a closed "
          "step is answered \"dropped\" (not an error), counted in ps_ctl status, and its "
          "worker continues from the current step. 0 = every live worker's gradient.");
ABSL_FLAG(bool, reject_nonfinite, true,
          "Refuse gradients and initial values holding NaN or Inf (INVALID_ARGUMENT), so that "
          "one bad worker cannot poison the model silently.");

namespace {

int Fail(const absl::Status& s) {
  std::cerr << "ps_server: " << s.message() << std::endl;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  ps::TuneAllocatorForLargeBuffers();
  absl::SetProgramUsageMessage(
      "Parameter-server shard. Example (certificates from deploy/make_certs.sh):\n"
      "  ps_server --listen=0.0.0.0:50051 --shard_id=0 --num_shards=2 --num_workers=2 "
      "--mode=sync --lr=0.1 --tls_cert=server-0.pem --tls_key=server-0.key --tls_ca=ca.pem");
  absl::ParseCommandLine(argc, argv);

  ps::ServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.health_listen = absl::GetFlag(FLAGS_health_listen);
  options.reflection = absl::GetFlag(FLAGS_reflection);
  ps::SecurityOptions& security = options.security;
  security.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  security.tls_key = absl::GetFlag(FLAGS_tls_key);
  security.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  security.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  security.insecure = absl::GetFlag(FLAGS_insecure);
  const double reload = absl::GetFlag(FLAGS_tls_reload_secs);
  if (!(reload >= 1)) return Fail(absl::InvalidArgumentError("--tls_reload_secs must be >= 1"));
  security.reload_interval = absl::Seconds(reload);
  options.shard.shard_id = absl::GetFlag(FLAGS_shard_id);
  options.shard.num_shards = absl::GetFlag(FLAGS_num_shards);
  options.shard.num_workers = absl::GetFlag(FLAGS_num_workers);
  absl::StatusOr<ps::Mode> mode = ps::ParseMode(absl::GetFlag(FLAGS_mode));
  if (!mode.ok()) return Fail(mode.status());
  options.shard.mode = *mode;
  options.shard.optimizer.learning_rate = static_cast<float>(absl::GetFlag(FLAGS_lr));
  const double timeout = absl::GetFlag(FLAGS_pull_timeout);
  if (!(timeout > 0)) return Fail(absl::InvalidArgumentError("--pull_timeout must be > 0"));
  options.shard.default_wait = absl::Seconds(timeout);
  options.shard.max_wait = options.shard.default_wait;
  const double stall_report_after = absl::GetFlag(FLAGS_stall_report_after);
  if (!(stall_report_after >= 0)) {
    return Fail(absl::InvalidArgumentError("--stall_report_after must be >= 0"));
  }
  options.shard.stall_report_after = absl::Seconds(stall_report_after);
  const double call_timeout = absl::GetFlag(FLAGS_call_timeout);
  if (!(call_timeout >= 0)) return Fail(absl::InvalidArgumentError("--call_timeout must be >= 0"));
  options.service.call_timeout = absl::Seconds(call_timeout);
  const double grace = absl::GetFlag(FLAGS_shutdown_grace);
  if (!(grace >= 0)) return Fail(absl::InvalidArgumentError("--shutdown_grace must be >= 0"));
  options.shutdown_grace = absl::Seconds(grace);
  ps::SpecLimits& limits = options.shard.spec_limits;
  limits.max_model_elements = absl::GetFlag(FLAGS_max_model_elements);
  limits.max_tensor_elements = absl::GetFlag(FLAGS_max_tensor_elements);
  limits.max_tensors = absl::GetFlag(FLAGS_max_tensors);
  limits.max_name_bytes = absl::GetFlag(FLAGS_max_name_bytes);
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  if (limits.max_model_elements < 1 || limits.max_model_elements > kMaxElements ||
      limits.max_tensor_elements < 1 || limits.max_tensor_elements > kMaxElements) {
    return Fail(absl::InvalidArgumentError(
        "--max_model_elements and --max_tensor_elements must be in [1, 2^40]"));
  }
  if (limits.max_tensors < 1 || limits.max_tensors >= int{ps::kMaxSlicesPerMessage}) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--max_tensors must be in [1, ",
                                                        ps::kMaxSlicesPerMessage, ")")));
  }
  if (limits.max_name_bytes < 1 || limits.max_name_bytes > (1 << 20)) {
    return Fail(absl::InvalidArgumentError("--max_name_bytes must be in [1, 2^20]"));
  }
  options.shard.max_waiting_calls = absl::GetFlag(FLAGS_max_waiting_calls);
  if (options.shard.max_waiting_calls < 1) {
    return Fail(absl::InvalidArgumentError("--max_waiting_calls must be >= 1"));
  }
  options.shard.max_pending_pushes = absl::GetFlag(FLAGS_max_pending_pushes);
  if (options.shard.max_pending_pushes < 0) {
    return Fail(absl::InvalidArgumentError("--max_pending_pushes must be >= 0"));
  }
  options.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  if (options.max_concurrent_streams < 1) {
    return Fail(absl::InvalidArgumentError("--max_concurrent_streams must be >= 1"));
  }
  options.shard.reject_nonfinite = absl::GetFlag(FLAGS_reject_nonfinite);
  options.checkpoints.dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.checkpoints.every_versions = absl::GetFlag(FLAGS_checkpoint_every);
  const double checkpoint_secs = absl::GetFlag(FLAGS_checkpoint_secs);
  options.checkpoints.keep = absl::GetFlag(FLAGS_checkpoint_keep);
  if (options.checkpoints.every_versions < 0 || !(checkpoint_secs >= 0) ||
      options.checkpoints.keep < 1) {
    return Fail(absl::InvalidArgumentError(
        "need --checkpoint_every >= 0, --checkpoint_secs >= 0 and --checkpoint_keep >= 1"));
  }
  options.checkpoints.period = absl::Seconds(checkpoint_secs);
  const double worker_timeout = absl::GetFlag(FLAGS_worker_timeout);
  if (!(worker_timeout >= 0)) {
    return Fail(absl::InvalidArgumentError("--worker_timeout must be >= 0"));
  }
  options.shard.worker_timeout = absl::Seconds(worker_timeout);
  options.shard.sync_rule.quorum = absl::GetFlag(FLAGS_sync_quorum);
  options.shard.sync_rule.min_workers = absl::GetFlag(FLAGS_min_workers);
  if (options.shard.mode != ps::Mode::kSync &&
      (options.shard.sync_rule.quorum != 0 || options.shard.sync_rule.min_workers != 1)) {
    return Fail(absl::InvalidArgumentError(
        "--sync_quorum and --min_workers apply to --mode=sync only"));
  }

  // Block the stop signals before any thread starts, so that only sigwait below
  // receives them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  absl::StatusOr<std::unique_ptr<ps::PsServer>> server = ps::PsServer::Start(options);
  if (!server.ok()) return Fail(server.status());
  std::cout << "listening on " << (*server)->address() << std::endl;
  std::cout << "shard " << options.shard.shard_id << "/" << options.shard.num_shards << ", "
            << ps::ModeName(options.shard.mode) << " mode, " << options.shard.num_workers
            << " workers, lr " << options.shard.optimizer.learning_rate;
  if (options.shard.mode == ps::Mode::kSync) {
    const ps::SyncRule& rule = options.shard.sync_rule;
    std::cout << ", steps close with "
              << (rule.quorum > 0 ? absl::StrCat("the first ", rule.quorum, " gradients")
                                  : std::string("every live worker's gradient"))
              << ", worker lease "
              << (worker_timeout > 0 ? absl::FormatDuration(options.shard.worker_timeout)
                                     : std::string("off"));
  }
  std::cout << std::endl;
  if (!security.tls()) {
    std::cerr << "ps_server: WARNING: serving in plaintext"
              << (security.insecure ? " (--insecure)" : " on loopback")
              << ": no encryption and no authentication; anyone who can reach "
              << (*server)->address() << " can read and change the model" << std::endl;
  } else if (security.tls_ca.empty() && security.auth_token_file.empty()) {
    std::cerr << "ps_server: WARNING: TLS without --tls_ca or --auth_token_file: clients are "
                 "not authenticated, so anyone who can reach the port can read and change "
                 "the model" << std::endl;
  }
  std::cout << "security: "
            << (!security.tls()                 ? "plaintext"
                : !security.tls_ca.empty()       ? "mutual TLS"
                                                 : "TLS")
            << (security.auth_token_file.empty() ? "" : " + bearer tokens");
  if (!(*server)->health_address().empty()) {
    std::cout << "; health probes (plaintext) on " << (*server)->health_address();
  }
  std::cout << std::endl;
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
  return 0;
}
