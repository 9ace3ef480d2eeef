#include "server/core/membership.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ps {

Membership::Membership(int shard_id, int num_workers, absl::Duration worker_timeout)
    : shard_id_(shard_id),
      worker_timeout_(worker_timeout),
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
  if (!leases()) return {};
  last_seen_[worker] = now;
  LeaseEvents events = Arm(now + worker_timeout_);
  if (dropped_.erase(worker) > 0) {
    events.changes.push_back(LeaseChange{
        worker, true,
        absl::StrCat("shard ", shard_id_, ": worker ", worker, " is back (at step ", step,
                     "); sync steps wait for it again")});
  }
  return events;
}

LeaseEvents Membership::ExpectAll(absl::Time now) {
  if (!leases()) return {};
  for (absl::Time& seen : last_seen_) {
    if (seen == absl::InfinitePast()) seen = now;
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
    if (last_seen_[w] == absl::InfinitePast() || dropped_.count(w) > 0) continue;
    const absl::Time expires = last_seen_[w] + worker_timeout_;
    if (expires > now) {
      next_check_ = std::min(next_check_, expires);
      continue;
    }
    dropped_.insert(w);
    events.changes.push_back(LeaseChange{
        w, false,
        absl::StrFormat("shard %d: worker %d dropped: no request for %.1fs "
                        "(--worker_timeout=%s) at step %d; "
                        "sync steps close without it until it is back",
                        shard_id_, w, absl::ToDoubleSeconds(now - last_seen_[w]),
                        absl::FormatDuration(worker_timeout_), step)});
  }
  events.wake_at = next_check_;
  return events;
}

std::vector<int> Membership::live() const {
  std::vector<int> live;
  if (!leases()) return live;
  for (int w = 0; w < static_cast<int>(last_seen_.size()); ++w) {
    if (last_seen_[w] != absl::InfinitePast() && dropped_.count(w) == 0) live.push_back(w);
  }
  return live;
}

}  // namespace ps
