// RunCtrWorker: one ps_worker --model=ctr run (or a thread of ps_bench
// train --model=ctr): trains the CTR model (worker/ctr_model.h) on the
// synthetic generator (worker/ctr_data.h) or on a Criteo/libsvm file
// (worker/ctr_reader.h), against the parameter servers (CtrRemoteTrainer)
// or alone (CtrLocalTrainer), and evaluates AUC and log loss on held-out
// examples.
//
// The data. Training examples are [0, N): the generator's num_examples, or
// a file's examples but its last eval_examples. Worker w of W at step t
// takes examples ((t * W + w) * B + i) mod N, i < B: the workers' batches of
// a step are disjoint, and a pass over N is N / (W * B) steps. Held-out:
// the generator's HeldOutExample(0 .. eval_examples - 1), with the best AUC
// its hidden model reaches on them; or the file's last eval_examples (no
// best AUC known).
//
// Worker 0 evaluates every eval_every steps and at the end (async: once
// every worker's pushes are in, version W * steps), printing to `log` and
// writing JSON lines to metrics_file. Thread-compatible: one call per
// thread; several may run at once on distinct clients (the bench does).
#ifndef PS_WORKER_CTR_WORKER_H_
#define PS_WORKER_CTR_WORKER_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/client_options.h"
#include "worker/ctr_data.h"
#include "worker/ctr_model.h"
#include "worker/ctr_reader.h"

namespace ps {

struct CtrWorkerOptions {
  int worker_id = 0;    // 0 <= worker_id < num_workers
  int num_workers = 1;
  CtrModelConfig model;        // dim 16, hidden 64,32
  CtrGeneratorOptions data;    // when data_file is empty
  std::string data_file;       // a Criteo TSV or libsvm file; empty: the generator
  CtrReaderOptions reader;     // its format
  uint64_t table_seed = 1;     // the rows' initial values
  int batch_size = 256;        // examples per step on this worker, >= 1
  // > 0: train to this step; 0: epochs passes over N. Sync starts at the
  // servers' step (a restart resumes there), async at 0.
  int64_t steps = 0;
  int epochs = 1;              // >= 1
  int eval_examples = 20000;   // held-out examples, >= 2
  int64_t eval_every = 0;      // steps between evaluations; 0 = only at the end
  int64_t log_every = 100;     // steps between loss lines; 0 = none
  std::string metrics_file;    // JSON lines; empty = none
  int threads = 0;             // OpenBLAS threads; 0 = leave OpenBLAS's own
  // Standalone only (the servers use their own flags): AdaGrad lr of the
  // rows, Adam lr of the MLP, as CtrLocalTrainer's defaults.
  float standalone_sparse_lr = 0.05f;
  double standalone_dense_lr = 1e-3;
  std::ostream* log = nullptr;  // progress lines; nullptr = silent

  // INVALID_ARGUMENT naming the flag (ps_worker's) otherwise.
  absl::Status Validate() const;
};

struct CtrWorkerResult {
  int64_t steps = 0;  // trained by this run (sync: from the servers' step at start)
  int64_t final_version = 0;
  double samples_per_sec = 0;  // this worker's, evaluations excluded
  double wall_s = 0;
  bool evaluated = false;      // worker 0 only
  double auc = 0, log_loss = 0;
  bool has_best = false;       // the generator's data
  double best_auc = 0, best_log_loss = 0;
};

// `client`: connect to these servers; nullptr: standalone (one worker).
absl::StatusOr<CtrWorkerResult> RunCtrWorker(const CtrWorkerOptions& options,
                                             const ClientOptions* client);

}  // namespace ps

#endif  // PS_WORKER_CTR_WORKER_H_
