#include "server/core/ssp_clocks.h"

#include <algorithm>

namespace ps {

SspClocks::SspClocks(int num_workers, int staleness)
    : staleness_(staleness), clocks_(num_workers, 0), live_(num_workers, true), rises_{0} {}

int64_t SspClocks::Slowest() const {
  int64_t slowest = kNoneLive;
  for (size_t w = 0; w < clocks_.size(); ++w) {
    if (live_[w]) slowest = std::min(slowest, clocks_[w]);
  }
  return slowest;
}

int64_t SspClocks::OnPush(int worker, int64_t seq, int64_t computed_version,
                          int64_t version_after) {
  const int64_t step = std::max(clocks_[worker], seq - 1);
  const int64_t staleness = std::max<int64_t>(0, step - SlowestAt(computed_version));
  clocks_[worker] = step + 1;
  NoteSlowest(version_after);
  return staleness;
}

void SspClocks::SetLive(int worker, bool live, int64_t version) {
  if (live && !live_[worker]) {
    const int64_t slowest = Slowest();
    if (slowest != kNoneLive) clocks_[worker] = std::max(clocks_[worker], slowest);
  }
  live_[worker] = live;
  NoteSlowest(version);
}

std::vector<int> SspClocks::HoldingBack() const {
  const int64_t slowest = Slowest();
  if (slowest == kNoneLive) return {};
  int64_t fastest = slowest;
  for (size_t w = 0; w < clocks_.size(); ++w) {
    if (live_[w]) fastest = std::max(fastest, clocks_[w]);
  }
  std::vector<int> holding;
  if (fastest - slowest <= staleness_) return holding;
  for (size_t w = 0; w < clocks_.size(); ++w) {
    if (live_[w] && clocks_[w] == slowest) holding.push_back(static_cast<int>(w));
  }
  return holding;
}

void SspClocks::Reset(const std::vector<int64_t>& clocks, int64_t version) {
  std::fill(clocks_.begin(), clocks_.end(), 0);
  for (size_t w = 0; w < clocks.size() && w < clocks_.size(); ++w) {
    clocks_[w] = std::max<int64_t>(0, clocks[w]);
  }
  rises_.assign(1, version);
  const int64_t slowest = Slowest();
  base_ = slowest == kNoneLive ? 0 : slowest;
}

void SspClocks::NoteSlowest(int64_t version) {
  const int64_t slowest = Slowest();
  if (slowest == kNoneLive) return;
  const int64_t top = base_ + static_cast<int64_t>(rises_.size()) - 1;
  if (slowest - top > kHistory) {  // a leap: only the new step is kept
    rises_.assign(1, version);
    base_ = slowest;
    return;
  }
  for (int64_t t = top; t < slowest; ++t) {
    rises_.push_back(version);
  }
  while (rises_.size() > static_cast<size_t>(kHistory)) {
    rises_.pop_front();
    ++base_;
  }
}

int64_t SspClocks::SlowestAt(int64_t version) const {
  // The last rise at or before `version`; before the first one kept, the
  // first (which understates the staleness; see the header).
  const auto after = std::upper_bound(rises_.begin(), rises_.end(), version);
  const int64_t i = after == rises_.begin() ? 0 : (after - rises_.begin()) - 1;
  return base_ + i;
}

}  // namespace ps
