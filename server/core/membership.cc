#include "server/core/membership.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ps {

Membership::Membership(int shard_id, int num_workers, absl::Duration worker_timeout, bool registry)
    : shard_id_(shard_id),
      worker_timeout_(worker_timeout),
      registry_(registry),
      last_seen_(num_workers, absl::InfinitePast()) {}

LeaseEvents Membership::Arm(absl::Time when) {
  // Leases only move later, so a check already set is never late.
  if (next_check_ != absl::InfiniteFuture()) return {};
  next_check_ = when;
  LeaseEvents events;
  events.wake_at = when;
  return events;
}

LeaseEvents Membership::Touch(int worker, absl::Time now, int64_t step) {
  LeaseEvents events;
  bool back = false;
  if (leases()) {
    last_seen_[worker] = now;
    events = Arm(now + worker_timeout_);
    back = dropped_.erase(worker) > 0;
  }
  // Its key may not have reached the watch yet, or it has none: a request
  // says it is here. One whose key went is not back before its key is (a
  // late request of a worker that left).
  const bool returned =
      left_.count(worker) == 0 && held_.count(worker) == 0 && away_.erase(worker) > 0;
  if (returned || back) {
    events.changes.push_back(LeaseChange{
        worker, true,
        absl::StrCat("shard ", shard_id_, ": worker ", worker, " is back (at step ", step, ")",
                     returned ? " before etcd lists it" : "", "; sync steps wait for it again")});
  }
  return events;
}

LeaseEvents Membership::Registered(const std::vector<int>& workers, absl::Time now, int64_t step,
                                   const std::vector<int>& held) {
  LeaseEvents events;
  if (!registry_) return events;
  const int n = static_cast<int>(last_seen_.size());
  std::set<int> was_held;
  was_held.swap(held_);
  for (int w : held) {
    if (w >= 0 && w < n) held_.insert(w);
  }
  std::set<int> set;
  for (int w : workers) {
    if (w >= 0 && w < n) set.insert(w);
  }
  const bool first = !reported_.has_value();
  std::set<int> before;
  if (first) {
    for (int w = 0; w < n; ++w) before.insert(w);  // all were expected
  } else {
    before = *reported_;
  }
  for (int w = 0; w < n; ++w) {
    const bool in = set.count(w) > 0, was = before.count(w) > 0;
    if (in && !was) left_.erase(w);
    if (in && !was && away_.erase(w) > 0) {
      // Registering is a sign of life: the lease starts now, so a worker
      // that registers and never comes is dropped after worker_timeout.
      if (leases()) {
        last_seen_[w] = now;
        const LeaseEvents armed = Arm(now + worker_timeout_);
        events.wake_at = std::min(events.wake_at, armed.wake_at);
      }
      events.changes.push_back(
          LeaseChange{w, true,
                      absl::StrCat("shard ", shard_id_, ": worker ", w,
                                   " joined the job (registered in etcd) at step ", step,
                                   "; sync steps wait for it")});
    } else if (!in && was && away_.insert(w).second) {
      if (!first) left_.insert(w);
      // Away implies not dropped. One dropped already: steps close without
      // it as they did.
      if (dropped_.erase(w) > 0) continue;
      events.changes.push_back(
          LeaseChange{w, false,
                      first ? std::string()
                            : absl::StrCat("shard ", shard_id_, ": worker ", w,
                                           " left the job (its etcd key is gone) at step ", step,
                                           "; sync steps close without it")});
    }
  }
  // A held worker whose key went (it stopped before it had a share): a
  // late request of it does not bring it in either.
  for (int w : was_held) {
    if (held_.count(w) == 0 && set.count(w) == 0) left_.insert(w);
  }
  reported_ = std::move(set);
  return events;
}

LeaseEvents Membership::ExpectAll(absl::Time now) {
  if (!leases()) return {};
  for (int w = 0; w < static_cast<int>(last_seen_.size()); ++w) {
    if (last_seen_[w] == absl::InfinitePast() && away_.count(w) == 0) last_seen_[w] = now;
  }
  return Arm(now + worker_timeout_);
}

LeaseEvents Membership::Expire(absl::Time now, int64_t step) {
  LeaseEvents events;
  if (!leases() || now < next_check_) {
    events.wake_at = next_check_;
    return events;
  }
  next_check_ = absl::InfiniteFuture();
  for (int w = 0; w < static_cast<int>(last_seen_.size()); ++w) {
    if (last_seen_[w] == absl::InfinitePast() || dropped_.count(w) > 0 || away_.count(w) > 0) {
      continue;
    }
    const absl::Time expires = last_seen_[w] + worker_timeout_;
    if (expires > now) {
      next_check_ = std::min(next_check_, expires);
      continue;
    }
    dropped_.insert(w);
    events.changes.push_back(
        LeaseChange{w, false,
                    absl::StrFormat("shard %d: worker %d dropped: no request for %.1fs "
                                    "(--worker_timeout=%s) at step %d; "
                                    "sync steps close without it until it is back",
                                    shard_id_, w, absl::ToDoubleSeconds(now - last_seen_[w]),
                                    absl::FormatDuration(worker_timeout_), step),
                    /*expired=*/true});
  }
  events.wake_at = next_check_;
  return events;
}

std::vector<int> Membership::live() const {
  std::vector<int> live;
  if (!tracks_requests()) return live;
  for (int w = 0; w < static_cast<int>(last_seen_.size()); ++w) {
    if (away_.count(w) > 0 || dropped_.count(w) > 0) continue;
    if (!registry_ && last_seen_[w] == absl::InfinitePast()) continue;
    live.push_back(w);
  }
  return live;
}

std::vector<int> Membership::not_live() const {
  std::set<int> out = dropped_;
  out.insert(away_.begin(), away_.end());
  return {out.begin(), out.end()};
}

}  // namespace ps
