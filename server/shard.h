// Shard: one parameter server's slice of the model and the rules that update it.
//
// A Shard owns the weights of its slices (see common/partition.h) as one flat
// float32 buffer, an Optimizer and a ConsistencyPolicy. Workers push
// gradients, which the policy releases for applying (sync: once per step after
// every worker pushed; async: each push), and pull weights, optionally waiting
// for a minimum version.
//
// A push is assembled outside the shard (StartPush hands out a
// GradientAssembly, server/gradient.h) and offered whole (Push). The policy
// also says which version a worker's pull waits for.
//
// Waiting never parks a thread: a waiting pull leaves a callback (in
// server/waiters.h) that runs when the version arrives (on the thread of the
// push that completed it) or when its deadline passes (on the waiters' timer
// thread). Readers get an
// immutable snapshot of the weights: an update replaces the buffer when a
// reader still holds the old one, so nobody ever sees a half-applied update.
// Counters and latency histograms live in ShardMetrics (server/stats.h),
// readable without the shard's lock. In sync mode the same timer thread logs a step that has waited long for
// some workers' gradients (ShardOptions::stall_report_after).
//
// Faults (README.md, "Failures"). With a worker_timeout, a sync shard holds
// a lease per worker, renewed by each of its requests (Heartbeat included);
// a worker seen in this incarnation and then silent that long is dropped:
// the open step closes without it (SyncRule) and it is logged as
//   shard 0: worker 2 dropped: no request for 3.0s (--worker_timeout=3s); ...
// until its next request brings it back ("shard 0: worker 2 is back ...").
// Pushes are applied at most once (ConsistencyPolicy: sync by worker and
// step, async by worker and seq). Restore installs a worker's copy of the
// weights in a shard that came back behind it. Each shard has an
// Incarnation: a random run id and a start count, adopted from the
// checkpoint it restores.
//
// Knows nothing of gRPC. Thread-safe: every public method may be called
// concurrently. Callbacks are never invoked with the shard's lock held.
#ifndef PS_SERVER_SHARD_H_
#define PS_SERVER_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/float_bytes.h"
#include "common/incarnation.h"
#include "common/model_spec.h"
#include "common/partition.h"
#include "common/slice_assembler.h"
#include "server/buffer_pool.h"
#include "server/consistency.h"
#include "server/shard_state.h"
#include "server/gradient.h"
#include "server/stats.h"
#include "server/waiters.h"
#include "server/weights_snapshot.h"
#include "common/optimizer.h"

namespace ps {

// Writes `line` and a newline to stderr in one write, and flushes it.
void WriteLineToStderr(absl::string_view line);

struct ShardOptions {
  int shard_id = 0;     // 0 <= shard_id < num_shards
  int num_shards = 1;   // S, >= 1
  int num_workers = 1;  // W, >= 1
  Mode mode = Mode::kSync;
  OptimizerOptions optimizer;
  // Longest wait of a pull (or a non-creating init) whose request names no
  // timeout; requests may ask for less or more, up to max_wait.
  absl::Duration default_wait = absl::Seconds(60);
  absl::Duration max_wait = absl::Minutes(30);

  // Limits on what requests may ask for; see "Limits and hostile input" in
  // docs/operating.md. Past them a request fails with the status named.
  SpecLimits spec_limits;  // the model spec an init may create (INVALID_ARGUMENT)
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

