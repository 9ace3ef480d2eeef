// ps_worker's flags, defined here once: what to train and how (the
// trainer's, the backend's) and how its client waits and travels
// (--connect_timeout, --wait_timeout, --keepalive, --transport,
// --wire_dtype, --retry_timeout), and its /metrics port (--metrics_listen,
// --metrics_linger). The servers and security flags come from
// client/client_flags.h and common/client_security_flags.h.
#ifndef PS_WORKER_WORKER_FLAGS_H_
#define PS_WORKER_WORKER_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "client/client_options.h"
#include "common/optimizer.h"
#include "rpc/metrics_endpoint.h"
#include "worker/backend.h"
#include "worker/progress.h"
#include "worker/trainer.h"

namespace ps {

// What one ps_worker run was asked to do.
struct WorkerConfig {
  TrainerOptions trainer;  // log, progress_line unset: the caller picks where lines go
  // --model=ctr: train the CTR model (worker/ctr_flags.h reads its flags);
  // `trainer` then holds the flags both models share.
  bool ctr = false;
  // --progress: whether to draw the progress line; auto = when stdout is a
  // terminal (ShowProgress, worker/progress.h).
  ProgressMode progress = ProgressMode::kAuto;
  BackendOptions backend;
  std::string dataset_dir;
  bool standalone = false;  // train alone: `client` is unused
  OptimizerOptions standalone_optimizer;  // --lr, --optimizer and its flags
  // Checked with ValidateClientOptions; log unset.
  ClientOptions client;
  // --metrics_listen (empty: no /metrics port), with the worker's TLS files
  // (--tls_cert, --tls_key, --tls_ca) and --insecure; the address is
  // checked when the port opens (MetricsEndpoint::Start).
  MetricsEndpointOptions metrics;
  // --metrics_linger: how long /metrics stays up after training ends.
  absl::Duration metrics_linger;
};

// The flags' values (after absl::ParseCommandLine). INVALID_ARGUMENT naming
// the flag for what no options type checks: an unknown --model, a bad
// --hidden, a negative --slowdown, --standalone with several workers, an
// empty --servers without --standalone, an unknown --transport,
// --wire_dtype or --progress, a negative --metrics_linger, what
// ValidateOptimizerOptions refuses (checked with or without --standalone),
// and what ValidateClientOptions refuses. The rest of the trainer's options are
// checked against the dataset (ValidateTrainerOptions), once it is loaded.
absl::StatusOr<WorkerConfig> WorkerConfigFromFlags();

}  // namespace ps

#endif  // PS_WORKER_WORKER_FLAGS_H_
