// Workload: one model's training as a worker runs it: the data it trains on
// at each step, the model and its gradients, and its evaluation. The run
// loop (worker/run_loop.h) drives every workload the same way:
//
//   plan = Init(store)        once: creates or joins the parameters on the
//                             store (the servers, or an in-process store)
//   for each step t:          from 0, or from the servers' step (sync resume)
//     Compute(t, share)       this worker's batch of step t in its share of
//                             the epoch (common/data_share.h): forward,
//                             backward, gradients sent as they are made
//     Exchange()              the step's push-pull completes: the next
//                             weights are in place (sync: once every
//                             worker's gradient of step t was applied)
//   Evaluate()                worker 0, every eval_every steps and at the end
//
// The batch of step t is a pure function of t, the share and the seed, so
// a sync worker that resumes at the servers' step, or skips the steps they
// closed without it, trains on the data of the step it is at.
//
// Implementations: MlpWorkload (worker/mlp/workload.h), CtrWorkload
// (worker/ctr/workload.h). Not thread-safe: one training thread. The store
// passed to Init is borrowed until the workload is destroyed.
#ifndef PS_WORKER_TRAIN_WORKLOAD_H_
#define PS_WORKER_TRAIN_WORKLOAD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/data_share.h"
#include "common/model_spec.h"
#include "worker/train/param_store.h"

namespace ps {

// The flags every model shares, as each model's options-from-flags function
// takes them (ps_worker reads them: worker/worker_flags.h): which model,
// this worker's place among the workers, how long to train, and the seed.
struct SharedWorkloadFlags {
  std::string model = "mlp";  // --model: mlp, softmax or ctr
  int worker_id = 0;          // 0 <= worker_id < num_workers
  int num_workers = 1;
  int batch_size = 64;  // examples per step on this worker
  int epochs = 1;
  int64_t max_steps = 0;  // 0 = no limit
  uint64_t seed = 1;      // initialization (and the MLP's data order)
};

// One number of an evaluation: `key` in --metrics_file's JSON lines, and the
// gauge ps_worker_<key> (with `help`) on /metrics.
struct EvalField {
  std::string key;
  std::string help;
  double value = 0;
};

// What an evaluation found, as data and in words.
struct Evaluation {
  std::vector<EvalField> fields;  // in the order the JSON lines list them
  // For the evaluation's log line, between the step's loss and its
  // samples/s: "test_accuracy 0.8628 test_loss 0.3809".
  std::string line;
  // For the run's last line, after "final ".
  std::string summary;

  // The value of `key`; nullopt when the evaluation has none.
  std::optional<double> Get(absl::string_view key) const;
};

// What a workload will do, known once Init is done.
struct WorkloadPlan {
  // The run ends at this step (with the --num_workers workers sharing every
  // epoch: FixedShares); >= 1. It ends after `epochs` epochs (0: not by
  // epochs) or at max_steps (0: no limit), whichever comes first.
  int64_t total_steps = 0;
  int64_t epochs = 0;
  int64_t max_steps = 0;
  int64_t batch_size = 0;  // examples per step on this worker
  // > 0: the lines name the epoch of the last step trained (step /
  // steps_per_epoch); 0: the workload has no epochs.
  int64_t steps_per_epoch = 0;
  // At a --log_every point without an evaluation, also a plain line
  // "worker W step S loss L samples/s X" (else --metrics_file only).
  bool log_loss_lines = false;
  // The startup line of worker 0, after "worker W/N: ": the model, the
  // mode, the steps, the device or data.
  std::string description;
};

// INVALID_ARGUMENT naming --worker_id unless 0 <= worker_id < num_workers.
absl::Status ValidateWorkerId(int worker_id, int num_workers);
// The options every workload takes from the same flags, checked alike:
// ValidateWorkerId, batch_size >= 1, epochs >= 1, max_steps >= 0
// (INVALID_ARGUMENT naming --batch_size, --epochs, --max_steps).
absl::Status ValidateSharedOptions(int worker_id, int num_workers, int batch_size, int epochs,
                                   int64_t max_steps);

class Workload {
 public:
  virtual ~Workload() = default;

  // Creates the parameters on `store` (worker 0) or joins them, and holds
  // the current weights. Errors: the store's, the device's.
  virtual absl::StatusOr<WorkloadPlan> Init(ParamStore* store) = 0;

  // The steps of an epoch shared by `workers` workers (>= 1); the
  // workload refuses, at Create, a batch that leaves a worker of the
  // --num_workers none. A workload without epochs (the plan's
  // steps_per_epoch is 0) still cuts its data into passes of this length.
  virtual int64_t StepsPerEpoch(int workers) const = 0;

  // The first half of step `step` (share.first_step <= step <
  // share.first_step + StepsPerEpoch(share.workers)): computes this
  // worker's gradient on its batch of that step in `share` with the weights
  // held, and starts sending it. Returns the batch's mean training loss.
  // After an error the step is over (nothing is left in flight).
  virtual absl::StatusOr<double> Compute(int64_t step, const DataShare& share) = 0;
  // The second half: finishes sending the step's gradients and receives the
  // next weights. REQUIRES: a successful Compute before it.
  virtual absl::Status Exchange() = 0;

  // Evaluates the weights held on the workload's held-out data.
  virtual absl::StatusOr<Evaluation> Evaluate() = 0;

  // The dense parameters: their spec, and the weights held (between steps
  // the loop may refresh them with ParamStore::Pull, and saves them).
  virtual const ModelSpec& spec() const = 0;
  virtual TensorList* weights() = 0;
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_WORKLOAD_H_
