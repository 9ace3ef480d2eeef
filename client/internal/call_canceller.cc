#include "client/internal/call_canceller.h"

#include <algorithm>
#include <utility>

namespace ps {

void CallCanceller::BeginOperation() {
  absl::MutexLock l(&mu_);
  operation_from_ = cancels_;
}

bool CallCanceller::cancelled() const {
  absl::MutexLock l(&mu_);
  return cancels_ != operation_from_;
}

void CallCanceller::Cancel() {
  absl::MutexLock l(&mu_);
  ++cancels_;
  for (auto& [id, cancel] : calls_) cancel();
}

bool CallCanceller::SleepUnlessCancelled(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  auto cancelled = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return cancels_ != operation_from_; };
  while (true) {
    const absl::Time until = std::min(deadline, absl::Now() + interrupt_every());
    {
      absl::MutexLock l(&mu_);
      if (mu_.AwaitWithDeadline(absl::Condition(&cancelled), until)) return false;
    }
    if (until >= deadline) return true;
    if (PollInterrupt()) return false;
  }
}

void CallCanceller::SetInterrupt(std::function<bool()> check, absl::Duration every) {
  check_ = std::move(check);
  every_ = every;
}

bool CallCanceller::PollInterrupt() {
  if (!check_ || !check_()) return false;
  Cancel();
  return true;
}

CallCanceller::Registration::Registration(CallCanceller* canceller, std::function<void()> cancel)
    : canceller_(canceller) {
  if (canceller_ == nullptr) return;
  absl::MutexLock l(&canceller_->mu_);
  id_ = ++canceller_->next_id_;
  // The operation was cancelled before this call began: it ends at once.
  if (canceller_->cancels_ != canceller_->operation_from_) cancel();
  canceller_->calls_.emplace(id_, std::move(cancel));
}

CallCanceller::Registration::~Registration() {
  if (canceller_ == nullptr) return;
  absl::MutexLock l(&canceller_->mu_);
  canceller_->calls_.erase(id_);
}

}  // namespace ps
