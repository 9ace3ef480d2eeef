#include "worker/worker_flags.h"

#include <algorithm>
#include <cstdint>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/client_flags.h"
#include "common/flag_lists.h"
#include "common/optimizer_flags.h"
#include "common/status_macros.h"
#include "common/wire_dtype.h"
#include "coord/coordinator_flags.h"
#include "worker/compute/flags.h"

ABSL_FLAG(std::optional<int>, worker_id, std::nullopt,
          "This worker's id, 0 <= worker_id < num_workers. Default 0; with --coordinator, the "
          "lowest id no live worker of the job holds (docs/elastic.md).");
ABSL_FLAG(std::optional<int>, num_workers, std::nullopt,
          "Total number of workers W (must match the servers). Default 1; with --coordinator, "
          "the job's, as its servers wrote it in etcd (docs/elastic.md).");
ABSL_FLAG(bool, standalone, false,
          "Train alone with no servers, applying the update in-process (for debugging a "
          "model, and as the single-process baseline). Uses --lr, --optimizer and its flags; "
          "ignores --servers.");
ABSL_FLAG(double, lr, 0.1,
          "Learning rate for --standalone (servers use their own --lr and --optimizer).");
ABSL_FLAG(std::string, model, "mlp",
          "mlp (hidden layers from --hidden), softmax (none), or ctr: the click-through-rate "
          "model on embedding tables (its flags are --ctr_*; docs/embeddings.md).");
ABSL_FLAG(int, batch_size, 64, "Examples per step on this worker.");
ABSL_FLAG(int, epochs, 1, "Passes over the training set.");
ABSL_FLAG(int64_t, max_steps, 0, "Stop after this many steps; 0 = no limit.");
ABSL_FLAG(uint64_t, seed, 1, "Seed for initialization and data order (same on all workers).");
ABSL_FLAG(int64_t, eval_every, 0,
          "Worker 0 evaluates on the test set every this many steps; 0 = only at the end.");
ABSL_FLAG(int64_t, log_every, 100,
          "Steps between metrics lines (--model=ctr: and loss lines on stdout); 0 = only the "
          "last.");
ABSL_FLAG(std::string, metrics_file, "",
          "Write JSON lines (worker_id, step, epoch, train_loss, samples_per_sec, wall_s, and "
          "at evaluations test_accuracy, test_loss; --model=ctr: no epoch, and auc, log_loss, "
          "best_auc) to this file; {worker_id} in the path is replaced by the worker's id, so "
          "that workers started with the same flags write separate files.");
ABSL_FLAG(std::string, progress, "auto",
          "A progress line redrawn in place (step of total, samples/s, loss, time left): "
          "auto (when stdout is a terminal), on or off. Without it, and in logs, pipes and "
          "files, the worker writes only its plain lines.");
ABSL_FLAG(std::string, save_model, "",
          "At the end, worker 0 writes each tensor as DIR/<name>.npy (float32, C order).");
ABSL_FLAG(double, connect_timeout, 60, "Seconds to wait for the servers to come up.");
ABSL_FLAG(std::string, transport, "stream",
          "stream: one long-lived gRPC stream per server, tensors in ~1 MB chunks (fastest); "
          "unary: one RPC per server per step.");
ABSL_FLAG(std::string, wire_dtype, "f32",
          "Element type of gradients and weights on the wire: f32 (exact) or bf16 (half the "
          "bytes: gradients and pulled weights rounded to bfloat16, nearest even; the servers "
          "keep float32 weights and optimizer state).");
ABSL_FLAG(double, keepalive, 10,
          "Seconds without traffic before a connection to a server is pinged; an unanswered "
          "ping closes it after as long again, failing its calls with UNAVAILABLE (a dead "
          "server or link is noticed in about twice this). 0 = no pings; else >= 1.");
ABSL_FLAG(double, wait_timeout, 120,
          "Seconds a step may wait for the other workers (sync) or for worker 0's init before "
          "failing with an error that names the missing workers.");
ABSL_FLAG(double, retry_timeout, 60,
          "Seconds a step keeps retrying when a server goes away (restarts, or its link "
          "drops): the worker reconnects, puts a restarted server back at its step from its "
          "own copy of the weights, and retries; the servers apply no push twice. 0 = fail "
          "at once.");
ABSL_FLAG(double, slowdown, 0,
          "For tests of stragglers: after each step, sleep this many times as long as the "
          "step's computation took (--slowdown_of=compute) or as the worker's usual whole "
          "step, computation and push-pull (--slowdown_of=step: the median of its first 10 "
          "steps, which run at full speed; its steps then take 1 + N times as long). "
          "0 = full speed.");
ABSL_FLAG(std::string, slowdown_of, "compute",
          "With --slowdown: what the sleep is a multiple of: 'compute' or 'step'.");
ABSL_FLAG(int64_t, slowdown_every, 1,
          "With --slowdown: sleep only on the steps t with (t + worker_id) % N == 0 "
          "(1 = every step). With N = --num_workers on every worker, one worker in turn is "
          "the straggler of each step: a transient straggler.");
ABSL_FLAG(std::string, metrics_listen, "",
          "HOST:PORT of a Prometheus /metrics port (port 0 picks one; the log says which). "
          "Same rules as the servers': plaintext only on loopback unless --insecure; with "
          "--tls_* it serves HTTPS with this worker's certificate and only the reader and "
          "admin identities' certificates may scrape. Empty: none. See docs/metrics.md.");
ABSL_FLAG(double, metrics_linger, 0,
          "With --metrics_listen: seconds to keep serving /metrics after training ends, so "
          "that a scraper sees the final values of a short run.");

