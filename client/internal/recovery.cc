#include "client/internal/recovery.h"

#include <algorithm>
#include <utility>

namespace ps {

bool MayRetry(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kCancelled ||
         code == absl::StatusCode::kAborted || code == absl::StatusCode::kFailedPrecondition;
}

bool RetryAfterRecovery(absl::StatusCode code, bool restarted) {
  return code != absl::StatusCode::kFailedPrecondition || restarted;
}

std::vector<ShardRecovery> PlanRecovery(const std::vector<ShardRegistration>& registered,
                                        const std::vector<KnownShard>& known) {
  std::vector<ShardRecovery> plan(registered.size());
  for (size_t s = 0; s < registered.size(); ++s) {
    const ShardRegistration& r = registered[s];
    plan[s].restarted = r.incarnation != known[s].incarnation;
    const bool behind = !r.initialized || r.version < known[s].held_version;
    plan[s].restore = behind && known[s].has_copy;
  }
  return plan;
}

CommonVersionRollback::CommonVersionRollback(std::vector<int64_t> versions)
    : versions_(std::move(versions)) {}

std::optional<CommonVersionRollback::Round> CommonVersionRollback::Next() {
  if (rounds_ > 0 && !moved_) return std::nullopt;
  if (versions_.empty() || rounds_ == static_cast<int>(versions_.size())) return std::nullopt;
  const auto [low, high] = std::minmax_element(versions_.begin(), versions_.end());
  if (*low == *high) return std::nullopt;
  Round round{*low, {}};
  for (size_t s = 0; s < versions_.size(); ++s) {
    if (versions_[s] != round.target) round.shards.push_back(static_cast<int>(s));
  }
  ++rounds_;
  moved_ = false;
  return round;
}

void CommonVersionRollback::Answered(int shard, bool rolled_back, int64_t version) {
  if (rolled_back) moved_ = true;
  versions_[shard] = version;
}

absl::Duration NextBackoff(absl::Duration backoff) {
  return std::min(2 * backoff, absl::Seconds(2));
}

absl::Duration RegisterTimeout(absl::Time deadline, absl::Time now) {
  return std::min(absl::Seconds(5), std::max(deadline - now, absl::Milliseconds(1)));
}

}  // namespace ps
