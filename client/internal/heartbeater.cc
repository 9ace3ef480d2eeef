#include "client/internal/heartbeater.h"

#include <algorithm>
#include <utility>

namespace ps {

absl::Duration HeartbeatPeriod(absl::Duration lease) {
  return std::max(lease / 3, absl::Milliseconds(100));
}

Heartbeater::Heartbeater(absl::Duration period, std::function<void()> beat)
    : period_(period), beat_(std::move(beat)), thread_([this] { Loop(); }) {}

Heartbeater::~Heartbeater() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void Heartbeater::Loop() {
  absl::MutexLock l(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), period_)) {
    mu_.Unlock();
    beat_();
    mu_.Lock();
  }
}

}  // namespace ps
