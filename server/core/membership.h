// Membership: which workers a shard has seen, and their sync leases.
//
// Three records, kept apart on purpose:
//   - Seen (MarkSeen): the workers that registered or pushed. It goes into
//     checkpoints and Stats, and never shrinks.
//   - Leases (with a worker_timeout > 0, sync mode only): when each worker
//     was last heard from in this incarnation (Touch: any request). A worker
//     heard from once and then silent for worker_timeout is dropped
//     (Expire), and comes back with its next request (Touch). A worker never
//     heard from holds no lease and is never dropped: a step waits for it.
//   - The registry (with a coordinator, docs/elastic.md): the workers that
//     hold a key in etcd, as the owner's watch reports them (Registered).
//     Until the first report every worker is expected, as without one;
//     that report leaves out (silently) those not in it. Later, a worker
//     whose key appears joins the steps (its lease, with leases, starts
//     then), and one whose key goes leaves them at once (it stopped, or
//     etcd let its lease expire) and stays out until its key is back (a
//     request it sent before it left, arriving late, does not bring it
//     back). A worker that was never in the set (it has no key: started
//     with --servers, or etcd lost it) comes in with its next request; one
//     whose key does not count yet (it loads its data, or waits for an
//     epoch: coord/elastic_shares.h) does not. A
//     report changes only the workers whose key came or went since the one
//     before. The leases hold on top: a worker
//     in the set that falls silent is dropped as without a registry.
// Each drop or return comes back as a LeaseChange for the owner to act on
// (ConsistencyPolicy::SetLive) and log (unless its line is empty):
//
//   shard 0: worker 2 dropped: no request for 3.0s (--worker_timeout=3s)
//            at step 7; sync steps close without it until it is back
//   shard 0: worker 2 is back (at step 9); sync steps wait for it again
//   shard 0: worker 3 joined the job (registered in etcd) at step 12;
//            sync steps wait for it
//   shard 0: worker 3 left the job (its etcd key is gone) at step 40;
//            sync steps close without it
//
// Time is passed in (`now`) and nothing here sleeps or owns a thread. The
// owner keeps an alarm: each LeaseEvents says when Expire must run next
// (wake_at), and the owner's timer calls Expire at or after that time.
// Calling Expire early is harmless (nothing expires; wake_at repeats the
// pending check, so an owner whose timer keeps one alarm sets it again).
//
// Not thread-safe: the owner calls it under its lock.
#ifndef PS_SERVER_CORE_MEMBERSHIP_H_
#define PS_SERVER_CORE_MEMBERSHIP_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ps {

// A worker dropped (live = false) or back (live = true), with its log line.
struct LeaseChange {
  int worker = 0;
  bool live = false;
  std::string line;      // empty: nothing to log
  bool expired = false;  // a drop by worker_timeout (the metric counts those)
};

// What a call changed.
struct LeaseEvents {
  std::vector<LeaseChange> changes;  // in worker order
  // When the owner's timer must call Expire next; InfiniteFuture: no alarm
  // to set (none is due, or the one set already is early enough).
  absl::Time wake_at = absl::InfiniteFuture();
};

class Membership {
 public:
  // `shard_id` names the shard in the lines. Leases are on iff
  // worker_timeout > 0 (the owner passes zero in async mode).
  // With `registry`, workers are live by the registry's rule (above).
  // REQUIRES: num_workers >= 1.
  Membership(int shard_id, int num_workers, absl::Duration worker_timeout, bool registry = false);

  bool leases() const { return worker_timeout_ > absl::ZeroDuration(); }
  bool registry() const { return registry_; }
  // Whether a request must be reported (Touch): leases or a registry.
  bool tracks_requests() const { return leases() || registry_; }

  // Records that `worker` registered or pushed. REQUIRES: a valid worker id.
  void MarkSeen(int worker) { seen_.insert(worker); }
  void MarkSeen(const std::vector<int>& workers) { seen_.insert(workers.begin(), workers.end()); }
  // The workers seen, ascending.
  std::vector<int> seen() const { return {seen_.begin(), seen_.end()}; }

  // A request from `worker` at `now` (step: the shard's version, for the
  // line): renews its lease and, if it was dropped or never in the
  // registry's set, brings it back. Without leases or a registry: nothing. REQUIRES: a
  // valid worker id.
  LeaseEvents Touch(int worker, absl::Time now, int64_t step);

  // The registry's set now: every worker that holds a key that counts
  // (ids out of range are ignored). Those that entered it since the last
  // report become live (their lease starting at `now`), those that left it
  // stop being live, each with its line; the first report leaves out the
  // others without a line. `held`: the workers whose key is there but does
  // not count yet (loading their data, or waiting for an epoch): out of the
  // set, and their requests do not bring them in. Without a registry:
  // nothing.
  LeaseEvents Registered(const std::vector<int>& workers, absl::Time now, int64_t step,
                         const std::vector<int>& held = {});

  // The run is live (a worker holds a copy of the weights): every worker
  // never heard from gets a lease from `now`, so one that died while the
  // shard was down is dropped after worker_timeout instead of waited for.
  LeaseEvents ExpectAll(absl::Time now);

  // Drops every leased worker silent for worker_timeout or longer at `now`.
  // Before the pending check is due it changes nothing. wake_at: the next
  // check (the earliest lease still running), InfiniteFuture if none.
  LeaseEvents Expire(absl::Time now, int64_t step);

  // The live workers: with leases, those heard from in this incarnation
  // (with a registry: in its set) and not dropped; without leases, those in
  // the registry's set. Empty without either. Ascending.
  std::vector<int> live() const;
  // The workers whose lease ran out (they were live before), ascending.
  std::vector<int> dropped() const { return {dropped_.begin(), dropped_.end()}; }
  // Every worker a step must not wait for: dropped, or (with a registry)
  // out of its set. Ascending.
  std::vector<int> not_live() const;

 private:
  LeaseEvents Arm(absl::Time when);

  const int shard_id_;
  const absl::Duration worker_timeout_;
  const bool registry_;
  std::set<int> seen_;
  // With a registry: the workers out of its set (and not back by a
  // request); the set of the last report (unset before the first).
  std::set<int> away_;
  std::optional<std::set<int>> reported_;
  // Away because their key went (a request does not bring them back).
  std::set<int> left_;
  // Holding a key that does not count (the last report's `held`).
  std::set<int> held_;
  // By worker: when it was last heard from (InfinitePast: not yet).
  std::vector<absl::Time> last_seen_;
  std::set<int> dropped_;
  // When Expire has something to do next (InfiniteFuture: nothing).
  absl::Time next_check_ = absl::InfiniteFuture();
};

}  // namespace ps

#endif  // PS_SERVER_CORE_MEMBERSHIP_H_
