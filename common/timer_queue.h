// TimerQueue: the callbacks of a Timer (common/clock.h) waiting for their
// time, in the order they run: by time, then by id (ids rise with each Add,
// so equal times run in the order they were added). Adding, removing and
// taking one costs O(log n).
//
// A plain data structure shared by the real timer (common/clock.cc) and the
// fake one (common/testing/fake_clock.h). Not thread-safe: its owner locks
// it.
#ifndef PS_COMMON_TIMER_QUEUE_H_
#define PS_COMMON_TIMER_QUEUE_H_

#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "absl/time/time.h"
#include "common/clock.h"

namespace ps {

class TimerQueue {
 public:
  struct Entry {
    absl::Time when;
    Timer::Id id = 0;
    std::function<void()> fn;
  };

  // Queues `fn` for `when`; returns its id (> 0).
  Timer::Id Add(absl::Time when, std::function<void()> fn);

  // Removes the entry of `id`; false if it is not queued.
  bool Remove(Timer::Id id);

  // The earliest time queued; InfiniteFuture when empty.
  absl::Time next() const;

  // Removes and returns the first entry whose time is <= `now`, if any.
  std::optional<Entry> TakeDue(absl::Time now);

  // Removes every entry.
  void Clear();

 private:
  Timer::Id last_id_ = 0;
  std::map<std::pair<absl::Time, Timer::Id>, std::function<void()>> by_time_;
  std::unordered_map<Timer::Id, absl::Time> time_of_;  // by id
};

}  // namespace ps

#endif  // PS_COMMON_TIMER_QUEUE_H_
