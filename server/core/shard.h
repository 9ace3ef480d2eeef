// Shard: one parameter server's slice of the model, and the lock that holds
// its rules together.
//
// A Shard composes plain parts, each a class with its own contract and
// tests, that it calls under its one lock and hands the time (read from
// ShardOptions::clock):
//   - VersionedWeights (server/core/versioned_weights.h): the layout, the flat
//     float32 weights with copy-on-write snapshots, the Optimizer, the
//     version.
//   - ConsistencyPolicy (server/core/consistency.h): which pushes are applied
//     and when; dedup (sync by worker and step, async by worker and seq).
//   - Membership (server/core/membership.h): the workers seen, and sync leases.
//   - StallReporter (server/core/stall_reporter.h): sync steps that wait long.
// It owns the Waiters (server/core/waiters.h), whose timer, made by the same
// clock, ends waiting calls at their deadlines and rings the alarms that the
// parts ask for (a lease check, a stall report). With RealClock() that timer
// is one thread; with a FakeClock (common/testing/fake_clock.h) the shard
// has no thread, and its deadlines, leases and stall reports move only when
// the test advances the clock (the timeouts and alarms then run on the
// test's thread). The clock is borrowed (ShardOptions::clock).
//
// Workers push gradients, which the policy releases for applying (sync:
// once per step, when the step closes: every live worker's gradient is in,
// or the quorum's; async: each push), and pull weights, optionally waiting
// for a minimum version. A push is assembled outside the shard (StartPush
// hands out a GradientAssembly, server/core/gradient.h) and offered whole (Push).
// Waiting never parks a thread: a waiting pull leaves a callback that runs
// when the version arrives (on the thread of the push that completed it) or
// when its deadline passes (on the timer). Readers get an immutable
// snapshot of the weights. Counters and latency histograms live in
// ShardMetrics (server/core/stats.h), readable without the shard's lock.
//
// Faults (docs/failures.md). With a worker_timeout, a sync shard drops
// a worker seen in this incarnation and then silent that long: the open
// step closes without it until its next request brings it back. Three
// calls replace the parameters: AdoptWorkerCopy (a worker's copy, after
// this shard restarted behind it), LoadCheckpoint (a checkpoint, at start)
// and RollBackToCheckpoint (an older checkpoint, for a consistent cut). Each
// shard has an Incarnation: a random run id and a start count, continued
// from the checkpoint it loads.
//
// Knows nothing of gRPC. Thread-safe: every public method may be called
// concurrently. Callbacks and log lines are never run with the lock held.
#ifndef PS_SERVER_CORE_SHARD_H_
#define PS_SERVER_CORE_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/incarnation.h"
#include "common/model_spec.h"
#include "common/slice_assembler.h"
#include "server/core/checkpoint_chain.h"
#include "server/core/consistency.h"
#include "server/core/gradient.h"
#include "server/core/membership.h"
#include "server/core/prefetcher.h"
#include "server/core/shard_options.h"
#include "server/core/shard_state.h"
#include "server/core/shard_stats.h"
#include "server/core/sparse_tables.h"
#include "server/core/stall_reporter.h"
#include "server/core/stats.h"
#include "server/core/versioned_weights.h"
#include "server/core/waiters.h"
#include "server/core/weights_snapshot.h"

namespace ps {

// PullRows: the rows, and the shard's version when they were read.
struct RowsResult {
  std::vector<float> values;
  int64_t version = 0;
};

// What became of a push that was not an error.
struct PushResult {
  int64_t version = 0;  // the shard's version after it
  PushOutcome outcome = PushOutcome::kApplied;
};

// A PushPullRows: the rows after the push, and what became of the push.
struct RowsPushPullResult {
  RowsResult rows;
  PushOutcome outcome = PushOutcome::kApplied;
};

class Shard {
 public:
  using SnapshotCallback = std::function<void(absl::StatusOr<WeightsSnapshot>)>;

  // INVALID_ARGUMENT for options that ShardOptions::Validate refuses.
  static absl::StatusOr<std::unique_ptr<Shard>> Create(const ShardOptions& options);

  // Fails all waiting calls with UNAVAILABLE and destroys the timer.
  ~Shard();

  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  const ShardOptions& options() const { return options_; }

  // Records a worker (renewing its lease). INVALID_ARGUMENT if worker_id
  // is out of range or num_workers differs from the server's.
  absl::Status Register(int worker_id, int num_workers);

  // Renews the worker's lease; returns the shard's version.
  absl::StatusOr<int64_t> Heartbeat(int worker_id);

