#include "common/testing/fake_clock.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace ps {
namespace {

// A test's misuse of the clock: no test may go on after it.
void Die(const char* why) {
  std::fprintf(stderr, "FakeClock: %s\n", why);
  std::abort();
}

constexpr int64_t kMaxCallbacksAtOneTime = 100000;

}  // namespace

class FakeClock::FakeTimer final : public Timer {
 public:
  explicit FakeTimer(FakeClock* clock) : clock_(clock) {}
  ~FakeTimer() override { clock_->Drop(this); }

  Id Schedule(absl::Time when, std::function<void()> fn) override {
    return clock_->Schedule(this, when, std::move(fn));
  }
  bool Cancel(Id id) override { return clock_->Cancel(this, id); }

 private:
  FakeClock* const clock_;
};

FakeClock::~FakeClock() {
  absl::MutexLock l(&mu_);
  if (timers_ != 0) Die("destroyed before its timers");
}

absl::Time FakeClock::Now() const {
  absl::MutexLock l(&mu_);
  return now_;
}

std::unique_ptr<Timer> FakeClock::NewTimer() {
  absl::MutexLock l(&mu_);
  ++timers_;
  return std::make_unique<FakeTimer>(this);
}

Timer::Id FakeClock::Schedule(const FakeTimer* timer, absl::Time when, std::function<void()> fn) {
  absl::MutexLock l(&mu_);
  const Timer::Id id = queue_.Add(when, std::move(fn));
  owner_.emplace(id, timer);
  return id;
}

bool FakeClock::Cancel(const FakeTimer* timer, Timer::Id id) {
  absl::MutexLock l(&mu_);
  auto it = owner_.find(id);
  if (it == owner_.end() || it->second != timer) return false;
  owner_.erase(it);
  return queue_.Remove(id);
}

void FakeClock::Drop(const FakeTimer* timer) {
  absl::MutexLock l(&mu_);
  for (auto it = owner_.begin(); it != owner_.end();) {
    if (it->second == timer) {
      queue_.Remove(it->first);
      it = owner_.erase(it);
    } else {
      ++it;
    }
  }
  auto idle = [this, timer]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ != timer; };
  mu_.Await(absl::Condition(&idle));  // as a join: its running callback returns
  --timers_;
}

void FakeClock::Advance(absl::Duration d) {
  if (d < absl::ZeroDuration()) Die("Advance by a negative duration: time only moves forward");
  absl::MutexLock l(&mu_);
  if (advancing_) Die("Advance from two threads at once, or from a callback");
  advancing_ = true;
  const absl::Time until = now_ + d;
  int64_t at_this_time = 0;  // callbacks run since the time last moved
  while (true) {
    std::optional<TimerQueue::Entry> due = queue_.TakeDue(until);
    if (!due.has_value()) break;
    if (due->when > now_) {
      now_ = due->when;
      at_this_time = 0;
    }
    // With a real clock such a loop would spin until the next tick; here the
    // time never moves, so it would never end: fail instead of hanging.
    if (++at_this_time > kMaxCallbacksAtOneTime) {
      Die("100000 callbacks at one time: one that schedules itself for the present?");
    }
    running_ = owner_[due->id];
    owner_.erase(due->id);
    mu_.Unlock();
    due->fn();
    due.reset();
    mu_.Lock();
    running_ = nullptr;
  }
  now_ = until;
  advancing_ = false;
}

int FakeClock::pending() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(owner_.size());
}

}  // namespace ps
