#include "common/timer_queue.h"

namespace ps {

Timer::Id TimerQueue::Add(absl::Time when, std::function<void()> fn) {
  const Timer::Id id = ++last_id_;
  by_time_.emplace(std::make_pair(when, id), std::move(fn));
  time_of_.emplace(id, when);
  return id;
}

bool TimerQueue::Remove(Timer::Id id) {
  auto it = time_of_.find(id);
  if (it == time_of_.end()) return false;
  by_time_.erase({it->second, id});
  time_of_.erase(it);
  return true;
}

absl::Time TimerQueue::next() const {
  return by_time_.empty() ? absl::InfiniteFuture() : by_time_.begin()->first.first;
}

std::optional<TimerQueue::Entry> TimerQueue::TakeDue(absl::Time now) {
  if (by_time_.empty() || by_time_.begin()->first.first > now) return std::nullopt;
  auto it = by_time_.begin();
  Entry e{it->first.first, it->first.second, std::move(it->second)};
  by_time_.erase(it);
  time_of_.erase(e.id);
  return e;
}

void TimerQueue::Clear() {
  by_time_.clear();
  time_of_.clear();
}

}  // namespace ps