  // With options().worker_registry: the workers that hold a key in etcd
  // that counts now (the owner's watch, every time it changes). Those that
  // enter the set join the sync steps, those that leave it are left out at
  // once (a step they completed closes), each with a log line
  // (server/core/membership.h). `held`: those whose key does not count yet
  // (their requests do not bring them in). Otherwise, or in async mode:
  // nothing.
  void SetRegisteredWorkers(const std::vector<int>& workers, const std::vector<int>& held = {})
      ABSL_LOCKS_EXCLUDED(mu_);

  // The async push seq last accepted from `worker_id` (0: none, and always
  // in sync mode), so that a restarted worker numbers its pushes after it.
  int64_t LastSeq(int worker_id) const;
  // The same for row pushes (PushRows' seq).
  int64_t LastRowSeq(int worker_id) const;

  // After this shard restarted behind the run (InitRequest.restore):
  // `values` (every slice this shard owns, exactly once) are worker
  // `worker_id`'s copy of the weights at `version`, for `spec`. A shard with
  // no parameters, or behind `version`, installs them at `version` and logs
  //   shard 0: restored to version 9 from worker 1's copy (the shard was empty)
  // An open step's gradients are dropped. The copy holds no optimizer
  // state: the optimizer starts afresh at `version`, and for a rule with
  // state (not sgd) the line adds that the state was reset. With leases, every worker not heard
  // from yet gets one from now (Membership::ExpectAll). Returns whether the copy was installed
  // (false: the shard was at `version` or beyond, and nothing changed). FAILED_PRECONDITION for a
  // spec other than the shard's.
  absl::StatusOr<bool> AdoptWorkerCopy(int worker_id, const ModelSpec& spec,
                                       const std::vector<RawTensorSlice>& values, int64_t version);

  Incarnation incarnation() const;

  // Worker 0 creates the parameters from `values` (every slice this shard
  // owns, exactly once; none if it owns no elements). Other workers send no
  // values: their spec is checked against the parameters, waiting up to
  // `wait` for worker 0 to create them. Once created, parameters are never
  // overwritten: a repeated init only checks the spec. `done` receives the
  // version and whether this call created the parameters; it runs exactly
  // once, possibly before Init returns.
  //
  // Returns a ticket for CancelWait while the call waits; 0 if it is done.
  uint64_t Init(int worker_id, const ModelSpec& spec, const std::vector<RawTensorSlice>& values,
                absl::Duration wait,
                std::function<void(absl::StatusOr<int64_t> version, bool created)> done);

  // Starts a push by `worker_id` of a gradient computed on weights of
  // `computed_version`: checks both and that the parameters exist (else
  // FAILED_PRECONDITION saying pushes must wait for worker 0), and returns
  // an assembly for the current layout with the shard's nonfinite rule.
  absl::StatusOr<GradientAssembly> StartPush(int worker_id, int64_t computed_version) const;

  // Offers an assembled gradient to the consistency policy, which applies it
  // (now or with the rest of its step), refuses it, or answers it was a
  // duplicate or dropped (ConsistencyPolicy::OnPush; `seq` is the async
  // push number, 0 = none). ABORTED if the parameters were replaced
  // (restored) since StartPush.
  absl::StatusOr<PushResult> Push(AssembledGradient grad, int64_t seq = 0);

  // Calls `done` with the weights once the shard is initialized and at the
  // version the consistency policy sets for this worker's pull (sync and
  // async: min_version), or with DEADLINE_EXCEEDED after `wait` (0 = the
  // default wait) naming the workers that have not pushed. Runs exactly once,
  // possibly before Pull returns. Returns a ticket for CancelWait while the
  // pull waits; 0 if it is done. The pull renews the worker's lease unless
  // `renews_lease` is false (a reader's pull, which names a worker only for
  // the version it waits for).
  uint64_t Pull(int worker_id, int64_t min_version, absl::Duration wait, SnapshotCallback done,
                bool renews_lease = true);

