#include "server/core/waiters.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ps {

Waiters::Waiters(WaitersOptions options)
    : options_(std::move(options)), timer_(options_.clock->NewTimer()) {}

Waiters::~Waiters() {
  Close(absl::UnavailableError(absl::StrCat(options_.name, " is shutting down")));
  timer_.reset();  // waits for an event that runs, whose callbacks use this
}

absl::StatusOr<uint64_t> Waiters::Add(int64_t version, absl::Duration wait, Callback* done,
                                      int64_t step) {
  absl::MutexLock l(&mu_);
  if (!closed_.ok()) return closed_;
  if (static_cast<int64_t>(waiters_.size()) >= options_.max_waiting) {
    return absl::ResourceExhaustedError(
        absl::StrCat(options_.name, " already has ", waiters_.size(),
                     " calls waiting for a version (--max_waiting_calls)"));
  }
  const absl::Duration w =
      wait <= absl::ZeroDuration() ? options_.default_wait : std::min(wait, options_.max_wait);
  const uint64_t ticket = ++last_ticket_;
  const absl::Time deadline = options_.clock->Now() + w;
  waiters_.emplace(ticket, Waiter{version, w, deadline, std::move(*done), step});
  by_version_.emplace(version, ticket);
  by_deadline_.emplace(deadline, ticket);
  if (options_.waiting != nullptr) options_.waiting->Set(static_cast<int64_t>(waiters_.size()));
  ArmLocked();
  return ticket;
}

Waiters::Callback Waiters::EraseLocked(std::unordered_map<uint64_t, Waiter>::iterator it) {
  if (it->second.by_step) {
    by_step_.erase({it->second.step, it->first});
  } else {
    by_version_.erase({it->second.version, it->first});
  }
  by_deadline_.erase({it->second.deadline, it->first});
  Callback done = std::move(it->second.done);
  waiters_.erase(it);
  if (options_.waiting != nullptr) options_.waiting->Set(static_cast<int64_t>(waiters_.size()));
  return done;
}

std::vector<Waiters::Callback> Waiters::TakeReady(int64_t version, int64_t step) {
  std::vector<Callback> ready;
  absl::MutexLock l(&mu_);
  while (!by_version_.empty() && by_version_.begin()->first <= version) {
    auto it = waiters_.find(by_version_.begin()->second);
    if (it->second.step <= step) {
      ready.push_back(EraseLocked(it));
      continue;
    }
    // The version is there, the step not yet: wait by step from now on.
    by_version_.erase(by_version_.begin());
    it->second.by_step = true;
    by_step_.emplace(it->second.step, it->first);
  }
  while (!by_step_.empty() && by_step_.begin()->first <= step) {
    ready.push_back(EraseLocked(waiters_.find(by_step_.begin()->second)));
  }
  return ready;
}

void Waiters::Cancel(uint64_t ticket) {
  Callback done;
  {
    absl::MutexLock l(&mu_);
    auto it = waiters_.find(ticket);
    if (it == waiters_.end()) return;
    done = EraseLocked(it);
  }
  done(absl::CancelledError(absl::StrCat(options_.name, ": call cancelled")));
}

void Waiters::Close(const absl::Status& status) {
  std::unordered_map<uint64_t, Waiter> failed;
  absl::Status s;
  {
    absl::MutexLock l(&mu_);
    if (closed_.ok()) closed_ = status;
    s = closed_;
    failed.swap(waiters_);
    by_version_.clear();
    by_step_.clear();
    by_deadline_.clear();
    if (options_.waiting != nullptr) options_.waiting->Set(0);
    if (event_ != 0) timer_->Cancel(event_);
    event_ = 0;
    event_at_ = absl::InfiniteFuture();
  }
  for (auto& [ticket, w] : failed) w.done(s);
}

void Waiters::WakeAt(absl::Time when) {
  absl::MutexLock l(&mu_);
  if (!closed_.ok() || when >= alarm_) return;
  alarm_ = when;
  ArmLocked();
}

int64_t Waiters::size() const {
  absl::MutexLock l(&mu_);
  return static_cast<int64_t>(waiters_.size());
}

void Waiters::ArmLocked() {
  absl::Time next = alarm_;
  if (!by_deadline_.empty()) next = std::min(next, by_deadline_.begin()->first);
  if (next >= event_at_) return;  // the pending event comes early enough
  if (event_ != 0) timer_->Cancel(event_);
  event_ = timer_->Schedule(next, [this, armed = ++armed_] { OnTimer(armed); });
  event_at_ = next;
}

void Waiters::OnTimer(uint64_t armed) {
  std::vector<std::pair<Waiter, Callback>> expired;
  bool alarm;
  absl::Time now;
  {
    absl::MutexLock l(&mu_);
    if (!closed_.ok()) return;
    // This event is the pending one unless a Cancel came too late for it;
    // either way it does what is due, and the next one is armed below.
    if (armed == armed_) {
      event_ = 0;
      event_at_ = absl::InfiniteFuture();
    }
    now = options_.clock->Now();
    alarm = alarm_ <= now;
    if (alarm) alarm_ = absl::InfiniteFuture();
    while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
      auto it = waiters_.find(by_deadline_.begin()->second);
      Waiter w{it->second.version, it->second.wait, it->second.deadline, nullptr,
               it->second.step};
      expired.emplace_back(std::move(w), EraseLocked(it));
    }
    ArmLocked();
  }
  if (alarm && options_.on_alarm) options_.on_alarm(now);
  for (auto& [w, done] : expired) {
    done(absl::DeadlineExceededError(options_.timeout_message
                                         ? options_.timeout_message(w.version, w.wait)
                                         : absl::StrCat(options_.name, ": gave up after ",
                                                        absl::FormatDuration(w.wait),
                                                        " waiting for version ", w.version)));
  }
}

}  // namespace ps
