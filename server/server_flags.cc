#include "server/server_flags.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/flag_lists.h"
#include "common/optimizer_flags.h"
#include "common/security_flags.h"
#include "common/status_macros.h"
#include "coord/coordinator_flags.h"
#include "rpc/unix_socket.h"
#include "server/table_flags.h"

ABSL_FLAG(
    std::string, port_file, "",
    "If set, write the bound HOST:PORT (or unix:PATH) to this file once the server is serving.");
ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "HOST:PORT to serve on (0.0.0.0:PORT: every interface). Port 0 picks a free port; "
          "the first stdout line says which. Without TLS only a loopback address is allowed, "
          "unless --insecure. Or unix:/ABS/PATH, a unix socket for clients on this host: its "
          "folder must exist, belong to this user and have mode 0700 (it is the access "
          "control, so plaintext and --auth_token_file need no TLS there); a stale socket "
          "file is replaced, one a server listens on is refused, and the file is removed at "
          "shutdown.");
ABSL_FLAG(double, tls_reload_secs, 10,
          "How often, in seconds, the --tls_* files are re-read (>= 1).");
ABSL_FLAG(std::string, health_listen, "",
          "HOST:PORT (TCP only) of an extra plaintext port that serves only grpc.health.v1 "
          "(SERVING / NOT_SERVING), for Kubernetes and compose probes that have no client "
          "certificate. "
          "Empty: none (the main port answers health checks from any peer that passes the "
          "TLS handshake).");
ABSL_FLAG(std::string, metrics_listen, "",
          "HOST:PORT of a Prometheus /metrics port (port 0 picks one; the log says which). "
          "Same rules as the gRPC port: plaintext only on loopback unless --insecure; with "
          "--tls_* it serves HTTPS and only the reader and admin identities (certificate, or "
          "bearer token with --auth_token_file) may scrape. Empty: none. See docs/metrics.md.");
ABSL_FLAG(bool, reflection, false,
          "Serve gRPC server reflection (for grpcurl and grpc_cli); reflection calls need the "
          "admin identity when clients are authenticated.");
ABSL_FLAG(int, shard_id, 0, "This server's shard index, 0 <= shard_id < num_shards.");
ABSL_FLAG(int, num_shards, 1, "Total number of parameter-server shards (S).");
ABSL_FLAG(int, num_workers, 1, "Number of workers that train against the servers (W).");
ABSL_FLAG(std::string, mode, "sync",
          "sync: average one gradient per worker per step, then apply once. "
          "async: apply every gradient as it arrives. "
          "ssp: as async, but a worker's pull waits while it is more than --staleness steps "
          "ahead of the slowest live worker (stale synchronous parallel).");
ABSL_FLAG(std::optional<int>, staleness, std::nullopt,
          "--mode=ssp only: the staleness bound S >= 0, in steps (not given: 3). A worker's "
          "pull for its step c waits until every live worker has pushed c - S steps "
          "(0: lockstep); a worker dropped by --worker_timeout no longer holds the others "
          "back.");
ABSL_FLAG(double, lr, 0.1,
          "Learning rate of this shard's --optimizer (the base rate of --lr_schedule).");
ABSL_FLAG(std::string, staleness_lr, "none",
          "Every mode but sync: none applies each gradient at the scheduled rate; inverse "
          "divides it by 1 + staleness (the shard's version minus the version the gradient "
          "was computed on).");
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
ABSL_FLAG(int, checkpoint_keep, 3,
          "With --checkpoint_dir: how many newest full checkpoints to keep (with the deltas "
          "after the oldest of them).");
ABSL_FLAG(int64_t, checkpoint_full_every, 1,
          "With --checkpoint_dir: incremental checkpoints. Every this many checkpoints one is "
          "full; those between are deltas holding the dense state and only the embedding rows "
          "changed (and the ids removed) since the checkpoint before. A restore applies the "
          "deltas to the newest full one. 1 = every checkpoint full.");
ABSL_FLAG(std::string, restore_from, "",
          "Directory of a checkpoint taken with --restore_shards shards: at start, a shard "
          "with no checkpoint of its own loads its part of the whole state at this "
          "--num_shards, from the newest version every old shard has: the dense weights and "
          "optimizer state re-cut, the embedding rows it owns (ids re-hashed), the push seqs. "
          "Training goes on bit for bit as on the old count. Empty: none.");
ABSL_FLAG(int, restore_shards, 0,
          "With --restore_from: the shard count that checkpoint was taken with.");
