// ConsistencyPolicy: decides when pushed gradients are applied, and when a
// worker's pull may be answered.
//
// The shard validates each push (worker id, slices, sizes) and offers the
// decoded gradient to its policy, which either keeps it (sync: until every
// worker's gradient for the step is in) or hands back gradients for the
// shard to apply once, as their mean, and advance its version by one. For
// each pull the policy names the version the shard must reach before it
// answers (PullReadyVersion); the shard's waiters hold the pull until then.
// CreateConsistencyPolicy maps each Mode (common/mode.h) to its policy and
// rejects a mode it does not know; nothing falls back to async.
//
// Not thread-safe: the shard calls it under its lock.
//
// Where the policies plug in.
//   - Bounded staleness (SSP, --mode=ssp --staleness=S) is here: gradients
//     are applied as they arrive, as in async, and each worker has a step
//     (clock) per shard, advanced by its pushes and kept in step across
//     shards by the push seq (server/core/ssp_clocks.h has the rule). A pull of
//     a worker at step c needs every live worker at step c - S or beyond
//     (PullNeedsStep <= SlowestStep); the shard's waiters key a held pull by
//     that step as well as by version, and the shard re-asks SlowestStep
//     after each push and each lease change. MissingWorkers names the live
//     workers at the slowest step while one is more than S steps ahead.
//   - Backup workers and leases are here: a sync step closes with the first
//     `sync_quorum` gradients, or once every live worker's gradient is in
//     and there are at least `min_workers` of them (SetLive marks a worker
//     whose lease expired, or that came back). A late push gets a third
//     outcome, PushOutcome::kDropped, not an error.
#ifndef PS_SERVER_CORE_CONSISTENCY_H_
#define PS_SERVER_CORE_CONSISTENCY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/incarnation.h"
#include "common/mode.h"

namespace ps {

// What the policy did with a push that was not an error.
struct PushVerdict {
  PushOutcome outcome = PushOutcome::kApplied;
  // Apply the mean of the released gradients now (see OnPush).
  bool apply = false;
  // SSP, an applied push: its staleness in steps (server/core/ssp_clocks.h).
  // -1 in the other modes.
  int64_t step_staleness = -1;
};

// How a sync step closes (ignored in async mode).
struct SyncRule {
  // Close with the first `quorum` gradients from distinct workers (backup
  // workers); 0 = all num_workers. 1 <= quorum <= num_workers otherwise.
  int quorum = 0;
  // With workers marked not live (their lease expired), close once every
  // live worker's gradient is in and there are at least this many.
  int min_workers = 1;
};

class ConsistencyPolicy {
 public:
  virtual ~ConsistencyPolicy() = default;

  // The mode this policy implements.
  virtual Mode mode() const = 0;

  // Offers `grad` from `worker_id`, computed on weights of version
  // `computed_version`, while the shard is at `current_version`.
  //   - Error: the push is refused and nothing changes (sync: a push for a
  //     step after the current one, FAILED_PRECONDITION naming both; async
  //     and SSP: a version the shard has not reached).
  //   - kDuplicate: this worker's gradient for that step (sync) or push
  //     `seq` (async and SSP, seq > 0) was accepted before; nothing changes.
  //   - kDropped (sync): the step is closed and this worker's gradient was
  //     not in it; nothing changes.
  //   - kApplied: accepted. With `apply`, apply the mean of `*to_apply`
  //     (summed in their order, then divided by their count) once, then
  //     version += 1. (The buffers may be empty: a shard that owns no
  //     elements still advances its version.)
  // REQUIRES: 0 <= worker_id < num_workers; grad has the shard's size.
  virtual absl::StatusOr<PushVerdict> OnPush(int worker_id, int64_t computed_version,
                                             int64_t seq, int64_t current_version,
                                             std::vector<float> grad,
                                             std::vector<std::vector<float>>* to_apply) = 0;

  // Marks a worker live or not (leases; async ignores it, SSP stops or
  // starts waiting for its step). Returns true, filling `to_apply` as
  // OnPush does, if that closes the open step (sync).
  virtual bool SetLive(int worker_id, bool live, std::vector<std::vector<float>>* to_apply) = 0;

  // The version the shard must have reached (and be initialized) before
  // the pull of `worker_id` asking for `min_version` is answered. Sync and
  // async: min_version itself.
  virtual int64_t PullReadyVersion(int worker_id, int64_t min_version) const = 0;

  // SSP: the pull of `worker_id` is answered only once SlowestStep() >=
  // PullNeedsStep(worker_id) (as well as at PullReadyVersion). The other
  // modes never hold a pull for it: INT64_MIN and INT64_MAX.
  virtual int64_t PullNeedsStep(int /*worker_id*/) const { return INT64_MIN; }
  virtual int64_t SlowestStep() const { return INT64_MAX; }
  // SSP: each worker's step, by worker id; empty in the other modes.
  virtual std::vector<int64_t> Steps() const { return {}; }

  // Live workers whose gradient for the current step has not arrived
  // (sync); the live workers at the slowest step while a worker is more
  // than S steps ahead (SSP); always empty in async mode.
  virtual std::vector<int> MissingWorkers() const = 0;

  // Async and SSP exactly-once: the last push seq accepted from each worker
  // (0: none), and installing them (e.g. from a checkpoint; SSP takes them
  // as the workers' steps). Sync: empty.
  virtual std::vector<int64_t> LastSeqs() const = 0;
  virtual void SetLastSeqs(const std::vector<int64_t>& seqs) = 0;
};

// The policy of `mode` for `num_workers` workers. INVALID_ARGUMENT naming the
// mode and the known ones for a value that is not a Mode enumerator, and for
// num_workers < 1.
// INVALID_ARGUMENT too for a SyncRule out of range (sync) and a negative
// `staleness` (SSP's bound S, in steps; ignored by the other modes).
absl::StatusOr<std::unique_ptr<ConsistencyPolicy>> CreateConsistencyPolicy(
    Mode mode, int num_workers, const SyncRule& rule = SyncRule(), int staleness = 0);

}  // namespace ps

#endif  // PS_SERVER_CORE_CONSISTENCY_H_