namespace ps {

absl::StatusOr<WorkerConfig> WorkerConfigFromFlags() {
  WorkerConfig c;
  c.workload.model = absl::GetFlag(FLAGS_model);
  if (c.workload.model != "mlp" && c.workload.model != "softmax" && c.workload.model != "ctr") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --model=", c.workload.model, ": expected mlp, softmax or ctr"));
  }
  c.workload.batch_size = absl::GetFlag(FLAGS_batch_size);
  c.workload.epochs = absl::GetFlag(FLAGS_epochs);
  c.workload.max_steps = absl::GetFlag(FLAGS_max_steps);
  c.workload.seed = absl::GetFlag(FLAGS_seed);
  RunOptions& r = c.run;
  const std::optional<int> worker_id = absl::GetFlag(FLAGS_worker_id);
  r.worker_id = worker_id.value_or(0);
  c.worker_id_given = worker_id.has_value();
  const std::optional<int> num_workers = absl::GetFlag(FLAGS_num_workers);
  r.num_workers = num_workers.value_or(1);
  c.num_workers_given = num_workers.has_value();
  c.workload.worker_id = r.worker_id;
  c.workload.num_workers = r.num_workers;
  r.eval_every = absl::GetFlag(FLAGS_eval_every);
  r.log_every = absl::GetFlag(FLAGS_log_every);
  r.save_model = absl::GetFlag(FLAGS_save_model);
  r.slowdown = absl::GetFlag(FLAGS_slowdown);
  const std::string slowdown_of = absl::GetFlag(FLAGS_slowdown_of);
  if (slowdown_of != "compute" && slowdown_of != "step") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --slowdown_of '", slowdown_of, "' (known: compute, step)"));
  }
  r.slowdown_whole_step = slowdown_of == "step";
  r.slowdown_every = absl::GetFlag(FLAGS_slowdown_every);
  {
    // Without --num_workers the worker count may be the job's (JoinJob
    // checks the id against it): here only the rest.
    RunOptions check = r;
    if (!c.num_workers_given) check.num_workers = std::max(r.num_workers, r.worker_id + 1);
    RETURN_IF_ERROR(check.Validate());
  }
  ASSIGN_OR_RETURN(c.progress, ParseProgressMode(absl::GetFlag(FLAGS_progress)));
  ASSIGN_OR_RETURN(c.backend, BackendOptionsFromFlags());
  c.standalone = absl::GetFlag(FLAGS_standalone);
  if (c.standalone && r.num_workers != 1) {
    return absl::InvalidArgumentError("--standalone trains alone: use --num_workers=1");
  }
  c.standalone_store.dense = OptimizerOptionsFromFlags(absl::GetFlag(FLAGS_lr));
  RETURN_IF_ERROR(ValidateOptimizerOptions(c.standalone_store.dense));

  ClientOptions& client = c.client;
  client = ClientOptionsFromFlags();
  ReporterOptions& report = c.report;
  report.worker_id = r.worker_id;
  c.metrics_file_template = absl::GetFlag(FLAGS_metrics_file);
  report.metrics_file =
      absl::StrReplaceAll(c.metrics_file_template, {{"{worker_id}", absl::StrCat(r.worker_id)}});
  report.metrics.listen = absl::GetFlag(FLAGS_metrics_listen);
  report.metrics.security = client.security;
  // The worker's --auth_token_file holds its own token, not a table of
  // scrapers': /metrics takes reader and admin certificates only.
  report.metrics.security.auth_token_file.clear();
  ASSIGN_OR_RETURN(report.metrics_linger,
                   SecondsFromFlag("metrics_linger", absl::GetFlag(FLAGS_metrics_linger)));
  if (report.metrics_linger < absl::ZeroDuration() ||
      report.metrics_linger == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_linger must be a finite number of seconds >= 0, got ",
        absl::GetFlag(FLAGS_metrics_linger)));
  }
  if (c.standalone) {
    RETURN_IF_ERROR(r.Validate());
    return c;
  }

  ASSIGN_OR_RETURN(c.coordinator, CoordinatorFromFlags());
  if (client.servers.empty() && c.coordinator.address.empty()) {
    return absl::InvalidArgumentError(
        "--servers is empty: list the parameter servers (HOST:PORT,...), name their "
        "--coordinator, or pass --standalone");
  }
  if (c.coordinator.address.empty()) RETURN_IF_ERROR(r.Validate());  // W is 1 or given
  client.worker_id = r.worker_id;
  client.num_workers = r.num_workers;
  ASSIGN_OR_RETURN(client.connect_timeout,
                   SecondsFromFlag("connect_timeout", absl::GetFlag(FLAGS_connect_timeout)));
  ASSIGN_OR_RETURN(client.wait_timeout,
                   SecondsFromFlag("wait_timeout", absl::GetFlag(FLAGS_wait_timeout)));
  ASSIGN_OR_RETURN(client.keepalive, SecondsFromFlag("keepalive", absl::GetFlag(FLAGS_keepalive)));
  ASSIGN_OR_RETURN(client.transport, ParseTransport(absl::GetFlag(FLAGS_transport)));
  if (absl::StatusOr<WireDtype> d = ParseWireDtype(absl::GetFlag(FLAGS_wire_dtype)); d.ok()) {
    client.wire_dtype = *d;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--wire_dtype: ", d.status().message()));
  }
  ASSIGN_OR_RETURN(client.retry_timeout,
                   SecondsFromFlag("retry_timeout", absl::GetFlag(FLAGS_retry_timeout)));
  // With a coordinator and no --servers, JoinJob (worker/job.h) lists them.
  if (!client.servers.empty()) RETURN_IF_ERROR(ValidateClientOptions(client));
  return c;
}

}  // namespace ps
