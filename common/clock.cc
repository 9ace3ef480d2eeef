#include "common/clock.h"

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/timer_queue.h"

namespace ps {
namespace {

// A Timer that runs its callbacks on a thread of its own.
class ThreadTimer final : public Timer {
 public:
  ThreadTimer() : thread_([this] { Loop(); }) {}

  ~ThreadTimer() override {
    {
      absl::MutexLock l(&mu_);
      stop_ = true;
      queue_.Clear();
      wake_.Signal();
    }
    thread_.join();
  }

  Id Schedule(absl::Time when, std::function<void()> fn) override {
    absl::MutexLock l(&mu_);
    const bool earlier = when < queue_.next();
    const Id id = queue_.Add(when, std::move(fn));
    if (earlier) wake_.Signal();
    return id;
  }

  bool Cancel(Id id) override {
    absl::MutexLock l(&mu_);
    return queue_.Remove(id);  // the wake-up it leaves finds nothing due
  }

 private:
  void Loop() {
    absl::MutexLock l(&mu_);
    while (!stop_) {
      // Whatever makes the next time earlier, or stops the timer, signals
      // wake_: this sleeps until the earliest time queued (and until
      // signalled when nothing is).
      const absl::Time next = queue_.next();
      if (next > absl::Now()) {
        wake_.WaitWithDeadline(&mu_, next);
        continue;
      }
      std::optional<TimerQueue::Entry> due = queue_.TakeDue(absl::Now());
      if (!due.has_value()) continue;
      mu_.Unlock();
      due->fn();
      due.reset();  // what the callback holds goes before the lock is taken
      mu_.Lock();
    }
  }

  absl::Mutex mu_;
  absl::CondVar wake_;  // signalled when the next time moves earlier, or on stop
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  TimerQueue queue_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: started once the rest exists
};

class AbslClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  std::unique_ptr<Timer> NewTimer() override { return std::make_unique<ThreadTimer>(); }
};

}  // namespace

Clock* RealClock() {
  static Clock* const clock = new AbslClock();
  return clock;
}

}  // namespace ps
