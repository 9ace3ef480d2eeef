// RunLoop: ps_worker's one training loop, the same for every workload
// (worker/train/workload.h: the MLP, the CTR model, ...).
//
// Init the workload on the store, then step by step: Compute, Exchange,
// a straggler's sleep (worker/straggler.h), the step reported
// (worker/reporter.h); every eval_every steps (worker 0) an evaluation, and
// every log_every steps a point of the reporter's. At the end, worker 0
// evaluates and saves the dense weights (save_model).
//
// The data: each epoch, this worker's share of it (common/data_share.h;
// with a coordinator, by the job's membership: a worker that joins during
// an epoch starts at the next epoch's first step, with the weights there).
//
// Sync mode:
//   - a worker starts at the servers' step (min(version, total_steps)): one
//     that (re)starts against servers restored from a checkpoint resumes
//     where they are, with that step's data;
//   - a step can end past step + 1 when the servers moved on without this
//     worker (its gradient was dropped: --sync_quorum, or its lease expired
//     while it was cut off); it then continues at the servers' step, and the
//     result counts the gradients dropped and the steps skipped.
// Async and SSP: the shards count pushes, and every worker pushes once a
// step, so the run is complete at version num_workers * steps: worker 0
// pulls that version before its final evaluation (a warning, and the
// weights as they are, when some worker's pushes never arrive), unless
// membership decides the shares (then it evaluates the weights it holds).
//
// Borrows its arguments for the call. Several loops may run at once in
// different threads, on distinct workloads, stores and reporters (tests do).
#ifndef PS_WORKER_RUN_LOOP_H_
#define PS_WORKER_RUN_LOOP_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/client_options.h"
#include "worker/reporter.h"
#include "worker/train/param_store.h"
#include "worker/train/workload.h"

namespace ps {

struct RunOptions {
  int worker_id = 0;  // 0 <= worker_id < num_workers: the workload's
  int num_workers = 1;
  int64_t eval_every = 0;   // steps between evaluations (worker 0); 0 = only at the end
  int64_t log_every = 100;  // steps between the reporter's points; 0 = none but the last
  std::string save_model;   // directory for <name>.npy (worker 0); empty = none
  // Tests of stragglers (worker/straggler.h): after each step, sleep
  // slowdown times as long as its Compute took, or, with
  // slowdown_whole_step, as the worker's usual whole step. 0 = full speed.
  double slowdown = 0;
  bool slowdown_whole_step = false;
  // Sleep only on the steps t with (t + worker_id) % slowdown_every == 0
  // (>= 1; 1 = every step): with slowdown_every = num_workers, one worker in
  // turn is the straggler of each step.
  int64_t slowdown_every = 1;

  // INVALID_ARGUMENT naming ps_worker's flag otherwise.
  absl::Status Validate() const;
};

// Trains `workload` on `store` to the plan's last step, reporting to
// `reporter`, each epoch on the share `shares` gives this worker (null:
// FixedShares, worker_id's of num_workers). Errors: the options', the
// workload's, the store's, the shares'.
absl::StatusOr<RunResult> RunLoop(const RunOptions& options, Workload* workload, ParamStore* store,
                                  Reporter* reporter, DataShares* shares = nullptr);

// RunLoop on a store of its own: the servers of `client`, or, when `client`
// is null, a LocalParamStore with `standalone` (one worker only).
// `reporter` null: silent.
absl::StatusOr<RunResult> RunWorker(const RunOptions& options, Workload* workload,
                                    const ClientOptions* client,
                                    const LocalStoreOptions& standalone,
                                    Reporter* reporter = nullptr, DataShares* shares = nullptr);

}  // namespace ps

#endif  // PS_WORKER_RUN_LOOP_H_
