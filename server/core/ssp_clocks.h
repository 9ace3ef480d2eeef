// SspClocks: the bounded-staleness rule of SSP mode (stale synchronous
// parallel, Ho et al. 2013), as a pure state machine with no clock, thread
// or lock.
//
// Each worker has a clock: its step, the number of steps it has pushed to
// this shard. A worker at step c may read weights (its pull for step c is
// answered) only once every live worker is at step c - S or beyond, S being
// the staleness bound: no worker runs more than S steps ahead of the slowest
// live one. S = 0 keeps the workers in lockstep (but, unlike sync, applies
// each gradient alone, as it arrives).
//
//   - A push advances its worker's clock to max(clock + 1, seq): the client
//     numbers its pushes (seq, the same on every shard), so a worker whose
//     push to this shard was lost still has the step every shard agrees on.
//     seq 0 (none) counts one step.
//   - A dropped worker (its lease expired) no longer holds the others back.
//     When it returns, it continues at the slowest live worker's step if it
//     was behind it, so that it does not stall everyone for the steps it
//     missed.
//   - Staleness in steps: a gradient from a worker at step c computed on
//     the weights of version v has staleness c - m(v), where m(v) is the
//     slowest live step when the shard reached v (every live worker's first
//     m(v) steps are in those weights). A pull answered under the rule
//     gives weights with m(v) >= c - S, so every applied gradient has
//     staleness <= S; a larger value means a worker pushed without pulling
//     as the rule says. The shard versions where the slowest step rose are
//     kept for the last kHistory rises; an older version counts as the
//     oldest one kept (the staleness is then understated).
//
// Not thread-safe: the shard calls it under its lock (via SspPolicy in
// server/core/consistency.cc).
#ifndef PS_SERVER_CORE_SSP_CLOCKS_H_
#define PS_SERVER_CORE_SSP_CLOCKS_H_

#include <cstdint>
#include <deque>
#include <vector>

namespace ps {

class SspClocks {
 public:
  // The slowest step when no worker is live: nothing holds a pull back.
  static constexpr int64_t kNoneLive = INT64_MAX;
  // Rises of the slowest step remembered for staleness (see above).
  static constexpr int kHistory = 4096;

  // REQUIRES: num_workers >= 1, staleness >= 0. Every worker starts live
  // at step 0, at shard version 0.
  SspClocks(int num_workers, int staleness);

  int staleness() const { return staleness_; }

  // Records a push by `worker` (REQUIRES: in range) with `seq` (0: none),
  // computed on version `computed_version`, that the shard applies to
  // reach version `version_after`. Returns its staleness in steps (>= 0).
  int64_t OnPush(int worker, int64_t seq, int64_t computed_version, int64_t version_after);

  // Marks `worker` live or dropped at shard version `version`. A worker
  // that becomes live while behind the slowest live step is moved to it.
  void SetLive(int worker, bool live, int64_t version);

  // The slowest live worker's step; kNoneLive if none is live.
  int64_t Slowest() const;

  // The slowest live step that `worker`'s pull needs: its step minus S.
  int64_t PullNeeds(int worker) const { return clocks_[worker] - staleness_; }
  // Whether `worker`'s pull may be answered now.
  bool MayPull(int worker) const { return Slowest() >= PullNeeds(worker); }

  // Live workers at the slowest step, when a live worker is more than S
  // steps ahead of it (its pull is, or will be, held); empty otherwise.
  std::vector<int> HoldingBack() const;

  // Steps by worker id.
  const std::vector<int64_t>& clocks() const { return clocks_; }

  // Installs `clocks` (e.g. the push seqs of a checkpoint; missing entries
  // are 0), keeping who is live, at shard version `version`.
  void Reset(const std::vector<int64_t>& clocks, int64_t version);

 private:
  // Records the rise of the slowest step, if any, at `version`.
  void NoteSlowest(int64_t version);
  // The slowest live step in the weights of `version`.
  int64_t SlowestAt(int64_t version) const;

  const int staleness_;
  std::vector<int64_t> clocks_;  // by worker id
  std::vector<bool> live_;       // by worker id
  // rises_[i]: the version at which the slowest step reached base_ + i.
  // Non-decreasing; never empty.
  std::deque<int64_t> rises_;
  int64_t base_ = 0;
};

}  // namespace ps

#endif  // PS_SERVER_CORE_SSP_CLOCKS_H_