ABSL_FLAG(std::string, restore_tables_from, "",
          "Directory of a checkpoint taken with --restore_tables_shards shards: at start, a "
          "shard with no checkpoint of its own loads the embedding tables' rows it owns at "
          "this --num_shards (ids re-hashed), from the newest version every old shard has; "
          "the dense model starts anew. Empty: none.");
ABSL_FLAG(int, restore_tables_shards, 0,
          "With --restore_tables_from: the shard count that checkpoint was taken with.");
ABSL_FLAG(double, worker_timeout, 10,
          "Sync and SSP modes: a worker's lease, in seconds. A worker that sent a request in this run "
          "of the server and then nothing (not even the heartbeat its ps_worker sends) for "
          "this long is dropped: the open step and the next ones close without its gradient "
          "(averaging over the workers that pushed) until it sends again; in SSP mode its "
          "step no longer holds the others back. Logged as "
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

namespace ps {

absl::StatusOr<ServerOptions> ServerOptionsFromFlags() {
  ServerOptions o;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.health_listen = absl::GetFlag(FLAGS_health_listen);
  o.reflection = absl::GetFlag(FLAGS_reflection);
  o.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  o.security = SecurityOptionsFromFlags();
  ASSIGN_OR_RETURN(o.security.reload_interval, SecondsFromFlag("tls_reload_secs", absl::GetFlag(FLAGS_tls_reload_secs)));
  ShardOptions& shard = o.shard;
  shard.shard_id = absl::GetFlag(FLAGS_shard_id);
  shard.num_shards = absl::GetFlag(FLAGS_num_shards);
  shard.num_workers = absl::GetFlag(FLAGS_num_workers);
  ASSIGN_OR_RETURN(shard.mode, ParseMode(absl::GetFlag(FLAGS_mode)));
  const std::optional<int> staleness = absl::GetFlag(FLAGS_staleness);
  if (staleness.has_value()) shard.staleness = *staleness;
  // A bound given with another mode would silently do nothing.
  if (staleness.has_value() && shard.mode != Mode::kSsp) {
    return absl::InvalidArgumentError(absl::StrCat("--staleness applies to --mode=ssp only (--mode=",
                                                   ModeName(shard.mode), ")"));
  }
  shard.optimizer = OptimizerOptionsFromFlags(absl::GetFlag(FLAGS_lr));
  ASSIGN_OR_RETURN(shard.staleness_lr, ParseStalenessLr(absl::GetFlag(FLAGS_staleness_lr)));
  ASSIGN_OR_RETURN(shard.default_wait, SecondsFromFlag("pull_timeout", absl::GetFlag(FLAGS_pull_timeout)));
  shard.max_wait = shard.default_wait;
  ASSIGN_OR_RETURN(shard.stall_report_after, SecondsFromFlag("stall_report_after", absl::GetFlag(FLAGS_stall_report_after)));
  shard.spec_limits.max_model_elements = absl::GetFlag(FLAGS_max_model_elements);
  shard.spec_limits.max_tensor_elements = absl::GetFlag(FLAGS_max_tensor_elements);
  shard.spec_limits.max_tensors = absl::GetFlag(FLAGS_max_tensors);
  shard.spec_limits.max_name_bytes = absl::GetFlag(FLAGS_max_name_bytes);
  shard.max_waiting_calls = absl::GetFlag(FLAGS_max_waiting_calls);
  shard.max_pending_pushes = absl::GetFlag(FLAGS_max_pending_pushes);
  shard.reject_nonfinite = absl::GetFlag(FLAGS_reject_nonfinite);
  ASSIGN_OR_RETURN(shard.tables, SparseTablesOptionsFromFlags());
  ASSIGN_OR_RETURN(shard.worker_timeout, SecondsFromFlag("worker_timeout", absl::GetFlag(FLAGS_worker_timeout)));
  shard.sync_rule.quorum = absl::GetFlag(FLAGS_sync_quorum);
  shard.sync_rule.min_workers = absl::GetFlag(FLAGS_min_workers);
  ASSIGN_OR_RETURN(o.service.call_timeout, SecondsFromFlag("call_timeout", absl::GetFlag(FLAGS_call_timeout)));
  ASSIGN_OR_RETURN(o.shutdown_grace, SecondsFromFlag("shutdown_grace", absl::GetFlag(FLAGS_shutdown_grace)));
  o.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  o.checkpoints.dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.checkpoints.every_versions = absl::GetFlag(FLAGS_checkpoint_every);
  ASSIGN_OR_RETURN(o.checkpoints.period, SecondsFromFlag("checkpoint_secs", absl::GetFlag(FLAGS_checkpoint_secs)));
  o.checkpoints.keep = absl::GetFlag(FLAGS_checkpoint_keep);
  o.checkpoints.full_every = absl::GetFlag(FLAGS_checkpoint_full_every);
  const std::string restore_from = absl::GetFlag(FLAGS_restore_from);
  const std::string tables_from = absl::GetFlag(FLAGS_restore_tables_from);
  if (!restore_from.empty() && !tables_from.empty()) {
    return absl::InvalidArgumentError(
        "--restore_from restores the tables too: give it or --restore_tables_from, not both");
  }
  o.checkpoints.tables_only = !tables_from.empty();
  o.checkpoints.restore_from = o.checkpoints.tables_only ? tables_from : restore_from;
  o.checkpoints.restore_from_shards = o.checkpoints.tables_only
                                          ? absl::GetFlag(FLAGS_restore_tables_shards)
                                          : absl::GetFlag(FLAGS_restore_shards);
  ASSIGN_OR_RETURN(const CoordinatorFlags coordinator, CoordinatorFromFlags());
  o.coordinator.address = coordinator.address;
  o.coordinator.registration = coordinator.registration;
  return o;
}

std::string PortFileFromFlags() { return absl::GetFlag(FLAGS_port_file); }

absl::Status WritePortFile(const std::string& path, const std::string& address) {
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  out << address << "\n";
  out.close();
  if (!out || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot write --port_file=", path));
  }
  return absl::OkStatus();
}

namespace {

std::string Lease(absl::Duration worker_timeout) {
  return worker_timeout > absl::ZeroDuration() ? absl::FormatDuration(worker_timeout)
                                               : std::string("off");
}

}  // namespace

ServerDescription DescribeServer(const ServerOptions& options, const std::string& address,
                                 const std::string& health_address,
                                 const std::string& metrics_address) {
  ServerDescription d;
  const ShardOptions& shard = options.shard;
  std::ostringstream config;
  config << "shard " << shard.shard_id << "/" << shard.num_shards << ", " << ModeName(shard.mode)
         << " mode, " << shard.num_workers << " workers, lr " << shard.optimizer.learning_rate
         << ", optimizer " << shard.optimizer.name << ", " << shard.optimizer.schedule.name
         << " lr schedule";
  if (shard.mode != Mode::kSync) {
    config << ", staleness lr " << StalenessLrName(shard.staleness_lr);
  }
  if (shard.mode == Mode::kSync) {
    const SyncRule& rule = shard.sync_rule;
    config << ", steps close with "
           << (rule.quorum > 0 ? absl::StrCat("the first ", rule.quorum, " gradients")
                               : std::string("every live worker's gradient"))
           << ", worker lease " << Lease(shard.worker_timeout);
  }
  if (shard.mode == Mode::kSsp) {
    config << ", at most " << shard.staleness << " steps ahead of the slowest live worker"
           << ", worker lease " << Lease(shard.worker_timeout);
  }
  d.config = config.str();
  const SecurityOptions& security = options.security;
  const bool unix_socket = IsUnixAddress(address);
  if (!security.tls() && unix_socket && !security.insecure) {
    d.access = absl::StrCat("unix socket: any process of this user (uid ", geteuid(),
                            ") and root can connect; no one else");
  } else if (!security.tls()) {
    d.warning =
        absl::StrCat("ps_server: WARNING: serving in plaintext",
                     security.insecure ? " (--insecure)" : " on loopback",
                     unix_socket ? ", and the socket's folder was not checked (--insecure)" : "",
                     ": no encryption and no authentication; anyone who can reach ", address,
                     " can read and change the model");
  } else if (security.tls_ca.empty() && security.auth_token_file.empty()) {
    d.warning =
        "ps_server: WARNING: TLS without --tls_ca or --auth_token_file: clients are not "
        "authenticated, so anyone who can reach the port can read and change the model";
  }
  d.security = absl::StrCat("security: ",
                            !security.tls() && unix_socket ? "plaintext on a unix socket"
                            : !security.tls()              ? "plaintext"
                            : !security.tls_ca.empty()     ? "mutual TLS"
                                                           : "TLS",
                            security.auth_token_file.empty() ? "" : " + bearer tokens");
  if (!health_address.empty()) {
    absl::StrAppend(&d.security, "; health probes (plaintext) on ", health_address);
  }
  if (!metrics_address.empty()) {
    absl::StrAppend(&d.security, "; metrics on ", security.tls() ? "https://" : "http://",
                    metrics_address, "/metrics");
  }
  return d;
}

}  // namespace ps
