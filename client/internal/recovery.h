// Recovery: what a PsClient does about a fault, as decisions on plain data,
// the way server/core/consistency.h is the shard's step rule. No gRPC, no I/O,
// no clock (times are passed in): PsClient (client/ps_client.cc) makes the
// calls, hands the replies in, and carries out what comes back.
//
//   - MayRetry, RetryAfterRecovery: which failed calls a retry may cure
//     (ClientOptions::retry_timeout).
//   - PlanRecovery: after the client registered with every shard again,
//     which shards restarted (a new incarnation, to adopt) and which to
//     restore from the client's copy of their slices (InitRequest.restore):
//     those that came back behind the version it holds.
//   - CommonVersionRollback: in sync mode, when Init finds the shards at
//     different versions (they restarted from checkpoints of different
//     versions), which shards to ask to roll back to which version
//     (InitRequest.rollback), round by round, until they agree.
//   - RecutCopy: when the job moved to another shard count, the client's
//     copy of the slices cut the new way.
//   - RegisterTimeout, NextBackoff: the pacing of recovery's attempts.
//
// Thread-compatible values and pure functions.
#ifndef PS_CLIENT_INTERNAL_RECOVERY_H_
#define PS_CLIENT_INTERNAL_RECOVERY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/incarnation.h"
#include "common/model_spec.h"
#include "common/partition.h"

namespace ps {

// A call that failed with `code` may go through on a retry: the shard went
// away (UNAVAILABLE, CANCELLED), replaced its parameters under the call
// (ABORTED), or restarted without them (FAILED_PRECONDITION).
bool MayRetry(absl::StatusCode code);

// After recovery, whether to retry a call that failed with `code`, given
// whether recovery found a shard `restarted`: FAILED_PRECONDITION from
// shards that did not restart is the caller's error, not a fault.
// REQUIRES: MayRetry(code).
bool RetryAfterRecovery(absl::StatusCode code, bool restarted);

// What a shard's RegisterResponse says about it.
struct ShardRegistration {
  Incarnation incarnation;
  bool initialized = false;  // it has parameters ...
  int64_t version = 0;       // ... at this version
};

// What the client knows of a shard.
struct KnownShard {
  Incarnation incarnation;   // seen at the last Register
  bool has_copy = false;     // it keeps a copy of the shard's slices ...
  int64_t held_version = 0;  // ... pulled at this version
};

// What to do about one shard.
struct ShardRecovery {
  bool restarted = false;  // its incarnation changed: adopt the new one
  bool restore = false;    // restore it from the copy, to held_version
};

// By shard (`registered` and `known` are by shard, the same size): a shard
// restarted if its incarnation differs from the one known, and is restored
// if the client has a copy and the shard has no parameters or older ones
// than the copy. A shard ahead of the copy, or at its version, is left
// alone (another worker restored it, or it trains on), as is one the client
// has no copy of.
std::vector<ShardRecovery> PlanRecovery(const std::vector<ShardRegistration>& registered,
                                        const std::vector<KnownShard>& known);

// Sync: brings shards that restarted at different versions to one version
// by asking those ahead of the lowest to roll back to it. A shard that rolls
// back may land below that version (it lacks that checkpoint); then the
// next round asks the others to follow it down. Ends when the versions
// agree, when a round rolled no shard back (the shards refused: they train
// already, or have no older checkpoint; nothing to do then), or after as
// many rounds as shards.
//
// Use: while (auto round = r.Next()) { ask round->shards; Answered(...) }.
class CommonVersionRollback {
 public:
  // The version of each shard after Init, by shard.
  explicit CommonVersionRollback(std::vector<int64_t> versions);

  struct Round {
    int64_t target;           // the lowest version
    std::vector<int> shards;  // those not at it, in shard order
  };
  // The next round to run, or nullopt when done (see above).
  std::optional<Round> Next();

  // A shard of the current round answered (no call when it refused): it is
  // now at `version`, having rolled back if `rolled_back`.
  void Answered(int shard, bool rolled_back, int64_t version);

  // By shard, with the answers of the current round so far.
  const std::vector<int64_t>& versions() const { return versions_; }

 private:
  std::vector<int64_t> versions_;
  int rounds_ = 0;      // started
  bool moved_ = false;  // a shard rolled back in the current round
};

// The job's servers now serve another shard count (its checkpoint
// restored on S' shards: docs/elastic.md): the client's copy of the
// shards' slices, by shard and flat in each layout's order (`from`),
// re-cut into the layouts of the new count (`to`), every element where
// the new partition puts it. An empty copy stays empty. INVALID_ARGUMENT
// when a shard's copy does not hold its layout's elements.
absl::StatusOr<std::vector<std::vector<float>>> RecutCopy(
    const ModelSpec& spec, const std::vector<std::shared_ptr<const SliceLayout>>& from,
    const std::vector<std::vector<float>>& copy,
    const std::vector<std::shared_ptr<const SliceLayout>>& to);

// The first pause between recovery attempts, and the next after `backoff`:
// doubling, up to 2 s.
inline constexpr absl::Duration kFirstBackoff = absl::Milliseconds(100);
absl::Duration NextBackoff(absl::Duration backoff);

// How long one round of Register calls may wait for the shards at `now`
// while recovering until `deadline`: what is left, at most 5 s and at least
// 1 ms.
absl::Duration RegisterTimeout(absl::Time deadline, absl::Time now);

}  // namespace ps

#endif  // PS_CLIENT_INTERNAL_RECOVERY_H_
