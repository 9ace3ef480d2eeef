// Waiters: the calls waiting in a shard for a version, with their deadlines
// and the timer that ends them.
//
// A waiting call is a callback, never a parked thread. It is indexed by the
// version it waits for, so a new version releases exactly the ready calls
// (TakeReady), and by deadline, so the timer fails it with
// DEADLINE_EXCEEDED when its wait runs out; Cancel ends one by ticket (its
// client went away) and Close ends them all. Adding, cancelling and
// releasing one costs O(log n). At most `max_waiting` calls wait at once.
//
// A call may also wait for a step (SSP: the slowest live worker's step,
// which can rise without the version moving): it is indexed by version
// until the version is there, then by step, so that each call moves once.
// Calls that name no step (INT64_MIN) are released by version alone.
//
// The timer also serves the owner's own alarms (WakeAt / on_alarm): the
// shard's lease checks and sync stall reports run on it.
//
// Time is passed in: deadlines are read from options.clock, and the timer
// is one the clock makes (common/clock.h), which keeps one event, at the
// earliest deadline or alarm. With RealClock() that is one thread; with a
// FakeClock the deadlines pass, and the timeouts and alarms run, only when
// the test advances the clock, on its thread.
//
// Thread-safe. No callback (a waiter's, timeout_message, on_alarm) is
// invoked with the Waiters lock held, so the owner may call Add, TakeReady
// and WakeAt under its own lock, and take that lock in timeout_message and
// on_alarm (lock order: owner, then Waiters, then the timer). The
// destructor closes the waiters and destroys the timer (waiting for a
// callback that runs on it); the owner must keep what the options'
// functions use alive until then.
#ifndef PS_SERVER_CORE_WAITERS_H_
#define PS_SERVER_CORE_WAITERS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "server/core/stats.h"
#include "server/core/weights_snapshot.h"

namespace ps {

struct WaitersOptions {
  std::string name = "shard 0";  // starts the cancel and limit messages
  // Most calls waiting at once; past it Add fails with RESOURCE_EXHAUSTED.
  int64_t max_waiting = 10000;
  // The wait of a call that asks for none (zero or negative), and the
  // longest any call gets.
  absl::Duration default_wait = absl::Seconds(60);
  absl::Duration max_wait = absl::Minutes(30);
  // Kept equal to the number of waiting calls; may be null. Borrowed.
  Gauge* waiting = nullptr;
  // The message of a call that waited `waited` for `version` in vain.
  // Called on the timer. Null: a plain message.
  std::function<std::string(int64_t version, absl::Duration waited)> timeout_message;
  // Called on the timer at or after each time given to WakeAt, with the
  // clock's time.
  std::function<void(absl::Time now)> on_alarm;
  // The time of the deadlines and alarms, and the maker of the timer they
  // run on. Borrowed: must outlive the Waiters.
  Clock* clock = RealClock();
};

class Waiters {
 public:
  using Callback = std::function<void(absl::StatusOr<WeightsSnapshot>)>;

  // Makes the timer (options.clock->NewTimer()).
  explicit Waiters(WaitersOptions options);
  // Closes (UNAVAILABLE) and destroys the timer.
  ~Waiters();

  Waiters(const Waiters&) = delete;
  Waiters& operator=(const Waiters&) = delete;

  // Queues `*done` to wait for `version`, for `wait` as clamped by the
  // options, and returns its ticket (> 0). RESOURCE_EXHAUSTED naming the
  // limit when max_waiting calls wait already, or the status given to Close
  // once closed; then `*done` is left to the caller.
  // With `step`, the call also waits until TakeReady's step is >= `step`.
  absl::StatusOr<uint64_t> Add(int64_t version, absl::Duration wait, Callback* done,
                               int64_t step = INT64_MIN);

  // Removes the calls waiting for a version <= `version` and a step <=
  // `step` and returns their callbacks, for the caller to run: those
  // released by version first, lowest version first.
  std::vector<Callback> TakeReady(int64_t version, int64_t step = INT64_MAX);

  // Ends the call of `ticket` with CANCELLED ("<name>: call cancelled"), on
  // this thread. No-op if it is no longer waiting.
  void Cancel(uint64_t ticket);

  // Fails every waiting call with `status` (on this thread); later Adds
  // fail with it, and the timer rings no more. Idempotent: the first status
  // stays.
  void Close(const absl::Status& status);

  // Makes the timer call options.on_alarm once at or after `when` (the
  // earliest pending time wins; on_alarm re-arms what it still needs).
  // No-op once closed.
  void WakeAt(absl::Time when);

  // Calls waiting now.
  int64_t size() const;

 private:
  struct Waiter {
    int64_t version;
    absl::Duration wait;  // as granted, for the timeout message
    absl::Time deadline;
    Callback done;
    int64_t step = INT64_MIN;
    bool by_step = false;  // in by_step_ (its version was reached), not by_version_
  };

  // Removes `it` from every index and returns its callback.
  Callback EraseLocked(std::unordered_map<uint64_t, Waiter>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the timer's event the earliest deadline or alarm, if it is not
  // that early already.
  void ArmLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The timer's event (the `armed`th): fails the waits past their deadline
  // and rings the alarm if due, then arms the next event.
  void OnTimer(uint64_t armed) ABSL_LOCKS_EXCLUDED(mu_);

  const WaitersOptions options_;
  mutable absl::Mutex mu_;
  absl::Status closed_ ABSL_GUARDED_BY(mu_);                           // non-OK once closed
  std::unordered_map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);  // by ticket
  std::set<std::pair<int64_t, uint64_t>> by_version_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<int64_t, uint64_t>> by_step_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<absl::Time, uint64_t>> by_deadline_ ABSL_GUARDED_BY(mu_);
  uint64_t last_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time alarm_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // The timer's one pending event (0: none), its time, and how many events
  // were armed (the last one's number).
  Timer::Id event_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time event_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  uint64_t armed_ ABSL_GUARDED_BY(mu_) = 0;
  // Last: destroyed first (by the destructor), before what its events use.
  std::unique_ptr<Timer> timer_;
};

}  // namespace ps

#endif  // PS_SERVER_CORE_WAITERS_H_