  // Stall reports (sync mode). Once the current step holds at least one
  // worker's gradient but not all, and stall_report_after has passed since
  // its first push, the shard logs
  //   shard 0: step 17 has waited 10.0s for gradients from workers [2] (received from [0, 1])
  // and again each time its wait has doubled (at 2x, 4x, 8x ... that time)
  // while the step is still open, each line giving the total wait since the
  // first push, in seconds with one decimal. A step that was reported logs, when it completes,
  //   shard 0: step 17 completed after 34.2s
  // A step with no push yet is never reported (nobody has started it), nor is
  // anything in async mode, which has no step barrier. Zero or negative: off.
  absl::Duration stall_report_after = absl::Seconds(10);
  // Receives each report as one line, without a newline. Called from the
  // shard's timer thread or a pushing thread, never with the shard's lock
  // held, possibly from two threads at once; lines are formed under the lock
  // but written after it is released, so in a rare race a step's last
  // report may follow its completion line. Null drops the lines. The default
  // writes the line to stderr at once (WriteLineToStderr).
  std::function<void(absl::string_view line)> log = WriteLineToStderr;

  // Checkpoints by version: each time an update brings the version to a
  // multiple of checkpoint_every (> 0), the shard exports its state at that
  // version (a copy of the weights, taken under its lock) and hands it to
  // on_checkpoint, after releasing the lock, on the pushing thread. In sync
  // mode every shard thus exports the same versions: a consistent cut. The
  // callback should only queue the state (server/checkpointer.h writes it).
  int64_t checkpoint_every = 0;
  std::function<void(ShardState state)> on_checkpoint;

  // Sync leases: a worker seen in this incarnation and then silent this
  // long is dropped from the steps until it sends again. Zero: no leases
  // (a step waits for every worker, up to the pulls' wait).
  absl::Duration worker_timeout = absl::ZeroDuration();
  // How a sync step closes: quorum (backup workers) and min_workers.
  SyncRule sync_rule;
  // The run id of a shard that restores no checkpoint; 0 = drawn at random.
  uint64_t run_id = 0;
};

// What became of a push that was not an error.
struct PushResult {
  int64_t version = 0;  // the shard's version after it
  PushOutcome outcome = PushOutcome::kApplied;
};

// Counters for operators; see StatusResponse in proto/ps.proto.
struct ShardStats {
  Mode mode = Mode::kSync;
  int shard_id = 0;
  int num_shards = 1;
  int num_workers = 1;
  bool initialized = false;
  int64_t version = 0;
  std::vector<int> workers_seen;
  // Pushes accepted (the wire field's name says applied; in sync mode W
  // accepted pushes make one applied update).
  int64_t pushes_applied = 0;
  int64_t max_staleness = 0;
  double mean_staleness = 0;
  std::vector<int> waiting_for;
  int64_t num_elements = 0;
  float learning_rate = 0;
  int64_t waiting_calls = 0;  // pulls/inits waiting for a version
  int64_t pending_pushes = 0;  // pushes being received (holding a PushBuffer)
  int64_t pulls_served = 0;
  Incarnation incarnation;
  // Sync membership: live (not dropped) and dropped workers among those
  // seen in this incarnation; the step rule; the lease (zero: none).
  std::vector<int> live_workers;
  std::vector<int> dropped_workers;
  int sync_quorum = 0;  // num_workers unless a quorum was set
  int min_workers = 1;
  absl::Duration worker_timeout;
  int64_t pushes_dropped = 0;
  int64_t pushes_duplicate = 0;
  Histogram::Snapshot push_latency;
  Histogram::Snapshot pull_latency;
};

class Shard {
 public:
  using SnapshotCallback = std::function<void(absl::StatusOr<WeightsSnapshot>)>;

  // INVALID_ARGUMENT for inconsistent options, an unknown mode or optimizer.
  static absl::StatusOr<std::unique_ptr<Shard>> Create(const ShardOptions& options);

  // Fails all waiting calls with UNAVAILABLE and stops the timer thread.
  ~Shard();

  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  const ShardOptions& options() const { return options_; }

  // Records a worker (renewing its lease). INVALID_ARGUMENT if worker_id
  // is out of range or num_workers differs from the server's.
  absl::Status Register(int worker_id, int num_workers);

  // Renews the worker's lease; returns the shard's version.
  absl::StatusOr<int64_t> Heartbeat(int worker_id);

