// FakeClock: a Clock (common/clock.h) for tests, whose time moves only when
// the test advances it.
//
// It starts at kStart. Advance(d) moves the time forward by d and runs, on
// the calling thread, every callback of its timers that falls due on the
// way: in the order of their times (of Schedule for equal times), each with
// Now() at its own time; a callback that schedules another for a time
// already reached by the advance has it run before Advance returns. Nothing
// runs between advances: a callback scheduled for the present waits for the
// next one (RunDue). So a test of leases, deadlines or schedules needs no
// thread and no sleep, and sees the same order on every run. (A callback
// that keeps scheduling itself for the present would spin for ever: past a
// hundred thousand callbacks at one time the process aborts, saying so.)
//
//   FakeClock clock;
//   options.clock = &clock;
//   ... start a call that waits 30 s ...
//   clock.Advance(absl::Seconds(30) - absl::Nanoseconds(1));  // still waiting
//   clock.Advance(absl::Nanoseconds(1));                      // timed out
//
// Thread-safe: Now, NewTimer and the timers' Schedule and Cancel may be
// called from any thread, also from callbacks; Advance from one thread at a
// time and not from a callback (else it aborts). A timer destroyed on another
// thread while one of its callbacks runs waits for it to return. The clock
// must outlive its timers (else it aborts).
#ifndef PS_COMMON_TESTING_FAKE_CLOCK_H_
#define PS_COMMON_TESTING_FAKE_CLOCK_H_

#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/timer_queue.h"

namespace ps {

class FakeClock final : public Clock {
 public:
  // 2030-01-01 00:00:00 UTC: a time no test reaches by accident.
  static constexpr absl::Time kStart = absl::FromUnixSeconds(1893456000);

  FakeClock() = default;
  ~FakeClock() override;

  FakeClock(const FakeClock&) = delete;
  FakeClock& operator=(const FakeClock&) = delete;

  absl::Time Now() const override;
  std::unique_ptr<Timer> NewTimer() override;

  // Moves the time forward by `d` (>= 0), running what falls due on the way.
  void Advance(absl::Duration d);
  // Runs what is due now: Advance(0).
  void RunDue() { Advance(absl::ZeroDuration()); }

  // The callbacks waiting, of all its timers.
  int pending() const;

 private:
  class FakeTimer;
  Timer::Id Schedule(const FakeTimer* timer, absl::Time when, std::function<void()> fn);
  bool Cancel(const FakeTimer* timer, Timer::Id id);
  void Drop(const FakeTimer* timer);

  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = kStart;
  TimerQueue queue_ ABSL_GUARDED_BY(mu_);
  std::map<Timer::Id, const FakeTimer*> owner_ ABSL_GUARDED_BY(mu_);  // of each queued id
  int timers_ ABSL_GUARDED_BY(mu_) = 0;                               // alive
  bool advancing_ ABSL_GUARDED_BY(mu_) = false;
  const FakeTimer* running_ ABSL_GUARDED_BY(mu_) = nullptr;  // whose callback runs now
};

}  // namespace ps

#endif  // PS_COMMON_TESTING_FAKE_CLOCK_H_
