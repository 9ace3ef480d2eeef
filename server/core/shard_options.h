// ShardOptions: what a Shard (server/core/shard.h) is started with, and the one
// place that checks them.
//
// Validate is the whole check that Shard::Create runs first; a flags library
// may call it to refuse a bad command line before anything starts. The
// other checks here compare a request's worker id, or a checkpoint's state,
// with the options. A plain struct: copyable, no thread safety of its own;
// the const methods may be called from any thread.
#ifndef PS_SERVER_CORE_SHARD_OPTIONS_H_
#define PS_SERVER_CORE_SHARD_OPTIONS_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/mode.h"
#include "common/model_spec.h"
#include "common/optimizer.h"
#include "server/core/consistency.h"
#include "server/core/shard_state.h"
#include "server/core/sparse_tables.h"
#include "server/core/staleness_lr.h"

namespace ps {

// Writes `line` and a newline to stderr in one write, and flushes it.
void WriteLineToStderr(absl::string_view line);

struct ShardOptions {
  int shard_id = 0;     // 0 <= shard_id < num_shards
  int num_shards = 1;   // S, >= 1
  int num_workers = 1;  // W, >= 1
  Mode mode = Mode::kSync;
  OptimizerOptions optimizer;
  // Non-sync modes: the learning-rate factor of a stale gradient
  // (server/core/staleness_lr.h). Sync ignores it.
  StalenessLr staleness_lr = StalenessLr::kNone;
  // Longest wait of a pull (or a non-creating init) whose request names no
  // timeout; requests may ask for less or more, up to max_wait.
  absl::Duration default_wait = absl::Seconds(60);
  absl::Duration max_wait = absl::Minutes(30);

  // Limits on what requests may ask for; see "Limits and hostile input" in
  // docs/operating.md. Past them a request fails with the status named.
  SpecLimits spec_limits;  // the model spec an init may create (INVALID_ARGUMENT)
  // Embedding tables: row bound, eviction, sparse optimizer, ids per request.
  SparseTablesOptions tables;
  // Gradients or initial values holding NaN or +-Inf are refused
  // (INVALID_ARGUMENT), so one bad worker cannot poison the model silently.
  bool reject_nonfinite = true;
  // Pulls and inits waiting for a version at once; more fail at once with
  // RESOURCE_EXHAUSTED.
  int64_t max_waiting_calls = 10000;
  // Pushes being assembled at once (each holds a gradient buffer of the
  // shard's size until it is handed to the shard); more fail with
  // RESOURCE_EXHAUSTED. 0 = 2 * num_workers + 2.
  int max_pending_pushes = 0;

  // Stall reports (sync mode; server/core/stall_reporter.h has the rule and the
  // lines). A step that holds some gradients but not all is logged once it
  // has waited this long since its first push, again at 2x, 4x, ... that
  // time, and once more when it completes. Zero or negative: off.
  absl::Duration stall_report_after = absl::Seconds(10);
  // Receives each log line (stall reports, lease drops and returns,
  // restores), without a newline. Called from the shard's timer or a
  // request's thread, never with the shard's lock held, possibly from two
  // threads at once; lines are formed under the lock but written after it is
  // released, so in a rare race a step's last report may follow its
  // completion line. Null drops the lines. The default writes the line to
  // stderr at once (WriteLineToStderr).
  std::function<void(absl::string_view line)> log = WriteLineToStderr;

  // Checkpoints by version: each time an update brings the version to a
  // multiple of checkpoint_every (> 0), the shard exports its state at that
  // version (a copy of the weights, taken under its lock) and hands it to
  // on_checkpoint, after releasing the lock, on the pushing thread. In sync
  // mode every shard thus exports the same versions: a consistent cut. The
  // callback should only queue the state (server/checkpoint/checkpointer.h writes it).
  int64_t checkpoint_every = 0;
  std::function<void(ShardState state)> on_checkpoint;
  // Incremental checkpoints (server/core/checkpoint_chain.h): every
  // checkpoint_full_every-th export for a checkpoint (ExportCheckpoint, and
  // the exports above) is full, the others deltas holding only the table
  // rows changed since the export before (the dense state whole). 1: all
  // full. > 1 needs tables.track_changes.
  int64_t checkpoint_full_every = 1;

  // Sync leases (server/core/membership.h): a worker seen in this incarnation
  // and then silent this long is dropped from the steps until it sends
  // again. Zero: no leases (a step waits for every worker, up to the pulls'
  // wait).
  absl::Duration worker_timeout = absl::ZeroDuration();
  // Sync and SSP with a coordinator (docs/elastic.md): steps wait only for
  // the workers registered in etcd, as the owner reports them
  // (Shard::SetRegisteredWorkers; server/core/membership.h has the rule).
  // Until the first report every worker is expected.
  bool worker_registry = false;
  // How a sync step closes: quorum (backup workers) and min_workers.
  SyncRule sync_rule;
  // SSP mode: the staleness bound S, in steps (>= 0): a worker's pull waits
  // while it is more than S steps ahead of the slowest live worker.
  int staleness = 3;
  // The run id of a shard that restores no checkpoint; 0 = drawn at random.
  uint64_t run_id = 0;

  // Where the shard reads the time (leases, stall reports, waits' deadlines,
  // latencies) and makes its timer (common/clock.h). Borrowed: must outlive
  // the shard. Tests pass a FakeClock (common/testing/fake_clock.h).
  Clock* clock = RealClock();

  // INVALID_ARGUMENT, naming the first problem: a position, worker count,
  // wait or limit out of range, optimizer options CreateOptimizer refuses,
  // a mode that is not a Mode, a SyncRule out of range, a negative
  // worker_timeout, no clock.
  absl::Status Validate() const;

  // INVALID_ARGUMENT naming the range unless 0 <= worker_id < num_workers.
  absl::Status CheckWorker(int worker_id) const;

  // Whether `state` (a checkpoint) fits a shard with these options: the
  // same position, worker count and optimizer, workers seen in range, a
  // spec within spec_limits, tables of this server's sparse optimizer.
  // INVALID_ARGUMENT naming the difference.
  // (Whether its weights and optimizer state fit its spec is checked when
  // they are installed.)
  absl::Status CheckState(const ShardState& state) const;
};

}  // namespace ps

#endif  // PS_SERVER_CORE_SHARD_OPTIONS_H_
