// Trainer: one worker's training loop.
//
// Each step: compute the gradient of the local batch (see data_order.h) on
// the weights last pulled, then push it and pull the next weights in one
// round trip through the ParamStore. In sync mode that round trip returns
// once every worker's gradient for the step was applied; in async mode it
// returns at once. Worker 0 evaluates on the test set every `eval_every`
// steps and at the end, and saves the model.
//
// Borrows the dataset, backend and store for the duration of Run(). Not
// thread-safe; several Trainers may run in parallel threads (tests do).
#ifndef PS_WORKER_TRAINER_H_
#define PS_WORKER_TRAINER_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "common/model_spec.h"
#include "common/optimizer.h"
#include "worker/backend.h"
#include "worker/dataset.h"
#include "worker/param_store.h"
#include "worker/worker_metrics.h"

namespace ps {

struct TrainerOptions {
  int worker_id = 0;                  // 0 <= worker_id < num_workers
  int num_workers = 1;                // W
  std::vector<int> hidden = {512, 256};  // hidden layer widths; empty = softmax regression
  int batch_size = 64;                // examples per step on this worker
  int epochs = 1;                     // passes over the training set
  int64_t max_steps = 0;              // stop after this many steps; 0 = no limit
  uint64_t seed = 1;                  // initialization and data order
  bool shuffle = true;                // reshuffle each epoch (else the file order)
  int64_t eval_every = 0;             // steps between test evaluations; 0 = only at the end
  int64_t log_every = 100;            // steps between metrics lines
  std::string metrics_file;           // JSON lines; empty = none
  std::string save_model;             // directory for <name>.npy (worker 0); empty = none
  std::ostream* log = nullptr;        // progress lines; nullptr = silent
  // Redraw one progress line in place on `log` (a terminal: see
  // worker/progress.h) between the plain lines, which stay as they are.
  bool progress_line = false;
  // Tests of stragglers (worker/straggler.h): after each step, sleep
  // slowdown times as long as its compute took, or, with
  // slowdown_whole_step, as the worker's usual whole step. 0 = full speed.
  double slowdown = 0;
  bool slowdown_whole_step = false;
  // Sleep only on the steps t with (t + worker_id) % slowdown_every == 0
  // (>= 1; 1 = every step): with slowdown_every = num_workers, one worker in
  // turn is the straggler of each step.
  int64_t slowdown_every = 1;
  // Where each step, evaluation and the version held are recorded for
  // /metrics (worker/worker_metrics.h); nullptr = nowhere. Borrowed for
  // the duration of Run().
  WorkerMetrics* metrics = nullptr;
};

struct TrainResult {
  int64_t steps = 0;
  int64_t final_version = 0;
  double samples_per_sec = 0;        // this worker's, over the run, evaluations excluded
  bool evaluated = false;            // worker 0 only
  double test_accuracy = 0;
  double test_loss = 0;
  double wall_s = 0;
  double compute_s = 0;              // in forward/backward
  double comm_s = 0;                 // waiting on push-pull (communication and peers)
  // Sync: steps whose gradient some shard dropped (its step had closed
  // without it), and steps skipped because the servers had moved on.
  int64_t steps_dropped = 0;
  int64_t steps_skipped = 0;
  TensorList weights;                // the weights after the last step
};

class Trainer {
 public:
  Trainer(const TrainerOptions& options, const FashionMnist* data, ComputeBackend* backend,
          ParamStore* store)
      : options_(options), data_(data), backend_(backend), store_(store) {}

  absl::StatusOr<TrainResult> Run();

 private:
  const TrainerOptions options_;
  const FashionMnist* const data_;   // not owned
  ComputeBackend* const backend_;    // not owned
  ParamStore* const store_;          // not owned
};

// Runs one worker end to end: creates the compute backend, connects to the
// servers of `client` (or, when `client` is null, trains standalone with
// the optimizer `standalone_optimizer`, applied in-process), and runs a
// Trainer.
absl::StatusOr<TrainResult> RunWorker(const TrainerOptions& options, const FashionMnist* data,
                                      const BackendOptions& backend, const ClientOptions* client,
                                      const OptimizerOptions& standalone_optimizer);

// Checks options against the dataset (batch size, worker ids...).
absl::Status ValidateTrainerOptions(const TrainerOptions& options, const Dataset& train);

}  // namespace ps

#endif  // PS_WORKER_TRAINER_H_
