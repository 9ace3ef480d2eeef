#include "client/internal/recovery.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

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

absl::StatusOr<std::vector<std::vector<float>>> RecutCopy(
    const ModelSpec& spec, const std::vector<std::shared_ptr<const SliceLayout>>& from,
    const std::vector<std::vector<float>>& copy,
    const std::vector<std::shared_ptr<const SliceLayout>>& to) {
  std::vector<std::vector<float>> out(to.size());
  if (std::all_of(copy.begin(), copy.end(), [](const auto& c) { return c.empty(); })) return out;
  if (copy.size() != from.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the client's copy holds ", copy.size(),
                                                   " shards, its layouts ", from.size()));
  }
  // The whole tensors, then cut the new way.
  std::vector<std::vector<float>> whole(spec.size());
  for (size_t t = 0; t < spec.size(); ++t) whole[t].resize(spec[t].num_elements());
  for (size_t s = 0; s < from.size(); ++s) {
    if (static_cast<int64_t>(copy[s].size()) != from[s]->num_elements) {
      return absl::InvalidArgumentError(absl::StrCat("the client's copy of shard ", s, " holds ",
                                                     copy[s].size(), " values, its layout ",
                                                     from[s]->num_elements));
    }
    for (const SliceRange& r : from[s]->slices) {
      std::copy_n(copy[s].begin() + r.flat_offset, r.length,
                  whole[r.tensor_index].begin() + r.offset);
    }
  }
  for (size_t s = 0; s < to.size(); ++s) {
    out[s].resize(to[s]->num_elements);
    for (const SliceRange& r : to[s]->slices) {
      std::copy_n(whole[r.tensor_index].begin() + r.offset, r.length,
                  out[s].begin() + r.flat_offset);
    }
  }
  return out;
}

absl::Duration NextBackoff(absl::Duration backoff) {
  return std::min(2 * backoff, absl::Seconds(2));
}

absl::Duration RegisterTimeout(absl::Time deadline, absl::Time now) {
  return std::min(absl::Seconds(5), std::max(deadline - now, absl::Milliseconds(1)));
}

}  // namespace ps