  // The async push seq last accepted from `worker_id` (0: none, and always
  // in sync mode), so that a restarted worker numbers its pushes after it.
  int64_t LastSeq(int worker_id) const;

  // Restore after a shard restart: `values` (every slice this shard owns,
  // exactly once) are a worker's copy of the weights at `version`, for
  // `spec`. A shard with no parameters, or behind `version`, installs them
  // at `version`: an open step's gradients are dropped, the optimizer state
  // kept when it has one. With leases, every worker not seen yet in this
  // incarnation gets one from now (the run is live: one that does not come
  // is dropped). Returns whether they were installed (false: the shard was
  // at `version` or beyond, and nothing changed).
  // FAILED_PRECONDITION for a spec other than the shard's.
  absl::StatusOr<bool> Restore(int worker_id, const ModelSpec& spec,
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

  // Ends a waiting Init or Pull (e.g. its client went away): its callback
  // runs with CANCELLED. No-op if the call already completed.
  void CancelWait(uint64_t ticket);

  // Counters for operators. Takes the lock briefly; metrics() does not.
  ShardStats Stats() const;
  const ShardMetrics& metrics() const { return *metrics_; }

  // The layout of this shard's slices; empty until initialized.
  std::shared_ptr<const ShardLayout> Layout() const;

  // Checkpoint support (server/shard_state.h). ExportState copies the full
  // state; FAILED_PRECONDITION before the parameters exist. RestoreState
  // replaces spec, weights, version, optimizer state, the workers seen and
  // the async push seqs, drops the gradients of an open sync step, releases
  // the pulls the restored version satisfies, and makes the shard the next
  // start of the state's run (its incarnation). INVALID_ARGUMENT, changing nothing, for a
  // state of another shard position, worker count or optimizer, or one that
  // does not fit its spec.
  absl::StatusOr<ShardState> ExportState() const;
  absl::Status RestoreState(const ShardState& state);
  // RestoreState of an older checkpoint, for a consistent cut across shards
  // (InitRequest.rollback): FAILED_PRECONDITION, changing nothing, unless
  // the shard's state is the one it last restored with RestoreState,
  // untouched since (no update, restore or init).
  absl::Status RollBack(const ShardState& state);

  // Fails every waiting call with UNAVAILABLE; later waits fail at once.
  void Close();

 private:
  using SnapshotCallbacks = std::vector<Waiters::Callback>;

  Shard(const ShardOptions& options, std::unique_ptr<Optimizer> optimizer,
        std::unique_ptr<ConsistencyPolicy> policy);

  // What an update leaves to do once the lock is released.
  struct Effects {
    SnapshotCallbacks ready;
    WeightsSnapshot snap;
    std::vector<std::string> lines;
    std::optional<absl::StatusOr<ShardState>> checkpoint;
  };

  absl::Status CheckWorker(int worker_id) const;
  // Applies the mean of `to_apply` and moves to the next version.
  void ApplyLocked(std::vector<std::vector<float>> to_apply, Effects* fx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `fx` (outside the lock).
  void Finish(Effects fx);
  // A request from `worker_id`: renews its lease, bringing it back if it
  // was dropped. Touch takes the lock (and does nothing without leases).
  void Touch(int worker_id) ABSL_LOCKS_EXCLUDED(mu_);
  void TouchLocked(int worker_id, Effects* fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the lease check for `when` unless one is set already (leases only
  // move later, so the one set is never later than needed).
  void ArmLeaseCheckLocked(absl::Time when) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the workers whose lease expired by `now`, and sets
  // next_lease_check_ (the caller sets the alarm).
  void CheckLeasesLocked(absl::Time now, Effects* fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool leases() const {
    return options_.mode == Mode::kSync && options_.worker_timeout > absl::ZeroDuration();
  }
  absl::Status CheckInitializedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  SliceAssembler::Options AssemblerOptions(absl::string_view what) const;
  // `values` (every slice of `layout`, exactly once, checked in full first)
  // as one flat buffer in layout order; `what` names the request in errors.
  absl::StatusOr<std::vector<float>> AssembleValues(
      const std::shared_ptr<const ShardLayout>& layout, const std::vector<RawTensorSlice>& values,
      absl::string_view what) const;
  // Makes `layout`, `weights` (its size) and `optimizer` (sized for it) the
  // parameters at `version`, with a fresh consistency policy. A failure
  // leaves the shard as it was.
  absl::Status InstallLocked(std::shared_ptr<const ShardLayout> layout, std::vector<float> weights,
                             std::unique_ptr<Optimizer> optimizer, int64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  WeightsSnapshot SnapshotLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<ShardState> ExportStateLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // RestoreState, or RollBack when `only_untouched`.
  absl::Status Install(const ShardState& state, bool only_untouched);
  // Takes the waiters that the current version releases, with the snapshot
  // to run them with (outside the lock, by Release).
  SnapshotCallbacks TakeReadyLocked(WeightsSnapshot* snap) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Release(SnapshotCallbacks ready, const WeightsSnapshot& snap);
  std::string WaitTimeoutMessage(int64_t min_version, absl::Duration waited) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Sync stall reports: opens the stall clock at a step's first push (and
  // sets the timer), or, when the step completes, closes it and, if it was
  // reported, appends the completion line to `lines`.
  void OnStepPushLocked(bool completed, std::vector<std::string>* lines)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The timer's alarm: logs a stall report if one is due at `now`, and sets
  // the alarm for the next.
  void OnAlarm(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Appends a stall report to `lines` if one is due at `now`.
  void CollectStallReportLocked(absl::Time now, std::vector<std::string>* lines)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Log(const std::vector<std::string>& lines) const;

  // Constant after construction.
  const ShardOptions options_;
  const std::shared_ptr<ShardMetrics> metrics_ = std::make_shared<ShardMetrics>();

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<const ShardLayout> layout_ ABSL_GUARDED_BY(mu_);  // never null
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  // Replaced, not mutated, while a reader may still hold it. Comes from
  // weights_pool_, and returns there when the last reader lets go.
  std::shared_ptr<std::vector<float>> weights_ ABSL_GUARDED_BY(mu_);
  const std::shared_ptr<BufferPool> weights_pool_ = BufferPool::Create(2);
  // Gradient buffers (StartPush), back here once applied.
  const std::shared_ptr<GradientPool> gradient_pool_;
  std::unique_ptr<Optimizer> optimizer_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ConsistencyPolicy> policy_ ABSL_GUARDED_BY(mu_);
  std::set<int> workers_seen_ ABSL_GUARDED_BY(mu_);
  Incarnation incarnation_ ABSL_GUARDED_BY(mu_);
  // True from a RestoreState until the parameters change (RollBack's guard).
  bool untouched_restore_ ABSL_GUARDED_BY(mu_) = false;
  // Leases (sync, worker_timeout > 0): by worker, when it was last heard
  // from in this incarnation (InfinitePast: not yet); the workers dropped;
  // when the timer checks the leases next.
  std::vector<absl::Time> last_seen_ ABSL_GUARDED_BY(mu_);
  std::set<int> dropped_ ABSL_GUARDED_BY(mu_);
  absl::Time next_lease_check_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // Sync stall reports: when the open step (some gradients in, not all) got
  // its first push, InfiniteFuture when no step is open; when the timer
  // reports it next (InfiniteFuture: never); reports logged for it so far.
  absl::Time step_opened_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Time next_stall_report_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  int stall_reports_ ABSL_GUARDED_BY(mu_) = 0;

  // Waiting pulls and inits, and the timer thread (which fails them at their
  // deadlines and runs the stall reports). Last: destroyed, and its timer
  // joined, before the members its callbacks use.
  std::unique_ptr<Waiters> waiters_;
};

}  // namespace ps

#endif  // PS_SERVER_SHARD_H_