  // Embedding tables (server/core/sparse_tables.h has the rules). DeclareTables:
  // creates the model's tables, or checks them against those declared
  // (InitParams; any worker, no waiting: rows need no values from worker 0).
  // PullRows reads rows now; PushRows offers a worker's row gradients for
  // its step `version` (sync) or applies them (async and SSP, `seq` as
  // PushRowsRequest.seq). Both renew the worker's lease (a reader's pull
  // with renews_lease false does not). Errors name the table.
  absl::Status DeclareTables(const std::vector<TableSpec>& tables);
  // With `piece` (PullRows and PushPullRows): the rows go to piece(rows,
  // outcome, last) in pieces of at most `piece_ids` ids, each as soon as it
  // is read (`outcome`: the push's, kApplied for a pull), and the result's
  // values stay empty. `piece` runs under the shard's
  // lock (the rows are read atomically, as one call reads them): it must
  // not call the shard. Every check is made before the first piece.
  using RowsPiece = std::function<void(RowsResult rows, PushOutcome outcome, bool last)>;
  absl::StatusOr<RowsResult> PullRows(int worker_id, absl::string_view table,
                                      absl::Span<const uint64_t> ids, bool renews_lease = true,
                                      size_t piece_ids = 0, const RowsPiece& piece = nullptr);
  absl::StatusOr<PushResult> PushRows(int worker_id, absl::string_view table, int64_t version,
                                      int64_t seq, absl::Span<const uint64_t> ids,
                                      absl::Span<const float> grads);
  // PushRows, then the rows of the same ids after it, to `done` (exactly
  // once). Async and SSP: read under the push's lock, before PushPullRows
  // returns (0), going to `piece` as PullRows' do when it is given. Sync:
  // the push is held for step `version` as PushRows holds it, and the call
  // waits (as a pull, up to `wait`, 0 = the default; a ticket for CancelWait
  // is returned) for that step to close; the rows are read at the close,
  // under the lock that closes it, so they are the rows of version + 1, and
  // the outcome is the close's: kApplied, or kDropped when the step closed
  // without this worker's dense gradient. `piece` is not used in sync: the
  // rows come in the result. A duplicate (a retry) applies nothing and
  // still answers the rows; in sync, a retry after the step closed answers
  // the rows now. Errors (bad input, a push for a later step) go to `done`.
  using RowsPushPullDone = std::function<void(absl::StatusOr<RowsPushPullResult>)>;
  uint64_t PushPullRows(int worker_id, absl::string_view table, int64_t version, int64_t seq,
                        absl::Span<const uint64_t> ids, absl::Span<const float> grads,
                        absl::Duration wait, RowsPushPullDone done, size_t piece_ids = 0,
                        const RowsPiece& piece = nullptr);
  // PullRows once the shard's version is at least `min_version` (sync:
  // step min_version - 1 closed), to `done` (exactly once): read at once if
  // it is (or min_version <= 0: no wait, even before Init), else under the lock that moves the
  // version there (a step's close), waiting as a pull does (up to `wait`, 0 = the default; the
  // ticket for CancelWait is returned). Errors of the worker, table or
  // ids come at once, as PullRows'.
  using RowsDone = std::function<void(absl::StatusOr<RowsResult>)>;
  uint64_t PullRowsAt(int worker_id, absl::string_view table, absl::Span<const uint64_t> ids,
                      int64_t min_version, absl::Duration wait, RowsDone done,
                      bool renews_lease = true);
  // The ids of a pull to come (PullRowsRequest.prefetch): checked as
  // PullRows' are (errors the same), then, for a table with a tier, its
  // rows on disk are read back into memory on the prefetcher's thread
  // after this returns (EmbeddingTable::Prefetch). Renews no lease.
  absl::Status PrefetchRows(int worker_id, absl::string_view table, absl::Span<const uint64_t> ids);
  // Waits until no prefetch waits or runs, or `deadline` (false then): for tests.
  bool PrefetchesDone(absl::Time deadline) const { return prefetcher_.WaitIdle(deadline); }

  // The declared tables (empty: none).
  std::vector<TableSpec> Tables() const;

  // Ends a waiting Init or Pull (e.g. its client went away): its callback
  // runs with CANCELLED. No-op if the call already completed.
  void CancelWait(uint64_t ticket);

  // Counters for operators. Takes the lock briefly; metrics() does not.
  ShardStats Stats() const;
  const ShardMetrics& metrics() const { return *metrics_; }
  // For the request pipeline's traffic counters (server/core/pipeline.h).
  ShardMetrics& mutable_metrics() { return *metrics_; }

  // The layout of this shard's slices; empty until initialized.
  std::shared_ptr<const ShardLayout> Layout() const;

