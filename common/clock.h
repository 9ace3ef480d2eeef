// Clock and Timer: the time as the server's rules see it, and the thread
// that runs what falls due.
//
// Code that keeps deadlines, leases or schedules (the shard's waiting calls,
// leases and stall reports; the checkpointer's period) reads the time from a
// Clock and runs its alarms on a Timer made by that Clock, both passed in
// through its options, instead of calling absl::Now() or starting a thread
// of its own. Production passes RealClock(); tests pass a FakeClock
// (common/testing/fake_clock.h), whose time moves only when the test
// advances it, so that a 30 s lease is tested at once and without a sleep.
//
// Example:
//   Clock* clock = RealClock();
//   std::unique_ptr<Timer> timer = clock->NewTimer();
//   Timer::Id id = timer->Schedule(clock->Now() + absl::Seconds(1), [] { ... });
//   timer->Cancel(id);  // false if it ran, or is running
//
// Ownership: a Clock is borrowed by everything that uses it, and must
// outlive them and every Timer it made; RealClock() is never destroyed. A
// Timer belongs to whoever made it (NewTimer returns a unique_ptr).
//
// Thread safety: both are thread-safe. A Timer runs its callbacks one at a
// time, in the order of their times (of Schedule for equal times), and never
// with a lock of its own held: a callback may take its owner's locks and
// call Schedule and Cancel, and the owner may call Schedule and Cancel with
// its own locks held (lock order: owner, then timer).
#ifndef PS_COMMON_CLOCK_H_
#define PS_COMMON_CLOCK_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/time/time.h"

namespace ps {

class Timer {
 public:
  using Id = uint64_t;

  // Drops the callbacks not yet run, and waits for a running one to return
  // (as a thread's join). REQUIRES: not called from one of its callbacks.
  virtual ~Timer() = default;

  // Runs `fn` once, at or after `when` (a time already past: as soon as the
  // timer can). Returns its id (> 0) for Cancel.
  virtual Id Schedule(absl::Time when, std::function<void()> fn) = 0;

  // Drops the callback of `id` if it has not started; returns whether it
  // did. A callback that runs already is not waited for.
  virtual bool Cancel(Id id) = 0;
};

class Clock {
 public:
  virtual ~Clock() = default;

  virtual absl::Time Now() const = 0;

  // A Timer on this clock's time. RealClock's runs its callbacks on a
  // thread of its own, started here and joined by its destructor.
  virtual std::unique_ptr<Timer> NewTimer() = 0;
};

// absl::Now(), and a thread per Timer. One object for the process, never
// destroyed.
Clock* RealClock();

}  // namespace ps

#endif  // PS_COMMON_CLOCK_H_
