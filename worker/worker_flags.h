// ps_worker's flags, defined here once: which model (--model) and the
// flags every model shares (--worker_id, --num_workers, --batch_size,
// --epochs, --max_steps, --seed), the run loop's (--eval_every,
// --log_every, --save_model, --slowdown*), the reporter's (--metrics_file,
// --progress, --metrics_listen, --metrics_linger), --standalone and its
// --lr, and how the client waits and travels (--connect_timeout,
// --wait_timeout, --keepalive, --transport, --wire_dtype, --retry_timeout).
// Each model's own flags are beside it (worker/mlp/flags.h,
// worker/ctr/flags.h), the backend's in worker/compute/flags.h, the
// servers and security flags in client/client_flags.h and
// common/client_security_flags.h.
#ifndef PS_WORKER_WORKER_FLAGS_H_
#define PS_WORKER_WORKER_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/client_options.h"
#include "coord/coordinator_flags.h"
#include "worker/compute/backend.h"
#include "worker/progress.h"
#include "worker/reporter.h"
#include "worker/run_loop.h"
#include "worker/train/param_store.h"
#include "worker/train/workload.h"

namespace ps {

// What one ps_worker run was asked to do.
struct WorkerConfig {
  // The workload flags every model shares (--model, --batch_size, --epochs,
  // --max_steps, --seed; worker ids copied from `run`), as each model's
  // flags function takes them.
  SharedWorkloadFlags workload;
  RunOptions run;
  // log and progress_line unset: the caller picks where lines go.
  ReporterOptions report;
  // --progress: whether to draw the progress line; auto = when stdout is a
  // terminal (ShowProgress, worker/progress.h).
  ProgressMode progress = ProgressMode::kAuto;
  BackendOptions backend;
  bool standalone = false;  // train alone: `client` is unused
  // --standalone's in-process update: --lr, --optimizer and its flags (the
  // CTR model has its own: worker/ctr/flags.h replaces them).
  LocalStoreOptions standalone_store;
  // Checked with ValidateClientOptions (with a coordinator and no
  // --servers, once JoinJob found them); log unset.
  ClientOptions client;
  // --coordinator, --job, --coordinator_ttl (address empty: none), whether
  // --worker_id and --num_workers were given, and --metrics_file before
  // {worker_id} was replaced: JoinJob (worker/job.h) may choose the id and
  // read the worker count.
  CoordinatorFlags coordinator;
  bool worker_id_given = false;
  bool num_workers_given = false;
  std::string metrics_file_template;
};

// The flags' values (after absl::ParseCommandLine). INVALID_ARGUMENT naming
// the flag for what no options type checks: an unknown --model, a negative
// --slowdown, --standalone with several workers, an empty --servers
// without --standalone or --coordinator, a bad --coordinator, --job or
// --coordinator_ttl, an unknown --transport, --wire_dtype or
// --progress, a negative --metrics_linger, what RunOptions::Validate and
// ValidateOptimizerOptions refuse (checked with or without --standalone),
// and what ValidateClientOptions refuses. Each model checks its own
// options, and the shared ones, against its data when it is made.
absl::StatusOr<WorkerConfig> WorkerConfigFromFlags();

}  // namespace ps

#endif  // PS_WORKER_WORKER_FLAGS_H_
