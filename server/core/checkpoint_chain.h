// CheckpointChain: which of a shard's checkpoint exports are full and which
// are deltas, for incremental checkpoints (ShardOptions::
// checkpoint_full_every = K): the first export, every Kth after it, and the
// first after Restart are full; the others are deltas on the export before
// them. An export at the version of the one before changes nothing
// (kUnchanged: a checkpoint of that version exists or is on its way).
//
// A pure rule: no clock, no locks, no I/O (etcd raft's habit); the Shard
// holds one under its lock and tests drive it directly.
// Thread-compatible.
#ifndef PS_SERVER_CORE_CHECKPOINT_CHAIN_H_
#define PS_SERVER_CORE_CHECKPOINT_CHAIN_H_

#include <cstdint>

namespace ps {

class CheckpointChain {
 public:
  enum class Kind { kFull, kDelta, kUnchanged };
  struct Plan {
    Kind kind = Kind::kFull;
    int64_t base = -1;  // kDelta: the version of the export it is on
  };

  // REQUIRES: full_every >= 1 (1: every export is full).
  explicit CheckpointChain(int64_t full_every) : full_every_(full_every) {}

  // What an export at `version` is.
  Plan Next(int64_t version) const {
    if (full_every_ > 1 && since_full_ >= 0 && version == last_version_) {
      return {Kind::kUnchanged, last_version_};
    }
    if (since_full_ < 0 || since_full_ + 1 >= full_every_) return {Kind::kFull, -1};
    return {Kind::kDelta, last_version_};
  }

  // The export Next(version) planned was made (kUnchanged: nothing to note).
  void Exported(const Plan& plan, int64_t version) {
    if (plan.kind == Kind::kUnchanged) return;
    since_full_ = plan.kind == Kind::kFull ? 0 : since_full_ + 1;
    last_version_ = version;
  }

  // The next export is full: a write failed (the deltas after it have no
  // base on disk) or the shard loaded a checkpoint.
  void Restart() { since_full_ = -1; }

 private:
  int64_t full_every_;
  int64_t since_full_ = -1;  // exports since the last full one; -1: none yet
  int64_t last_version_ = -1;
};

}  // namespace ps

#endif  // PS_SERVER_CORE_CHECKPOINT_CHAIN_H_