  // Checkpoint support (server/core/shard_state.h). ExportState copies the full
  // state; FAILED_PRECONDITION before the parameters exist. LoadCheckpoint
  // replaces spec, weights, version, optimizer state, the workers seen and
  // the async push seqs, drops the gradients of an open sync step, releases
  // the pulls the loaded version satisfies, and makes the shard the next
  // start of the state's run (its incarnation). INVALID_ARGUMENT, changing
  // nothing, for a state ShardOptions::CheckState refuses or one that does
  // not fit its spec.
  absl::StatusOr<ShardState> ExportState() const;
  // The state for a checkpoint (the Checkpointer's, and the exports by
  // version): full, or with checkpoint_full_every > 1 a delta (ShardState::
  // delta_base) of the table rows changed since the export before, as
  // CheckpointChain plans. At the version of the export before, a delta on
  // that version that forgets no change (a writer skips it: a checkpoint of
  // that version exists). FAILED_PRECONDITION as ExportState, or the tier's
  // read error; the changes are kept then.
  absl::StatusOr<ShardState> ExportCheckpoint();
  // The next ExportCheckpoint is full (a checkpoint write failed). Loading
  // a checkpoint does the same.
  void RestartCheckpointChain();
  absl::Status LoadCheckpoint(const ShardState& state);
  // LoadCheckpoint of an older checkpoint, for a consistent cut across
  // shards (InitRequest.rollback), keeping the incarnation:
  // FAILED_PRECONDITION, changing nothing, unless the shard's state is the
  // one it last loaded, untouched since (no update, copy or init).
  absl::Status RollBackToCheckpoint(const ShardState& state);
  // Installs embedding tables from a checkpoint of another shard count
  // (server/checkpoint/reshard.h's TablesForShard: this shard's rows), into
  // a shard with no parameters yet; the model's tables, when worker 0
  // declares them, must match. FAILED_PRECONDITION once the parameters
  // exist; INVALID_ARGUMENT or RESOURCE_EXHAUSTED as SparseTables::Import,
  // changing nothing.
  absl::Status ImportTables(const std::vector<EmbeddingTableState>& tables);

  // Fails every waiting call with `why` (an empty status: UNAVAILABLE, the
  // shard is shutting down); later calls that change or wait on the shard
  // fail at once with it. The first Close's reason stays.
  void Close(absl::Status why = absl::OkStatus());

 private:
  using SnapshotCallbacks = std::vector<Waiters::Callback>;

  Shard(const ShardOptions& options, std::unique_ptr<ConsistencyPolicy> policy);

  // What a change leaves to do once the lock is released (Finish).
  struct Effects {
    SnapshotCallbacks ready;
    WeightsSnapshot snap;
    std::vector<std::string> lines;
    std::optional<absl::StatusOr<ShardState>> checkpoint;
  };
  void Finish(Effects fx);

  // Closes the open step at `now`: applies the mean of `to_apply` at the
  // learning rate times `lr_scale` (an async gradient's staleness factor)
  // and moves to the next version, releasing the pulls it satisfies.
  void ApplyLocked(std::vector<std::vector<float>> to_apply, absl::Time now, Effects* fx,
                   double lr_scale = 1.0) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A request from `worker_id`: renews its lease, bringing it back if it was
  // dropped. Touch takes the lock (and does nothing without leases).
  void Touch(int worker_id) ABSL_LOCKS_EXCLUDED(mu_);
  void TouchLocked(int worker_id, absl::Time now, Effects* fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A row push's worker, version and seq (shard_rows.cc), before the lock.
  absl::Status CheckRowPush(int worker_id, absl::string_view table, int64_t version,
                            int64_t seq) const;
  // The push of PushRows and PushPullRows: renews the lease, offers the
  // rows to the tables (with `answer`, a push-pull's: SparseTables::Push),
  // marks the worker seen when they take them.
  absl::StatusOr<PushOutcome> PushRowsLocked(int worker_id, absl::string_view table,
                                             int64_t version, int64_t seq,
                                             absl::Span<const uint64_t> ids,
                                             absl::Span<const float> grads, Effects* fx,
                                             SparseTables::RowsAnswer* answer = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sync PushPullRows (`push`: the rows pushed for `step`) and PullRowsAt:
  // rows read when `step` closes.
  struct RowsWait {
    int worker_id;
    std::string table;
    std::vector<uint64_t> ids;
    int64_t step;
    bool push;  // the outcome is the close's for this worker's row push
    // Set by ReadWaitingRowsLocked, under the lock, before the wait is
    // released; read by the wait's callback after.
    absl::StatusOr<RowsPushPullResult> result = absl::UnknownError("not read");
  };
  // Queues `wait_for` in the Waiters (its step's close releases it) and in
  // rows_waits_; `done` gets its rows, or the error that ends the wait.
  absl::StatusOr<uint64_t> WaitForRowsLocked(RowsWait wait_for, absl::Duration wait,
                                             RowsPushPullDone done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads the rows of every RowsWait whose step has closed (the version is
  // past it) and forgets them; their waits are released next (TakeReady).
  void ReadWaitingRowsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Acts on what Membership changed: tells the policy, closes a step that a
  // drop or return completes, and sets the lease alarm.
  void OnLeaseEventsLocked(LeaseEvents events, absl::Time now, Effects* fx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The timer's alarm: lease checks and stall reports due at `now`, and the
  // alarms for the next ones (the timer keeps only the earliest).
  void OnAlarm(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  void WakeAt(absl::Time when) const;  // InfiniteFuture: no-op
  absl::Time Now() const { return options_.clock->Now(); }
  // Whether requests renew a lease or bring a worker back (sync and SSP,
  // with leases or a worker registry).
  bool tracks_requests() const {
    return options_.mode != Mode::kAsync &&
           (options_.worker_timeout > absl::ZeroDuration() || options_.worker_registry);
  }

  absl::Status CheckInitializedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Why the shard was closed (Close).
  absl::Status ShuttingDown() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  SliceAssembler::Options AssemblerOptions(absl::string_view what) const;
  // Makes `layout`, `weights` and `optimizer` (null: keep the current one)
  // the parameters at `version`, with a fresh consistency policy; the open
  // step is gone. A failure leaves the shard as it was.
  absl::Status ReplaceParametersLocked(std::shared_ptr<const ShardLayout> layout,
                                       std::vector<float> weights,
                                       std::unique_ptr<Optimizer> optimizer, int64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The tables' rows: none (left empty), all read, or with the disk tiers
  // as snapshots (SparseTables::Export).
  enum class TableRows { kNone, kRead, kTierSnapshots };
  absl::StatusOr<ShardState> ExportStateLocked(TableRows rows = TableRows::kRead) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<ShardState> ExportCheckpointLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // LoadCheckpoint, or RollBackToCheckpoint when `rollback`.
  absl::Status InstallCheckpoint(const ShardState& state, bool rollback);
  // Takes the waiters that the current version releases, with the snapshot
  // to run them with (outside the lock, by Release).
  SnapshotCallbacks TakeReadyLocked(WeightsSnapshot* snap) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same, added to fx->ready (with fx->snap).
  void TakeReadyLocked(Effects* fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Release(SnapshotCallbacks ready, const WeightsSnapshot& snap);
  std::string WaitTimeoutMessage(int64_t min_version, absl::Duration waited) const
      ABSL_LOCKS_EXCLUDED(mu_);
  void Log(const std::vector<std::string>& lines) const;

  // Constant after construction.
  const ShardOptions options_;
  const std::shared_ptr<ShardMetrics> metrics_ = std::make_shared<ShardMetrics>();
  // Gradient buffers (StartPush), back here once applied.
  const std::shared_ptr<GradientPool> gradient_pool_;

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status closed_status_ ABSL_GUARDED_BY(mu_);  // Close's reason
  VersionedWeights weights_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ConsistencyPolicy> policy_ ABSL_GUARDED_BY(mu_);
  Membership membership_ ABSL_GUARDED_BY(mu_);
  StallReporter stalls_ ABSL_GUARDED_BY(mu_);
  Incarnation incarnation_ ABSL_GUARDED_BY(mu_);
  SparseTables tables_ ABSL_GUARDED_BY(mu_);
  // True from a LoadCheckpoint until the parameters change (the guard of
  // RollBackToCheckpoint).
  bool untouched_checkpoint_ ABSL_GUARDED_BY(mu_) = false;
  // Which checkpoint exports are full and which deltas.
  CheckpointChain checkpoint_chain_ ABSL_GUARDED_BY(mu_);
  // Sync PushPullRows waiting for their steps; a wait that ends otherwise
  // (deadline, cancel, close) removes its own.
  absl::flat_hash_set<std::shared_ptr<RowsWait>> rows_waits_ ABSL_GUARDED_BY(mu_);

  // Waiting pulls and inits, and the timer (which fails them at their
  // deadlines and rings the alarms). Destroyed, with its timer, before the
  // members its callbacks use.
  std::unique_ptr<Waiters> waiters_;
  // PrefetchRows' jobs. Last: its thread ends before anything it uses.
  Prefetcher prefetcher_;
};

}  // namespace ps

#endif  // PS_SERVER_CORE_SHARD_H_
